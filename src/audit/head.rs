//! `ChainHead`: the tip of one session's chain, which turns records into the
//! next linked entries.
//!
//! Kept apart from the store so the linking rule (sequence, timestamp,
//! previous hash) is plain synchronous code that runs under a lock and that
//! tests can drive without a file.

use super::chain::linked_hash;
use super::entry::ContextEntry;
use super::record::AuditRecord;
use super::AuditError;

/// The next `entry_id` and the latest `entry_hash` of a session.
#[derive(Debug, Default)]
pub(crate) struct ChainHead {
    last_entry_id: u64,
    hash: Option<String>,
    /// `hash` as raw bytes, what the next entry's hash mixes in.
    raw: [u8; 32],
}

impl ChainHead {
    /// The latest `entry_hash`, or `None` before the first entry.
    pub(crate) fn hash(&self) -> Option<&str> {
        self.hash.as_deref()
    }

    /// Makes `record` the next entry of `session_id`'s chain, stamped now.
    ///
    /// The head advances only once the entry is hashed and serialized, so a
    /// failure leaves the chain exactly as it was and the caller's infallible
    /// enqueue afterwards cannot leave a gap.
    pub(crate) fn link(
        &mut self,
        session_id: &str,
        record: AuditRecord,
    ) -> Result<Linked, AuditError> {
        // The same fixed-width RFC 3339 form hook envelopes use, so entries
        // sort as text.
        self.link_at(session_id, record, crate::hooks::now_rfc3339())
    }

    /// [`Self::link`] with a given timestamp, for deterministic tests.
    pub(crate) fn link_at(
        &mut self,
        session_id: &str,
        record: AuditRecord,
        timestamp: String,
    ) -> Result<Linked, AuditError> {
        let entry_id = self.last_entry_id + 1;
        let mut entry = record.into_entry(session_id, entry_id, timestamp, self.hash.clone());
        let previous = self.hash.is_some().then_some(&self.raw);
        let raw = linked_hash(&entry, previous)?;
        entry.entry_hash = hex::encode(raw);
        let line = entry.to_json_line()?;
        self.last_entry_id = entry_id;
        self.hash = Some(entry.entry_hash.clone());
        self.raw = raw;
        Ok(Linked { entry, line })
    }
}

/// A freshly linked entry and its JSONL line, ready to enqueue.
#[derive(Debug)]
pub(crate) struct Linked {
    /// The entry as hashed.
    pub(crate) entry: ContextEntry,
    /// `entry` serialized, newline included.
    pub(crate) line: Vec<u8>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_numbered_and_linked() {
        let mut head = ChainHead::default();
        let first = head
            .link("s", AuditRecord::new("a", "steps/sessionStart"))
            .unwrap()
            .entry;
        let second = head
            .link("s", AuditRecord::new("b", "steps/toolCallRequest"))
            .unwrap();
        assert!(second.line.ends_with(b"\n"));
        let second = second.entry;
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
        assert_eq!(
            super::super::chain::entry_hash(&second).unwrap(),
            second.entry_hash
        );
    }
}
