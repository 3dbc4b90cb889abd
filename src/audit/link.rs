//! `Link`: the part of a session's chain that turns records into hashed
//! lines, shared by the chain handle and the writer task.
//!
//! With [`super::FsyncMode::Always`] the appender links its own entry, so
//! the entry is hashed before its message moves, as the appender waits for
//! the disk anyway. With `Batch` and `Never` an entry is acknowledged once
//! queued, so the appender only numbers it and the writer links it later,
//! off the message's path, taking the hook's `request_hash` then too (see
//! [`crate::hooks::RequestDigest`]). Either way one `Link` per session
//! holds the hashed head and the tip on disk, so the two orders cannot
//! disagree.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::head::{ChainHead, Linked, Tip};
use super::record::AuditRecord;
use super::AuditError;
use crate::hooks::{Identity, Stamp};

/// One session's chain state: who and what every entry names, the head
/// entries are hashed onto, and the last entry the writer put in the file.
#[derive(Debug)]
pub(crate) struct Link {
    session_id: String,
    /// Who opened the session, named on every entry.
    caller: Option<Arc<Identity>>,
    /// The upstream of a virtual server the session reaches, named on
    /// every entry.
    upstream: Option<Arc<str>>,
    head: Mutex<ChainHead>,
    /// The last entry the writer put in the file.
    on_disk: Mutex<Tip>,
}

impl Link {
    /// An empty chain for `session_id`.
    pub(crate) fn new(
        session_id: &str,
        caller: Option<Arc<Identity>>,
        upstream: Option<&str>,
    ) -> Self {
        Self {
            session_id: session_id.to_owned(),
            caller,
            upstream: upstream.map(Arc::from),
            head: Mutex::new(ChainHead::default()),
            on_disk: Mutex::new(Tip::default()),
        }
    }

    /// The session this chain records.
    pub(crate) fn session_id(&self) -> &str {
        &self.session_id
    }

    /// Hashes `record` onto the head as the chain's next entry, linked in
    /// `epoch` and stamped `timestamp`. The caller holds `head` (from
    /// [`Self::lock_head`]) so that linking and enqueueing are one step.
    pub(crate) fn link(
        &self,
        head: &mut ChainHead,
        mut record: Box<AuditRecord>,
        epoch: u64,
        timestamp: String,
    ) -> Result<Linked, AuditError> {
        self.resync(head, epoch);
        self.complete(&mut record);
        head.link_at(&self.session_id, &record, timestamp)
    }

    /// The latest `entry_hash` linked in `epoch`, `None` before the first.
    pub(crate) fn hash(&self, epoch: u64) -> Option<String> {
        let mut head = self.lock_head();
        self.resync(&mut head, epoch);
        head.hash().map(str::to_owned)
    }

    /// The chain's last entry in the file.
    pub(crate) fn on_disk(&self) -> Tip {
        lock(&self.on_disk).clone()
    }

    /// Records that the entry ending at `tip` is in the file. Entries of a
    /// chain are written in order, so the latest report is the tip.
    pub(crate) fn settle(&self, tip: Tip) {
        *lock(&self.on_disk) = tip;
    }

    pub(crate) fn lock_head(&self) -> MutexGuard<'_, ChainHead> {
        lock(&self.head)
    }

    /// Rewinds `head` to the entry on disk if the log failed or recovered
    /// since it last linked.
    fn resync(&self, head: &mut ChainHead, epoch: u64) {
        head.resync(epoch, || self.on_disk());
    }

    /// Names the session's caller and upstream on `record` (shared, not
    /// copied).
    fn complete(&self, record: &mut AuditRecord) {
        if let Some(caller) = &self.caller {
            record.set_caller(caller);
        }
        if let Some(upstream) = &self.upstream {
            record.set_upstream(Arc::clone(upstream));
        }
    }
}

/// An entry numbered by its appender and linked by the writer.
#[derive(Debug)]
pub(crate) struct Deferred {
    /// The chain it belongs to.
    pub(crate) link: Arc<Link>,
    /// The record, boxed by its appender: it crosses several futures and
    /// the writer's queue, and moves as a pointer.
    pub(crate) record: Box<AuditRecord>,
    /// When it was appended, which is when the step happened.
    pub(crate) timestamp: Stamp,
    /// The `entry_id` its appender was given.
    pub(crate) entry_id: u64,
}

impl Deferred {
    /// Links the entry onto its chain, appending its line to `out` (left
    /// as it was on error). The writer calls this for each deferred entry
    /// in queue order, which is the order they were numbered in, so the
    /// chain comes out exactly as if each appender had linked its own.
    pub(crate) fn link_into(self, epoch: u64, out: &mut Vec<u8>) -> Result<Written, AuditError> {
        let Self {
            link,
            mut record,
            timestamp,
            entry_id,
        } = self;
        let tip = {
            let mut head = link.lock_head();
            link.resync(&mut head, epoch);
            link.complete(&mut record);
            head.link_into(&link.session_id, &record, timestamp.as_str(), out)?
        };
        debug_assert_eq!(tip.entry_id, entry_id, "numbered in order");
        Ok(Written { link, tip })
    }
}

/// One queued entry, as the writer reports it back to its chain once it
/// is in the file.
#[derive(Debug)]
pub(crate) struct Written {
    pub(crate) link: Arc<Link>,
    /// The chain's tip once this entry is in the file.
    pub(crate) tip: Tip,
}

impl Written {
    /// Records that the entry is in the file.
    pub(crate) fn settle(self) {
        self.link.settle(self.tip);
    }
}

/// The head and the tip on disk change only after everything fallible
/// succeeded, so a panic elsewhere while locked cannot leave them
/// half-updated.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
