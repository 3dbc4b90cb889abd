//! `Round`: the entries the writer commits together in one write, and the
//! order their deferred links are made in.
//!
//! With `Batch` and `Never` the writer links an entry (hashes it onto its
//! chain, takes its `request_hash`) after the message it records has moved.
//! An entry recording a message on its way to the server is *held* until an
//! entry of a message on its way back arrives, and linked just before it:
//! the hashing of a call's request side then runs once the call's answer is
//! written, while the agent reads it, instead of while the server works on
//! the request. Where the server shares the gateway's core (a stdio server
//! on a small host) hashing the request side in that gap delayed the
//! answer by as much as it cost (see BENCHMARKS.md, "the request side
//! linked after the answer").
//!
//! Holding changes when an entry is linked, never the order: entries are
//! linked in queue order, which is each chain's numbering order, and
//! everything held is linked before the round is written, before a
//! [`Command::Linked`] is answered, and whenever more than [`HELD_ENTRIES`]
//! wait, so a stream of requests never waits to be hashed in one burst.

use std::collections::VecDeque;

use super::link::{Deferred, Written};
use super::queue::{Ack, Command, Queued};
use super::status::Status;
use super::AuditError;

/// The most entries held at once. A sequential call holds two (its
/// `protocols/MCP/tools/call` and `steps/toolCallRequest` entries); a few
/// sessions' worth fit, and linking this many at once is a few tens of
/// microseconds, well inside the group-commit window.
pub(crate) const HELD_ENTRIES: usize = 16;

/// Everything one round commits together.
#[derive(Default)]
pub(crate) struct Round {
    /// The round's lines, in queue order.
    pub(crate) bytes: Vec<u8>,
    /// Who waits for the round's outcome: `Always` appends and flushes.
    waiters: Vec<Ack>,
    /// What each chain learns once the round is in the file.
    written: Vec<Written>,
    /// A flush asked for the round to be synced.
    pub(crate) sync_requested: bool,
    /// Appends whose appender waits for the outcome (`Always`).
    pub(crate) awaited: u64,
    /// Appends already acknowledged when queued (`Batch`, `Never`).
    pub(crate) acknowledged: u64,
    /// Why an entry the writer linked could not be hashed.
    pub(crate) failed: Option<AuditError>,
    /// Deferred entries of messages on their way to the server, in queue
    /// order, not linked yet.
    held: VecDeque<Deferred>,
}

impl Round {
    /// An empty round whose line buffer starts at `capacity` bytes.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Self {
            bytes: Vec::with_capacity(capacity),
            ..Self::default()
        }
    }

    /// Adds `command`, or refuses it at once when it was linked in an
    /// epoch before `epoch`: it may link to an entry that was refused.
    /// Returns how many acknowledged entries that refusal lost.
    pub(crate) fn add(&mut self, command: Command, epoch: u64, status: &Status) -> u64 {
        match command {
            Command::Append {
                entry,
                ack,
                epoch: linked_in,
            } => {
                if linked_in != epoch {
                    return refuse_stale(ack, status);
                }
                self.push(entry, epoch);
                match ack {
                    Some(ack) => {
                        self.awaited += 1;
                        self.waiters.push(ack);
                    }
                    None => self.acknowledged += 1,
                }
            }
            // Every entry queued before it is linked by now.
            Command::Linked { ack } => {
                self.link_held(epoch);
                let _ = ack.send(());
            }
            Command::Flush { ack } => {
                self.sync_requested = true;
                self.waiters.push(ack);
            }
        }
        0
    }

    /// Links whatever is still held; the round is complete and is about to
    /// be written.
    pub(crate) fn close(&mut self, epoch: u64) {
        self.link_held(epoch);
    }

    /// Adds the entry's line, linking it into the round's bytes first if
    /// its appender left that to the writer, or holding it (see the module
    /// documentation). Entries come in queue order, which is chain order.
    fn push(&mut self, entry: Queued, epoch: u64) {
        match entry {
            Queued::Line { line, written } => {
                self.bytes.extend_from_slice(&line);
                self.written.push(written);
            }
            Queued::Deferred(deferred) if deferred.record.goes_to_server() => {
                self.held.push_back(deferred);
                if self.held.len() > HELD_ENTRIES {
                    if let Some(oldest) = self.held.pop_front() {
                        self.link(oldest, epoch);
                    }
                }
            }
            Queued::Deferred(deferred) => {
                self.link_held(epoch);
                self.link(deferred, epoch);
            }
        }
    }

    fn link_held(&mut self, epoch: u64) {
        while let Some(deferred) = self.held.pop_front() {
            self.link(deferred, epoch);
        }
    }

    fn link(&mut self, deferred: Deferred, epoch: u64) {
        match deferred.link_into(epoch, &mut self.bytes) {
            Ok(written) => self.written.push(written),
            // Appenders check what could fail before they queue, so this is
            // not expected; if it happens anyway the round fails as a failed
            // write does, and the chain goes on from the entry before.
            Err(error) => {
                self.failed.get_or_insert(error);
            }
        }
    }

    /// Tells every waiter the round's outcome. A waiter that went away (its
    /// append was cancelled) needs no answer, so send errors are ignored.
    pub(crate) fn answer(self, outcome: impl Fn() -> Result<(), AuditError>) {
        for waiter in self.waiters {
            let _ = waiter.send(outcome());
        }
    }

    /// Everything is in the file: tell the chains, then the waiters.
    pub(crate) fn settle(mut self) {
        for written in self.written.drain(..) {
            written.settle();
        }
        self.answer(|| Ok(()));
    }
}

