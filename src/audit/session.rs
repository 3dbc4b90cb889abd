//! `AuditChain`: the handle through which one ACS session appends entries.
//!
//! Many tasks of a session may append at once (requests are decided
//! concurrently), yet the file must hold the session's entries in chain
//! order. Each append first waits for room in the writer's queue, then
//! numbers (and, with [`FsyncMode::Always`], links) and enqueues under a
//! short synchronous lock, so the order entries are numbered in is the
//! order they are queued in, and no lock is held across an `.await`.
//!
//! With `Batch` and `Never` an entry is acknowledged once queued, so the
//! appender does not hash it: the writer links queued entries in order
//! (see [`super::link`]), after the message the entry is about has moved.
//! `Always` keeps the entry hashed before the append resolves, as the
//! appender waits for the disk anyway.
//!
//! The chain also knows its last entry that reached the file (the writer
//! reports each one). When a write fails, the entries after it are refused,
//! and the next link after the log recovers continues from that entry, so
//! the file never holds a link to an entry it does not have.

use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot};

use super::head::Sequence;
use super::link::{lock, Deferred, Link, Written};
use super::queue::{Command, Queued};
use super::record::AuditRecord;
use super::settings::FsyncMode;
use super::store::AuditLog;
use super::AuditError;
use crate::hooks::Identity;

/// What an append recorded: the caller can cite `entry_id` (e.g. as
/// `audit_entry_id` in an error reply). The entry's hash is known only
/// once the writer links it; [`AuditChain::head`] gives it.
///
/// The id is kept as a number: every hook appends, and only a blocked
/// message's reply spells it ([`AppendReceipt::entry_id_text`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendReceipt {
    /// The entry's position in its session: 1, 2, …
    pub entry_id: u64,
}

impl AppendReceipt {
    /// `entry_id` as the entry spells it.
    pub fn entry_id_text(&self) -> String {
        self.entry_id.to_string()
    }
}

/// One session's chain; cheap to clone, clones share the chain.
#[derive(Debug, Clone)]
pub struct AuditChain {
    log: AuditLog,
    link: Arc<Link>,
    /// Numbers entries the writer links (`Batch`, `Never`).
    sequence: Arc<Mutex<Sequence>>,
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
        AuditChain::new(self.clone(), Link::new(session_id, caller, None))
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
        let link = Link::new(session_id, caller, Some(upstream));
        AuditChain::new(self.clone(), link)
    }
}

impl AuditChain {
    /// Starts the empty chain `link` on `log`.
    fn new(log: AuditLog, link: Link) -> Self {
        Self {
            log,
            link: Arc::new(link),
            sequence: Arc::default(),
        }
    }

    /// The session this chain records.
    pub fn session_id(&self) -> &str {
        self.link.session_id()
    }

    /// The latest `entry_hash` (the session's `chain_hash`), `None` before
    /// the first append. Entries appended before the call are linked by
    /// then, whichever task appended them.
    pub async fn head(&self) -> Option<String> {
        if self.log.fsync_mode() != FsyncMode::Always {
            self.wait_until_linked().await;
        }
        self.link.hash(self.log.status().epoch())
    }

    /// Waits until the writer linked everything queued so far. A writer
    /// that is gone links nothing more, so the head is as current as it
    /// gets then too.
    async fn wait_until_linked(&self) {
        let Ok(permit) = self.log.reserve().await else {
            return;
        };
        let (ack, linked) = oneshot::channel();
        permit.send(Command::Linked { ack });
        let _ = linked.await;
    }

    /// Records `record` as the session's next entry.
    ///
    /// Resolves once the entry is queued, or, with [`FsyncMode::Always`],
    /// once the fsync covering it is done. An error means the entry may not
    /// be on disk: callers must fail closed. Cancelling the future after the
    /// entry was queued does not withdraw it.
    pub async fn append(
        &self,
        record: impl Into<Box<AuditRecord>>,
    ) -> Result<AppendReceipt, AuditError> {
        let record = record.into();
        let refused = |error| {
            self.log.status().count_refused();
            error
        };
        self.log.ensure_healthy().map_err(refused)?;
        let permit = self.log.reserve().await?;
        // The log may have failed while we waited; don't queue behind that.
        self.log.ensure_healthy().map_err(refused)?;
        let receipt = match self.log.fsync_mode() {
            FsyncMode::Always => {
                let (receipt, durable) = self.link_and_enqueue(permit, record)?;
                // The writer counts the entries it refuses.
                durable.await.map_err(|_| AuditError::Unavailable)??;
                receipt
            }
            FsyncMode::Batch | FsyncMode::Never => self.number_and_enqueue(permit, record)?,
        };
        Ok(receipt)
    }

