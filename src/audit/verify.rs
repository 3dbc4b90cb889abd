//! Offline verification of an audit log, and repair of a crash-torn tail.
//!
//! The file is read once, line by line, keeping only each session's tip in
//! memory, so logs of any size verify. Each line must be JSON, hash to its
//! stored `entry_hash` (else it was edited), carry the session's next
//! `entry_id` (else entries were deleted, inserted or reordered) and point at
//! the previous entry's hash (else an entry was replaced). The first problem
//! stops verification; only then is the file read again to tell deletion,
//! insertion and reordering apart.
//!
//! A final line without a newline that is not JSON is a write torn by a
//! crash, not tampering: it is reported in [`VerifyReport::torn_tail`] and
//! everything before it still counts.
//!
//! What the chain cannot show: removal of a session's *last* entries. A
//! sealed session (one ending in `steps/sessionEnd`) makes that visible as
//! [`SessionReport::sealed`] being false.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::BufReader;
use std::path::Path;

use serde_json::Value;

use super::chain::entry_hash_of;
use super::entry::SESSION_END_STEP_TYPE;
use super::tail::unterminated_tail;
use super::AuditError;

mod classify;
mod error;
mod read;

use classify::classify;
pub use error::VerifyError;
use read::{io_error, Gap, Line, Lines, Stored};

/// What a successful verification found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// Entries verified, over all sessions.
    pub entries: u64,
    /// One report per session, in order of first appearance.
    pub sessions: Vec<SessionReport>,
    /// A torn final line, excluded from the counts above; worth a warning.
    pub torn_tail: Option<TornTail>,
}

/// The verified state of one session's chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionReport {
    /// The ACS session.
    pub session_id: String,
    /// Entries in its chain.
    pub entries: u64,
    /// Its latest `entry_hash` (the `chain_hash` a Guardian would publish).
    pub head: String,
    /// Whether the chain ends with a `steps/sessionEnd` entry.
    pub sealed: bool,
    /// 1-based line of its last entry.
    pub last_line: usize,
}

impl std::fmt::Display for VerifyReport {
    /// One summary line, then one line per session and a warning for a torn tail.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "ok: {} entries in {} session chain(s)",
            self.entries,
            self.sessions.len()
        )?;
        for session in &self.sessions {
            let seal = if session.sealed {
                "sealed"
            } else {
                "not sealed"
            };
            writeln!(
                f,
                "  session {}: {} entries, head {}, {seal}",
                session.session_id, session.entries, session.head
            )?;
        }
        if let Some(tail) = &self.torn_tail {
            writeln!(
                f,
                "warning: line {} is a torn final line ({} bytes, left by an interrupted write); \
                 `acs-proxy audit repair` removes it",
                tail.line, tail.bytes
            )?;
        }
        Ok(())
    }
}

/// A final line cut short by a crash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// Its 1-based line number.
    pub line: usize,
    /// Byte offset where it starts; truncating there removes it.
    pub offset: u64,
    /// Its length in bytes.
    pub bytes: u64,
}

/// Verifies every session chain in the JSONL log at `path`.
pub fn verify_file(path: impl AsRef<Path>) -> Result<VerifyReport, VerifyError> {
    let path = path.as_ref();
    let file = File::open(path).map_err(io_error(path))?;
    let mut verifier = Verifier::default();
    for line in Lines::new(BufReader::new(file)) {
        let line = line.map_err(io_error(path))?;
        match verifier.check(&line) {
            Ok(()) => {}
            Err(Problem::Torn) => {
                verifier.torn_tail = Some(TornTail {
                    line: line.number,
                    offset: line.offset,
                    bytes: line.bytes.len() as u64,
                });
                break;
            }
            Err(Problem::Invalid(error)) => return Err(error),
            Err(Problem::OutOfSequence(gap)) => return Err(classify(path, gap)?),
        }
    }
    Ok(verifier.into_report())
}