/// Refuses an append linked before the log last failed or recovered;
/// returns 1 if it was acknowledged already (and so is lost), else 0.
fn refuse_stale(ack: Option<Ack>, status: &Status) -> u64 {
    match ack {
        Some(ack) => {
            status.count_refused();
            let _ = ack.send(Err(AuditError::Unavailable));
            0
        }
        None => 1,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::audit::link::Link;
    use crate::audit::AuditRecord;
    use crate::hooks::Stamp;
    use crate::session::Direction::{self, ClientToServer, ServerToClient};

    /// One chain's entries, numbered as an appender does, added to a round.
    struct Fixture {
        status: Status,
        link: Arc<Link>,
        next_id: u64,
        round: Round,
    }

    impl Fixture {
        fn new() -> Self {
            Self {
                status: Status::healthy(),
                link: Arc::new(Link::new("s", None, None)),
                next_id: 1,
                round: Round::default(),
            }
        }

        /// Adds the chain's next entry, about a message going `direction`.
        fn add(&mut self, direction: Direction) {
            let record = AuditRecord::new("step", "protocols/MCP/tools/call").direction(direction);
            let entry = Queued::Deferred(Deferred {
                link: Arc::clone(&self.link),
                record,
                timestamp: Stamp::now(),
                entry_id: self.next_id,
            });
            self.next_id += 1;
            let command = Command::Append {
                entry,
                ack: None,
                epoch: 0,
            };
            self.round.add(command, 0, &self.status);
        }

        /// The `entry_id`s of the lines linked so far, in file order.
        fn linked_ids(&self) -> Vec<u64> {
            self.round
                .bytes
                .split(|&byte| byte == b'\n')
                .filter(|line| !line.is_empty())
                .map(|line| {
                    let entry: serde_json::Value = serde_json::from_slice(line).unwrap();
                    entry["entry_id"].as_str().unwrap().parse().unwrap()
                })
                .collect()
        }
    }

    #[test]
    fn a_request_side_entry_is_linked_just_before_the_answer_side() {
        let mut fixture = Fixture::new();
        fixture.add(ClientToServer);
        fixture.add(ClientToServer);
        assert!(
            fixture.linked_ids().is_empty(),
            "held while the server works"
        );
        fixture.add(ServerToClient);
        assert_eq!(fixture.linked_ids(), [1, 2, 3]);
        assert_eq!(fixture.round.acknowledged, 3);
    }

    #[test]
    fn closing_the_round_links_what_is_held() {
        let mut fixture = Fixture::new();
        fixture.add(ClientToServer);
        fixture.round.close(0);
        assert_eq!(fixture.linked_ids(), [1]);
    }

    #[test]
    fn a_linked_request_is_answered_after_what_is_held_is_linked() {
        let mut fixture = Fixture::new();
        fixture.add(ClientToServer);
        let (ack, mut answered) = tokio::sync::oneshot::channel();
        fixture
            .round
            .add(Command::Linked { ack }, 0, &fixture.status);
        assert_eq!(fixture.linked_ids(), [1]);
        assert!(answered.try_recv().is_ok());
        assert_eq!(fixture.link.hash(0).map(|hash| hash.len()), Some(64));
    }

    #[test]
    fn past_the_bound_the_oldest_held_entry_is_linked() {
        let mut fixture = Fixture::new();
        for _ in 0..HELD_ENTRIES {
            fixture.add(ClientToServer);
        }
        assert!(fixture.linked_ids().is_empty());
        fixture.add(ClientToServer);
        fixture.add(ClientToServer);
        assert_eq!(fixture.linked_ids(), [1, 2]);
        fixture.round.close(0);
        let all: Vec<u64> = (1..=HELD_ENTRIES as u64 + 2).collect();
        assert_eq!(fixture.linked_ids(), all);
    }
}
