//! `acs-proxy audit export`: an audit log as a stream for other tools.
//!
//! `jsonl` writes the entries exactly as stored (the bytes `audit verify`
//! hashes); `ocsf` writes one OCSF event per line for a SIEM, per the ACS
//! Trace mapping (see [`ocsf`]). The log is read one line at a time, so
//! logs of any size export. A final line cut short by a crash is left out
//! and reported, as `audit verify` does; any other line that is not an
//! entry stops the export, naming it.

mod mapping;
pub mod ocsf;

use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub use mapping::{MappingError, OcsfMapping, StepClass};

use super::entry::ContextEntry;

/// The output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// The entries as stored, one JSON object a line.
    Jsonl,
    /// OCSF events, one JSON object a line.
    Ocsf,
}

/// Why an export stopped.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The log could not be opened or read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The log.
        path: PathBuf,
        /// The operating system's reason.
        source: io::Error,
    },
    /// A line is not an audit entry.
    #[error("line {line} is not an audit entry: {reason}")]
    Malformed {
        /// Its 1-based number.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The output could not be written (a closed pipe, a full disk).
    #[error("cannot write the export: {0}")]
    Write(#[source] io::Error),
    /// The compiled-in OCSF mapping is not shaped as the schema says.
    #[error("the ACS OCSF mapping is unusable: {0}")]
    Mapping(#[from] MappingError),
}

/// `audit export`'s arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct ExportArgs {
    /// `jsonl` (the entries as stored) or `ocsf` (OCSF events).
    #[arg(long, value_enum, default_value_t = ExportFormat::Jsonl)]
    pub format: ExportFormat,
    /// The JSONL audit log.
    pub file: PathBuf,
}

/// Runs `audit export`: the events go to stdout, problems to stderr.
pub fn run(args: &ExportArgs) -> ExitCode {
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    match export(&args.file, args.format, &mut out) {
        Ok(summary) => {
            if let Some(line) = summary.torn_tail {
                eprintln!(
                    "acs-proxy: warning: line {line} of {} is a torn final line and was not exported",
                    args.file.display()
                );
            }
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("acs-proxy: {}: {err}", args.file.display());
            ExitCode::FAILURE
        }
    }
}

/// What an export wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExportSummary {
    /// Audit entries read.
    pub entries: u64,
    /// Lines written.
    pub written: u64,
    /// The 1-based line of a torn final line that was left out.
    pub torn_tail: Option<usize>,
}

/// Exports the log at `path` to `out` in `format`.
pub fn export(
    path: &Path,
    format: ExportFormat,
    out: &mut impl Write,
) -> Result<ExportSummary, ExportError> {
    let read_error = |source| ExportError::Read {
        path: path.to_owned(),
        source,
    };
    let mapping = match format {
        ExportFormat::Ocsf => Some(OcsfMapping::acs_v0_1()?),
        ExportFormat::Jsonl => None,
    };
    let mut reader = BufReader::new(File::open(path).map_err(read_error)?);
    let mut summary = ExportSummary::default();
    let mut line = String::new();
    for number in 1.. {
        line.clear();
        if reader.read_line(&mut line).map_err(read_error)? == 0 {
            break;
        }
        let terminated = line.ends_with('\n');
        let text = line.trim_end_matches(['\n', '\r']);
        if text.trim().is_empty() {
            continue;
        }
        let entry: ContextEntry = match serde_json::from_str(text) {
            Ok(entry) => entry,
            Err(_) if !terminated => {
                summary.torn_tail = Some(number);
                break;
            }
            Err(err) => {
                return Err(ExportError::Malformed {
                    line: number,
                    reason: err.to_string(),
                })
            }
        };
        summary.entries += 1;
        match &mapping {
            None => {
                writeln!(out, "{text}").map_err(ExportError::Write)?;
                summary.written += 1;
            }
            Some(mapping) => {
                for event in ocsf::events(mapping, &entry) {
                    writeln!(out, "{event}").map_err(ExportError::Write)?;
                    summary.written += 1;
                }
            }
        }
    }
    out.flush().map_err(ExportError::Write)?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENTRY: &str = r#"{"entry_id":"1","step_id":"r","step_type":"steps/sessionStart","session_id":"s","timestamp":"2026-12-02T11:15:05.123Z","decision":"allow","previous_hash":null,"entry_hash":"h"}"#;

    fn export_text(
        text: &str,
        format: ExportFormat,
    ) -> Result<(String, ExportSummary), ExportError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        std::fs::write(&path, text).unwrap();
        let mut out = Vec::new();
        let summary = export(&path, format, &mut out)?;
        Ok((String::from_utf8(out).unwrap(), summary))
    }

    #[test]
    fn jsonl_is_the_log_as_stored_without_a_torn_tail() {
        let (out, summary) =
            export_text(&format!("{ENTRY}\n{{\"entry_id\":\"2"), ExportFormat::Jsonl).unwrap();
        assert_eq!(out, format!("{ENTRY}\n"));
        assert_eq!(summary.torn_tail, Some(2));
    }

    #[test]
    fn ocsf_writes_one_event_per_allowed_entry() {
        let (out, summary) = export_text(&format!("{ENTRY}\n"), ExportFormat::Ocsf).unwrap();
        assert_eq!((summary.entries, summary.written), (1, 1));
        let event: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(event["class_uid"], 3002);
    }

    #[test]
    fn a_bad_line_in_the_middle_is_named() {
        let err =
            export_text(&format!("{ENTRY}\nnot json\n{ENTRY}\n"), ExportFormat::Ocsf).unwrap_err();
        assert!(err.to_string().starts_with("line 2 "), "{err}");
    }
}
