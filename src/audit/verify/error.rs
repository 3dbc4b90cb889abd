//! Why a log failed verification.

use std::io;
use std::path::PathBuf;

/// Why a log failed verification; every variant but `Io` names the 1-based
/// line where the problem shows.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// The file could not be read or repaired.
    #[error("cannot read audit log {}: {source}", path.display())]
    Io {
        /// The log file.
        path: PathBuf,
        /// The operating system's reason.
        source: io::Error,
    },

    /// A line that is not JSON (and is not a torn final line).
    #[error("line {line}: not JSON ({source})")]
    NotJson {
        /// 1-based line number.
        line: usize,
        /// The parser's complaint.
        source: serde_json::Error,
    },

    /// JSON that is not a ContextEntry this proxy writes.
    #[error("line {line}: not an audit entry: {reason}")]
    Malformed {
        /// 1-based line number.
        line: usize,
        /// What is missing or mistyped.
        reason: String,
    },

    /// The entry's content no longer matches its `entry_hash`.
    #[error("line {line}: entry {entry_id} of session {session_id} was edited (its entry_hash does not match its content)")]
    Edited {
        /// 1-based line number.
        line: usize,
        /// The entry's session.
        session_id: String,
        /// The entry's stored `entry_id`.
        entry_id: String,
    },

    /// The session skips entry ids that appear nowhere.
    #[error("line {line}: session {session_id} has entry {found} where entry {expected} belongs, and entry {expected} is nowhere: entries were deleted")]
    Deleted {
        /// 1-based line number.
        line: usize,
        /// The session.
        session_id: String,
        /// The `entry_id` that should be here.
        expected: u64,
        /// The `entry_id` that is here.
        found: u64,
    },

    /// An entry repeats an id the session already has elsewhere.
    #[error("line {line}: session {session_id} already has entry {entry_id}{}: an entry was inserted",
        other_line.map(|l| format!(" (line {l})")).unwrap_or_default())]
    Inserted {
        /// 1-based line number.
        line: usize,
        /// The session.
        session_id: String,
        /// The repeated `entry_id`.
        entry_id: u64,
        /// Where the other entry with this id is, when known.
        other_line: Option<usize>,
    },

    /// The expected entry exists, but later in the file.
    #[error("line {line}: session {session_id} has entry {found} where entry {expected} belongs (entry {expected} is at line {expected_at}): entries were reordered")]
    Reordered {
        /// 1-based line number.
        line: usize,
        /// The session.
        session_id: String,
        /// The `entry_id` that should be here.
        expected: u64,
        /// The `entry_id` that is here.
        found: u64,
        /// Where the expected entry is.
        expected_at: usize,
    },

    /// The entry's `previous_hash` does not name its predecessor: one of the
    /// two was replaced by a re-hashed forgery.
    #[error("line {line}: entry {entry_id} of session {session_id} does not link to {}: an entry was replaced",
        previous_line.map(|l| format!("the entry at line {l}")).unwrap_or_else(|| "nothing (a first entry needs previous_hash null)".into()))]
    Unlinked {
        /// 1-based line number.
        line: usize,
        /// The session.
        session_id: String,
        /// The entry's `entry_id`.
        entry_id: u64,
        /// Line of the entry it should link to; `None` for a first entry.
        previous_line: Option<usize>,
    },
}

impl VerifyError {
    /// The 1-based line the problem shows at, if it is about a line.
    pub fn line(&self) -> Option<usize> {
        match self {
            Self::Io { .. } => None,
            Self::NotJson { line, .. }
            | Self::Malformed { line, .. }
            | Self::Edited { line, .. }
            | Self::Deleted { line, .. }
            | Self::Inserted { line, .. }
            | Self::Reordered { line, .. }
            | Self::Unlinked { line, .. } => Some(*line),
        }
    }
}
