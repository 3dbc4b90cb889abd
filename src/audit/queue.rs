//! What travels from a chain to the writer and back: the queued command
//! and the acknowledgement an `Always`-mode appender waits for. Both sides
//! import it; neither imports the other for it.

use tokio::sync::oneshot;

use super::link::{Deferred, Written};
use super::AuditError;

/// How a waiter learns whether its part of a round reached the disk.
pub(crate) type Ack = oneshot::Sender<Result<(), AuditError>>;

/// What appenders and `flush` send to the writer.
#[derive(Debug)]
pub(crate) enum Command {
    /// One entry; `ack` is set only in `Always` mode, where the appender
    /// waits for the covering fsync. `epoch` is the log epoch it was linked
    /// (or numbered) in.
    Append {
        entry: Queued,
        ack: Option<Ack>,
        epoch: u64,
    },
    /// Answer once everything queued before is linked; the chain's head is
    /// then current.
    Linked { ack: oneshot::Sender<()> },
    /// Answer once everything queued before is written and synced.
    Flush { ack: Ack },
}

/// An entry as its appender queued it.
#[derive(Debug)]
pub(crate) enum Queued {
    /// Linked by the appender (`Always`): its finished JSONL line, and the
    /// report to its chain once written.
    Line { line: Vec<u8>, written: Written },
    /// Numbered by the appender, to be linked by the writer (`Batch`,
    /// `Never`). Its record is boxed, so the slot stays small.
    Deferred(Deferred),
}
