//! What travels from a chain to the writer and back: the queued command,
//! the acknowledgement an `Always`-mode appender waits for, and the report
//! that an entry reached the file. Both sides import it; neither imports
//! the other for it.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::oneshot;

use super::head::Tip;
use super::AuditError;

/// How a waiter learns whether its part of a round reached the disk.
pub(crate) type Ack = oneshot::Sender<Result<(), AuditError>>;

/// What appenders and `flush` send to the writer.
#[derive(Debug)]
pub(crate) enum Command {
    /// One finished JSONL line; `ack` is set only in `Always` mode, where
    /// the appender waits for the covering fsync. `epoch` is the log epoch
    /// it was linked in; `written` reports it to its chain once written.
    Append {
        line: Vec<u8>,
        ack: Option<Ack>,
        epoch: u64,
        written: Written,
    },
    /// Answer once everything queued before is written and synced.
    Flush { ack: Ack },
}

/// One queued entry, as the writer reports it back to its chain once it
/// is in the file.
#[derive(Debug)]
pub(crate) struct Written {
    /// The chain's tip on disk, shared with the chain.
    pub(crate) on_disk: Arc<Mutex<Tip>>,
    pub(crate) tip: Tip,
}

impl Written {
    /// Records that the entry is in the file. Entries of a chain are
    /// written in order, so the latest report is the chain's tip on disk.
    pub(crate) fn settle(self) {
        *lock(&self.on_disk) = self.tip;
    }
}

/// The head and the tip on disk change only after everything fallible
/// succeeded, so a panic elsewhere while locked cannot leave them
/// half-updated.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