    /// Links the record to the head and enqueues its line in one critical
    /// section. Synchronous on purpose: the guard cannot live across an
    /// `.await`, and holding a permit makes the enqueue infallible.
    fn link_and_enqueue(
        &self,
        permit: mpsc::Permit<'_, Command>,
        record: Box<AuditRecord>,
    ) -> Result<(AppendReceipt, Durable), AuditError> {
        let (ack, durable) = oneshot::channel();
        let mut head = self.link.lock_head();
        let epoch = self.log.status().epoch();
        let linked = self
            .link
            .link(&mut head, record, epoch, crate::hooks::now_rfc3339())?;
        let receipt = AppendReceipt {
            entry_id: linked.tip.entry_id,
        };
        let written = Written {
            link: Arc::clone(&self.link),
            tip: linked.tip,
        };
        permit.send(Command::Append {
            entry: Queued::Line {
                line: linked.line,
                written,
            },
            ack: Some(ack),
            epoch,
        });
        drop(head);
        Ok((receipt, durable))
    }

    /// Numbers the record and enqueues it for the writer to link, in one
    /// critical section so entries are queued in the order they are
    /// numbered. Only values that could fail to hash are checked here, so
    /// an entry acknowledged now cannot fail to link later.
    fn number_and_enqueue(
        &self,
        permit: mpsc::Permit<'_, Command>,
        record: Box<AuditRecord>,
    ) -> Result<AppendReceipt, AuditError> {
        record.check_canonical()?;
        let mut sequence = lock(&self.sequence);
        // Stamped now, in numbering order: the step happens now, not when
        // the writer links it.
        let timestamp = crate::hooks::Stamp::now();
        let epoch = self.log.status().epoch();
        let entry_id = sequence.next(epoch, || self.link.on_disk().entry_id);
        permit.send(Command::Append {
            entry: Queued::Deferred(Deferred {
                link: Arc::clone(&self.link),
                record,
                timestamp,
                entry_id,
            }),
            ack: None,
            epoch,
        });
        drop(sequence);
        Ok(AppendReceipt { entry_id })
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
        assert_eq!(chain.head().await, None);
        let append = chain.append(AuditRecord::new("r", "steps/sessionStart"));
        assert_send(&append);
        let receipt = append.await.unwrap();
        assert_eq!(receipt.entry_id, 1);
        let head = chain.head();
        assert_send(&head);
        assert!(head.await.is_some());
        assert_eq!(chain.session_id(), "s");
    }

    fn open(dir: &tempfile::TempDir, fsync: FsyncMode) -> AuditLog {
        AuditLog::open(&AuditSettings {
            path: dir.path().join("a.jsonl"),
            fsync,
        })
        .unwrap()
    }

    /// With `batch` and `never` the appender only numbers its entry: on
    /// this one-thread runtime the writer cannot run while the appender
    /// does, so nothing is linked yet when the appends resolve. The writer
    /// then links them in the order they were numbered, and `head` waits
    /// for that.
    #[tokio::test]
    async fn batch_and_never_appenders_leave_the_hashing_to_the_writer() {
        for fsync in [FsyncMode::Batch, FsyncMode::Never] {
            let dir = tempfile::tempdir().unwrap();
            let log = open(&dir, fsync);
            let chain = log.session("s");
            // More than the writer links between two yields.
            for step in 1..=20 {
                let receipt = chain
                    .append(AuditRecord::new(
                        format!("r{step}"),
                        "steps/toolCallRequest",
                    ))
                    .await
                    .unwrap();
                assert_eq!(receipt.entry_id, step);
            }
            let epoch = log.status().epoch();
            assert_eq!(chain.link.hash(epoch), None, "{fsync:?}: not hashed yet");
            let head = chain.head().await.unwrap();
            log.flush().await.unwrap();
            let report = crate::audit::verify_file(dir.path().join("a.jsonl")).unwrap();
            assert_eq!(report.entries, 20);
            assert_eq!(report.sessions[0].head, head);
        }
    }

    /// `always` keeps the order it had: the entry is hashed before the
    /// append resolves.
    #[tokio::test]
    async fn always_appenders_hash_their_own_entry() {
        let dir = tempfile::tempdir().unwrap();
        let log = open(&dir, FsyncMode::Always);
        let chain = log.session("s");
        chain
            .append(AuditRecord::new("r", "steps/toolCallRequest"))
            .await
            .unwrap();
        let epoch = log.status().epoch();
        assert!(chain.link.hash(epoch).is_some());
    }

    /// A value with no canonical form is refused when appended, not
    /// discovered by the writer after the entry was acknowledged.
    #[tokio::test]
    async fn an_entry_that_cannot_be_hashed_is_refused_when_appended() {
        let dir = tempfile::tempdir().unwrap();
        let log = open(&dir, FsyncMode::Batch);
        let chain = log.session("s");
        let huge = serde_json::Value::Number(serde_json::from_str("1e400").unwrap());
        let record = AuditRecord::new("r", "steps/toolCallRequest").mcp_id(huge);
        assert!(matches!(
            chain.append(record).await,
            Err(AuditError::Canonical(_))
        ));
        let receipt = chain
            .append(AuditRecord::new("r", "steps/toolCallRequest"))
            .await
            .unwrap();
        assert_eq!(receipt.entry_id, 1, "the refused entry took no number");
    }
}
