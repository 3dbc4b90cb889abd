//! The audit trail: one hash-chained `ContextEntry` per hook decision and per
//! enforcement event, appended to a JSONL file.
//!
//! What it guarantees, and why:
//!
//! - **Tamper evidence.** Entries of one ACS session form a chain exactly as
//!   ACS §8.2 defines it: each `entry_hash` covers the entry's canonical (JCS)
//!   content and the previous entry's hash. Editing, deleting, inserting or
//!   reordering an entry is found by [`verify_file`], and an external ACS
//!   auditor can recompute the same heads. Deleting the *last* entries of an
//!   unsealed chain cannot be seen from the file alone; a `steps/sessionEnd`
//!   entry seals a chain so that its truncation shows.
//! - **Nothing is dropped silently.** An entry is either queued for the
//!   single writer or the caller gets an error. A failed write or fsync
//!   marks the log unhealthy: the failed round is cut off the file, and
//!   every append returns [`AuditError::Unavailable`] (callers fail closed,
//!   or pass traffic by `[audit] on_failure`) until a retry writes the
//!   entry that records the outage. Chains then continue from their last
//!   written entry, so the file verifies across the outage.
//! - **Durability is chosen, not implied.** [`FsyncMode::Always`] resolves an
//!   append only once the fsync covering it is done; `Batch` and `Never` trade
//!   that for latency (see [`FsyncMode`]).
//! - **Order.** Entries of a session reach the file in chain order even when
//!   appended from many tasks; sessions interleave freely.
//!
//! Layout: [`entry`](ContextEntry) is the stored form, [`AuditRecord`] what
//! callers fill, `content` the members either lends to the hash, `chain`
//! the §8.2 hash, `head` the linking of records into a chain, [`AuditLog`]
//! / `writer` the shared store, [`AuditChain`] the per-session handle,
//! [`verify_file`] the offline check, and [`export`] the log as JSONL or
//! OCSF events for other tools.

mod chain;
mod content;
mod entry;
pub mod export;
mod head;
mod link;
mod mcp_id;
mod monitored;
mod outage;
mod outcome;
mod queue;
mod record;
mod round;
mod session;
mod settings;
mod status;
mod store;
mod tail;
mod verify;
mod writer;

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

pub use chain::{entry_hash, entry_hash_of, request_hash};
pub use entry::{ContextEntry, ENFORCEMENT_STEP_TYPE, SESSION_END_STEP_TYPE};
pub use mcp_id::McpId;
pub use monitored::Monitored;
pub use outage::AUDIT_UNAVAILABLE_REASON;
pub use outcome::{Action, DecisionSource};
pub use record::AuditRecord;
pub use session::{AppendReceipt, AuditChain};
pub use settings::{AuditSettings, FsyncMode, OnFailure};
pub use store::AuditLog;
pub use verify::{
    repair_torn_tail, verify_file, SessionReport, TornTail, VerifyError, VerifyReport,
};
pub use writer::RETRY_INTERVAL;

/// Why an audit entry could not be hashed, recorded or made durable.
///
/// Callers treat every variant as "no record was made" and fail closed.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The directory that should hold the log does not exist; it is not
    /// created on the fly so a typo in the config cannot scatter audit files.
    #[error("audit log directory {} does not exist (audit.path = {})", dir.display(), path.display())]
    MissingDirectory {
        /// The configured log path.
        path: PathBuf,
        /// Its parent directory, the one that is missing.
        dir: PathBuf,
    },

    /// The log file could not be opened for appending.
    #[error("cannot open audit log {} for appending: {source}", path.display())]
    Open {
        /// The configured log path.
        path: PathBuf,
        /// The operating system's reason.
        source: io::Error,
    },

    /// The log ends in a line without a newline that is not JSON, most likely
    /// a write torn by a crash; appending after it would corrupt the file.
    #[error(
        "audit log {} ends with a torn line ({bytes} bytes without a newline); \
         verify it and remove the torn tail before appending",
        path.display()
    )]
    TornTail {
        /// The configured log path.
        path: PathBuf,
        /// Length of the torn final line.
        bytes: u64,
    },

    /// Opening needs a tokio runtime to host the writer task.
    #[error("the audit log must be opened inside a tokio runtime")]
    NoRuntime,

    /// Writing or syncing the file failed; the log is now unhealthy.
    #[error("the audit log cannot be written: {0}")]
    Write(#[source] Arc<io::Error>),

    /// The log is unhealthy after a write failure and has not recovered
    /// yet, or its writer stopped.
    #[error("the audit log cannot be written (a write failed; retrying)")]
    Unavailable,

    /// A JSON value given as a ContextEntry is not shaped like one.
    #[error("not a ContextEntry: {0}")]
    Malformed(&'static str),

    /// A value to be hashed has no RFC 8785 canonical form.
    #[error(transparent)]
    Canonical(#[from] crate::jcs::JcsError),

    /// An entry could not be serialized as JSON.
    #[error("cannot serialize audit entry: {0}")]
    Serialize(#[from] serde_json::Error),
}
