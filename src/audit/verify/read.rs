//! Reading an audit log for verification: its lines with their numbers and
//! offsets, the chain members of each stored entry, and the gap a session's
//! sequence shows. Shared by the verifier and by the classification of a
//! gap, which reads the file again.

use std::io::{self, BufRead};
use std::path::Path;

use serde_json::Value;

use super::VerifyError;

pub(super) fn io_error(path: &Path) -> impl Fn(io::Error) -> VerifyError + '_ {
    move |source| VerifyError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One raw line of the file.
pub(super) struct Line {
    pub(super) number: usize,
    pub(super) offset: u64,
    pub(super) bytes: Vec<u8>,
    pub(super) terminated: bool,
}

/// The file's lines with their numbers and offsets, newline stripped.
pub(super) struct Lines<R> {
    pub(super) reader: R,
    pub(super) number: usize,
    pub(super) offset: u64,
}

impl<R: BufRead> Lines<R> {
    pub(super) fn new(reader: R) -> Self {
        Self {
            reader,
            number: 0,
            offset: 0,
        }
    }
}

impl<R: BufRead> Iterator for Lines<R> {
    type Item = io::Result<Line>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut bytes = Vec::new();
        match self.reader.read_until(b'\n', &mut bytes) {
            Ok(0) => None,
            Ok(read) => {
                let terminated = bytes.last() == Some(&b'\n');
                if terminated {
                    bytes.pop();
                }
                self.number += 1;
                let line = Line {
                    number: self.number,
                    offset: self.offset,
                    bytes,
                    terminated,
                };
                self.offset += read as u64;
                Some(Ok(line))
            }
            Err(error) => Some(Err(error)),
        }
    }
}

/// The chain members of a stored entry.
pub(super) struct Stored {
    pub(super) session_id: String,
    pub(super) entry_id: u64,
    pub(super) entry_hash: String,
    pub(super) previous_hash: Option<String>,
    pub(super) step_type: Option<String>,
}

impl Stored {
    pub(super) fn parse(line: usize, value: &Value) -> Result<Self, VerifyError> {
        let text = |member: &str| value.get(member).and_then(Value::as_str).map(str::to_owned);
        let required = |member: &'static str| {
            text(member).ok_or_else(|| VerifyError::Malformed {
                line,
                reason: format!("`{member}` is missing or not a string"),
            })
        };
        let entry_id = required("entry_id")?;
        Ok(Self {
            session_id: required("session_id")?,
            entry_id: parse_entry_id(&entry_id).ok_or_else(|| VerifyError::Malformed {
                line,
                reason: format!("entry_id {entry_id:?} is not a positive decimal sequence number"),
            })?,
            entry_hash: required("entry_hash")?,
            previous_hash: text("previous_hash"),
            step_type: text("step_type"),
        })
    }
}

/// Accepts only the canonical spelling ("7", not "07" or "+7"), since the
/// proxy writes nothing else.
fn parse_entry_id(text: &str) -> Option<u64> {
    let number: u64 = text.parse().ok()?;
    (number > 0 && number.to_string() == text).then_some(number)
}

/// An entry whose id is not the one its session expects next.
pub(super) struct Gap {
    pub(super) line: usize,
    pub(super) session_id: String,
    pub(super) expected: u64,
    pub(super) found: u64,
    pub(super) entry_hash: String,
}
