//! `ChainHead`: the tip of one session's chain, which turns records into the
//! next linked entries.
//!
//! Kept apart from the store so the linking rule (sequence, timestamp,
//! previous hash) is plain synchronous code that runs under a lock and that
//! tests can drive without a file.

use super::record::{AuditRecord, Position};
use super::AuditError;
use crate::jcs::HexDigest;

/// The last entry of a chain: its `entry_id` (0 before the first) and
/// `entry_hash`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Tip {
    pub(crate) entry_id: u64,
    pub(crate) hash: Option<HexDigest>,
}

/// The next `entry_id` and the latest `entry_hash` of a session, and the
/// log epoch it was linked in.
#[derive(Debug, Default)]
pub(crate) struct ChainHead {
    tip: Tip,
    epoch: u64,
}

impl ChainHead {
    /// The latest `entry_hash`, or `None` before the first entry.
    pub(crate) fn hash(&self) -> Option<&str> {
        self.tip.hash.as_ref().map(HexDigest::as_str)
    }

    /// Brings the head into the log's current `epoch`. When the log failed
    /// or recovered since the last link, entries linked after `on_disk`
    /// were refused, so the chain goes on from `on_disk` instead.
    pub(crate) fn resync(&mut self, epoch: u64, on_disk: impl FnOnce() -> Tip) {
        if self.epoch != epoch {
            self.tip = on_disk();
            self.epoch = epoch;
        }
    }

    /// Makes `record` the next entry of `session_id`'s chain, stamped now.
    ///
    /// The head advances only once the entry is hashed and serialized, so a
    /// failure leaves the chain exactly as it was and the caller's infallible
    /// enqueue afterwards cannot leave a gap.
    pub(crate) fn link(
        &mut self,
        session_id: &str,
        record: &AuditRecord,
    ) -> Result<Linked, AuditError> {
        // The same fixed-width RFC 3339 form hook envelopes use, so entries
        // sort as text.
        self.link_at(session_id, record, crate::hooks::now_rfc3339())
    }

    /// [`Self::link`] with a given timestamp, for deterministic tests.
    pub(crate) fn link_at(
        &mut self,
        session_id: &str,
        record: &AuditRecord,
        timestamp: String,
    ) -> Result<Linked, AuditError> {
        // Typical entries are 500-700 bytes; sizing up front saves regrowing.
        let mut line = Vec::with_capacity(1024);
        let tip = self.link_into(session_id, record, &timestamp, &mut line)?;
        Ok(Linked { line, tip })
    }

    /// [`Self::link_at`], appending the line to `out` (left as it was on
    /// error): the writer links straight into the bytes of its round.
    pub(crate) fn link_into(
        &mut self,
        session_id: &str,
        record: &AuditRecord,
        timestamp: &str,
        out: &mut Vec<u8>,
    ) -> Result<Tip, AuditError> {
        let entry_id = self.tip.entry_id + 1;
        let position = Position {
            session_id,
            entry_id,
            timestamp,
            previous_hash: self.tip.hash.as_ref().map(HexDigest::as_str),
        };
        let hash = record.hashed_line_into(position, out)?;
        self.tip = Tip {
            entry_id,
            hash: Some(hash),
        };
        Ok(self.tip.clone())
    }
}

/// A freshly linked entry's JSONL line, ready to enqueue.
#[derive(Debug)]
pub(crate) struct Linked {
    /// The entry serialized, newline included.
    pub(crate) line: Vec<u8>,
    /// The chain's tip once this entry is in the file.
    pub(crate) tip: Tip,
}

/// The `entry_id`s an appender hands out when the writer links entries
/// later: the same numbering [`ChainHead`] does, without the hashes.
#[derive(Debug, Default)]
pub(crate) struct Sequence {
    last: u64,
    epoch: u64,
}

impl Sequence {
    /// The next `entry_id` in `epoch`. When the log failed or recovered
    /// since the last one, the entries numbered after `on_disk` were
    /// refused, so numbering goes on from there, as the head's does.
    pub(crate) fn next(&mut self, epoch: u64, on_disk: impl FnOnce() -> u64) -> u64 {
        if self.epoch != epoch {
            self.last = on_disk();
            self.epoch = epoch;
        }
        self.last += 1;
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::super::chain::entry_hash;
    use super::super::entry::ContextEntry;
    use super::*;

    /// The entry a linked line holds.
    fn entry(linked: &Linked) -> ContextEntry {
        serde_json::from_slice(&linked.line).unwrap()
    }

    #[test]
    fn entries_are_numbered_and_linked() {
        let mut head = ChainHead::default();
        let first = entry(
            &head
                .link("s", &AuditRecord::new("a", "steps/sessionStart"))
                .unwrap(),
        );
        let second = head
            .link("s", &AuditRecord::new("b", "steps/toolCallRequest"))
            .unwrap();
        assert!(second.line.ends_with(b"\n"));
        let second = entry(&second);
        assert_eq!(
            (first.entry_id.as_str(), second.entry_id.as_str()),
            ("1", "2")
        );
        assert_eq!(first.previous_hash, None);
        assert_eq!(
            second.previous_hash.as_deref(),
            Some(first.entry_hash.as_str())
        );
        assert_eq!(head.hash(), Some(second.entry_hash.as_str()));
        assert_eq!(entry_hash(&second).unwrap(), second.entry_hash);
    }

    #[test]
    fn a_new_epoch_rewinds_to_the_tip_on_disk() {
        let mut head = ChainHead::default();
        let first = entry(
            &head
                .link("s", &AuditRecord::new("a", "steps/sessionStart"))
                .unwrap(),
        );
        head.link("s", &AuditRecord::new("b", "steps/toolCallRequest"))
            .unwrap();
        let on_disk = Tip {
            entry_id: 1,
            hash: HexDigest::parse(&first.entry_hash),
        };
        head.resync(0, || unreachable!("same epoch, no rewind"));
        head.resync(1, || on_disk.clone());
        let again = entry(
            &head
                .link("s", &AuditRecord::new("c", "steps/toolCallRequest"))
                .unwrap(),
        );
        assert_eq!(again.entry_id, "2");
        assert_eq!(again.previous_hash, Some(first.entry_hash));
    }

    /// A sequence numbers entries exactly as a head links them, across a
    /// rewind to the tip on disk.
    #[test]
    fn a_sequence_numbers_as_the_head_links() {
        let mut head = ChainHead::default();
        let mut sequence = Sequence::default();
        let mut link = |epoch: u64, on_disk: &Tip| {
            head.resync(epoch, || on_disk.clone());
            let linked = head
                .link("s", &AuditRecord::new("r", "steps/toolCallRequest"))
                .unwrap();
            linked.tip.entry_id
        };
        let mut on_disk = Tip::default();
        for epoch in [0, 0, 0, 1, 1, 2] {
            let numbered = sequence.next(epoch, || on_disk.entry_id);
            assert_eq!(numbered, link(epoch, &on_disk));
            if numbered == 2 {
                on_disk.entry_id = 2;
            }
        }
    }
}
