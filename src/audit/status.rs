//! `Status`: whether the log can record now, shared by the writer and every
//! appender.
//!
//! A write failure does not end the log: the writer refuses entries until a
//! retry succeeds. Failing and recovering each start a new *epoch*, and an
//! entry carries the epoch it was linked in, so nothing linked on top of a
//! refused entry can reach the file after a recovery: the writer refuses
//! it, and each chain rewinds to what is really on disk before linking in
//! the new epoch.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The log's shared state; lives behind an `Arc` in the store and writer.
#[derive(Debug)]
pub(crate) struct Status {
    healthy: AtomicBool,
    epoch: AtomicU64,
    refused: AtomicU64,
}

impl Status {
    /// A log that records.
    pub(crate) fn healthy() -> Self {
        Self {
            healthy: AtomicBool::new(true),
            epoch: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    /// Whether appends are accepted now.
    pub(crate) fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Acquire)
    }

    /// The current epoch; an entry linked in an older one is refused.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Marks the log failed and starts a new epoch. Returns whether it was
    /// healthy until now (the start of a failure window).
    pub(crate) fn fail(&self) -> bool {
        // The epoch moves first: an appender that still sees the log
        // healthy then links in the new epoch, after its chain rewound.
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.healthy.swap(false, Ordering::AcqRel)
    }

    /// Accepts appends again after a successful retry, in a new epoch:
    /// entries linked while the log was failed are refused even if they
    /// reach the writer only now.
    pub(crate) fn recover(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.healthy.store(true, Ordering::Release);
    }

    /// Counts an append refused because the log could not record.
    pub(crate) fn count_refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Appends refused since the window opened.
    pub(crate) fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Appends refused since the last call (the failure window's count).
    pub(crate) fn take_refused(&self) -> u64 {
        self.refused.swap(0, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failing_starts_a_window_once_and_a_new_epoch_each_time() {
        let status = Status::healthy();
        assert!(status.is_healthy());
        assert!(status.fail());
        assert!(!status.fail());
        assert_eq!(status.epoch(), 2);
        status.count_refused();
        status.count_refused();
        assert_eq!(status.take_refused(), 2);
        status.recover();
        assert!(status.is_healthy());
        assert_eq!(status.epoch(), 3);
        assert_eq!(status.take_refused(), 0);
    }
}
