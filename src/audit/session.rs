//! `AuditChain`: the handle through which one ACS session appends entries.
//!
//! Many tasks of a session may append at once (requests are decided
//! concurrently), yet the file must hold the session's entries in chain
//! order. Each append first waits for room in the writer's queue, then links
//! and enqueues under a short synchronous lock, so the order entries are
//! linked in is the order they are queued in, and no lock is held across an
//! `.await`.
//!
//! The chain also knows its last entry that reached the file (the writer
//! reports each one). When a write fails, the entries after it are refused,
//! and the next link after the log recovers continues from that entry, so
//! the file never holds a link to an entry it does not have.

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{mpsc, oneshot};

use super::head::{ChainHead, Tip};
use super::queue::{lock, Command, Written};
use super::record::AuditRecord;
use super::settings::FsyncMode;
use super::store::AuditLog;
use super::AuditError;
use crate::hooks::Identity;

/// What an append recorded: the caller can cite `entry_id` (e.g. as
/// `audit_entry_id` in an error reply) and `entry_hash` is the new head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendReceipt {
    /// The entry's position in its session: "1", "2", …
    pub entry_id: String,
    /// The entry's §8.2 hash, now the session's `chain_hash`.
    pub entry_hash: String,
}

/// One session's chain; cheap to clone, clones share the chain.
#[derive(Debug, Clone)]
pub struct AuditChain {
    log: AuditLog,
    state: Arc<State>,
}

#[derive(Debug)]
pub(crate) struct State {
    session_id: String,
    /// Who opened the session, named on every entry.
    caller: Option<Arc<Identity>>,
    /// The upstream of a virtual server the session reaches, named on
    /// every entry.
    upstream: Option<String>,
    head: Mutex<ChainHead>,
    /// The last entry the writer put in the file.
    on_disk: Arc<Mutex<Tip>>,
}

/// Resolves when the writer has synced an entry (`Always` mode only).
type Durable = oneshot::Receiver<Result<(), AuditError>>;

// A chain is opened from the log, but the log does not know chains: the
// constructor lives here so the store imports nothing of this module.
impl AuditLog {
    /// Starts the chain of one ACS session.
    ///
    /// Call it once per session and clone the returned handle to share it:
    /// a second call with the same id starts a second chain at entry "1",
    /// which [`super::verify_file`] rejects.
    pub fn session(&self, session_id: &str) -> AuditChain {
        self.session_of(session_id, None)
    }

    /// As [`Self::session`], for a session opened by `caller`: every entry
    /// of the chain names it.
    pub fn session_of(&self, session_id: &str, caller: Option<Arc<Identity>>) -> AuditChain {
        AuditChain::new(self.clone(), session_id, caller)
    }

    /// As [`Self::session_of`], for a session that is the upstream
    /// `upstream` of a virtual server: every entry of the chain names it,
    /// since the agent's one session spans one chain per upstream.
    pub fn session_of_upstream(
        &self,
        session_id: &str,
        caller: Option<Arc<Identity>>,
        upstream: &str,
    ) -> AuditChain {
        let mut chain = AuditChain::new(self.clone(), session_id, caller);
        if let Some(state) = Arc::get_mut(&mut chain.state) {
            state.upstream = Some(upstream.to_owned());
        }
        chain
    }
}

impl AuditChain {
    /// Starts an empty chain for `session_id` on `log`.
    pub(crate) fn new(log: AuditLog, session_id: &str, caller: Option<Arc<Identity>>) -> Self {
        Self {
            log,
            state: Arc::new(State {
                session_id: session_id.to_owned(),
                caller,
                upstream: None,
                head: Mutex::new(ChainHead::default()),
                on_disk: Arc::new(Mutex::new(Tip::default())),
            }),
        }
    }

    /// The session this chain records.
    pub fn session_id(&self) -> &str {
        &self.state.session_id
    }

    /// The latest `entry_hash` (the session's `chain_hash`), `None` before
    /// the first append.
    pub fn head(&self) -> Option<String> {
        let mut head = self.lock_head();
        self.resync(&mut head);
        head.hash().map(str::to_owned)
    }

    /// Records `record` as the session's next entry.
    ///
    /// Resolves once the entry is queued, or, with [`FsyncMode::Always`],
    /// once the fsync covering it is done. An error means the entry may not
    /// be on disk: callers must fail closed. Cancelling the future after the
    /// entry was queued does not withdraw it.
    pub async fn append(&self, record: AuditRecord) -> Result<AppendReceipt, AuditError> {
        let refused = |error| {
            self.log.status().count_refused();
            error
        };
        self.log.ensure_healthy().map_err(refused)?;
        let permit = self.log.reserve().await?;
        // The log may have failed while we waited; don't queue behind that.
        self.log.ensure_healthy().map_err(refused)?;
        let (receipt, durable) = self.link_and_enqueue(permit, record)?;
        if let Some(durable) = durable {
            // The writer counts the entries it refuses.
            durable.await.map_err(|_| AuditError::Unavailable)??;
        }
        Ok(receipt)
    }

    /// Links the record to the head and enqueues its line in one critical
    /// section. Synchronous on purpose: the guard cannot live across an
    /// `.await`, and holding a permit makes the enqueue infallible.
    fn link_and_enqueue(
        &self,
        permit: mpsc::Permit<'_, Command>,
        record: AuditRecord,
    ) -> Result<(AppendReceipt, Option<Durable>), AuditError> {
        let (ack, durable) = match self.log.fsync_mode() {
            FsyncMode::Always => {
                let (ack, durable) = oneshot::channel();
                (Some(ack), Some(durable))
            }
            FsyncMode::Batch | FsyncMode::Never => (None, None),
        };
        let record = match &self.state.caller {
            Some(caller) => record.caller(caller),
            None => record,
        };
        let record = match &self.state.upstream {
            Some(upstream) => record.upstream(upstream),
            None => record,
        };
        let mut head = self.lock_head();
        let epoch = self.resync(&mut head);
        let linked = head.link(&self.state.session_id, record)?;
        let written = Written {
            on_disk: Arc::clone(&self.state.on_disk),
            tip: linked.tip,
        };
        permit.send(Command::Append {
            line: linked.line,
            ack,
            epoch,
            written,
        });
        drop(head);
        let receipt = AppendReceipt {
            entry_id: linked.entry.entry_id,
            entry_hash: linked.entry.entry_hash,
        };
        Ok((receipt, durable))
    }

    /// Rewinds `head` to the entry on disk if the log failed or recovered
    /// since it last linked; returns the epoch it is now in.
    fn resync(&self, head: &mut ChainHead) -> u64 {
        let epoch = self.log.status().epoch();
        head.resync(epoch, || lock(&self.state.on_disk).clone());
        epoch
    }

    fn lock_head(&self) -> MutexGuard<'_, ChainHead> {
        lock(&self.state.head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::AuditSettings;

    fn assert_send<T: Send>(_: &T) {}

    #[tokio::test]
    async fn append_future_is_send_and_advances_head() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::open(&AuditSettings {
            path: dir.path().join("a.jsonl"),
            fsync: FsyncMode::Never,
        })
        .unwrap();
        let chain = log.session("s");
        assert_eq!(chain.head(), None);
        let append = chain.append(AuditRecord::new("r", "steps/sessionStart"));
        assert_send(&append);
        let receipt = append.await.unwrap();
        assert_eq!(receipt.entry_id, "1");
        assert_eq!(chain.head(), Some(receipt.entry_hash));
        assert_eq!(chain.session_id(), "s");
    }
}