/// Cuts a torn final line off the log so appending can resume.
///
/// Returns the number of bytes removed, or `None` when the file ends with a
/// newline or its unterminated final line is whole JSON (nothing to cut).
pub fn repair_torn_tail(path: impl AsRef<Path>) -> Result<Option<u64>, VerifyError> {
    let path = path.as_ref();
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(io_error(path))?;
    let Some(tail) = unterminated_tail(&mut file).map_err(io_error(path))? else {
        return Ok(None);
    };
    if !tail.is_torn() {
        return Ok(None);
    }
    file.set_len(tail.offset).map_err(io_error(path))?;
    file.sync_all().map_err(io_error(path))?;
    Ok(Some(tail.bytes.len() as u64))
}

/// Why a line was not accepted.
enum Problem {
    Torn,
    Invalid(VerifyError),
    OutOfSequence(Gap),
}

#[derive(Default)]
struct Verifier {
    entries: u64,
    /// Each session's tip while reading, in order of first appearance.
    tips: Vec<SessionReport>,
    by_session: HashMap<String, usize>,
    torn_tail: Option<TornTail>,
}

impl Verifier {
    fn check(&mut self, line: &Line) -> Result<(), Problem> {
        let value: Value = match serde_json::from_slice(&line.bytes) {
            Ok(value) => value,
            Err(_) if !line.terminated => return Err(Problem::Torn),
            Err(source) => {
                return Err(Problem::Invalid(VerifyError::NotJson {
                    line: line.number,
                    source,
                }))
            }
        };
        let stored = Stored::parse(line.number, &value).map_err(Problem::Invalid)?;
        check_hash(line.number, &value, &stored).map_err(Problem::Invalid)?;
        self.extend_chain(line.number, stored)
    }

    /// Appends a self-consistent entry to its session's chain if it is the
    /// next one and links to the current tip.
    fn extend_chain(&mut self, line: usize, stored: Stored) -> Result<(), Problem> {
        let tip = self.tip(&stored.session_id);
        let (expected, head, previous_line) = match tip {
            Some(tip) => (
                tip.entries + 1,
                Some(tip.head.as_str()),
                Some(tip.last_line),
            ),
            None => (1, None, None),
        };
        if stored.entry_id != expected {
            return Err(Problem::OutOfSequence(Gap {
                line,
                session_id: stored.session_id,
                expected,
                found: stored.entry_id,
                entry_hash: stored.entry_hash,
            }));
        }
        if stored.previous_hash.as_deref() != head {
            return Err(Problem::Invalid(VerifyError::Unlinked {
                line,
                session_id: stored.session_id,
                entry_id: stored.entry_id,
                previous_line,
            }));
        }
        self.advance(line, stored);
        Ok(())
    }

    fn tip(&self, session_id: &str) -> Option<&SessionReport> {
        self.by_session
            .get(session_id)
            .map(|&index| &self.tips[index])
    }

    fn advance(&mut self, line: usize, stored: Stored) {
        self.entries += 1;
        let sealed = stored.step_type.as_deref() == Some(SESSION_END_STEP_TYPE);
        if let Some(&index) = self.by_session.get(&stored.session_id) {
            let report = &mut self.tips[index];
            report.entries += 1;
            report.head = stored.entry_hash;
            report.sealed = sealed;
            report.last_line = line;
            return;
        }
        self.by_session
            .insert(stored.session_id.clone(), self.tips.len());
        self.tips.push(SessionReport {
            session_id: stored.session_id,
            entries: 1,
            head: stored.entry_hash,
            sealed,
            last_line: line,
        });
    }

    fn into_report(self) -> VerifyReport {
        VerifyReport {
            entries: self.entries,
            sessions: self.tips,
            torn_tail: self.torn_tail,
        }
    }
}

/// Recomputes the §8.2 hash over the stored JSON itself, so members this
/// proxy does not know are covered too.
fn check_hash(line: usize, value: &Value, stored: &Stored) -> Result<(), VerifyError> {
    let edited = || VerifyError::Edited {
        line,
        session_id: stored.session_id.clone(),
        entry_id: stored.entry_id.to_string(),
    };
    match entry_hash_of(value) {
        Ok(hash) if hash == stored.entry_hash => Ok(()),
        Ok(_) => Err(edited()),
        // A previous_hash that is no longer a hash was edited too.
        Err(AuditError::Malformed(_)) => Err(edited()),
        Err(other) => Err(VerifyError::Malformed {
            line,
            reason: other.to_string(),
        }),
    }
}

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;
