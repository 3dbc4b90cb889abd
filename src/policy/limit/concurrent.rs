//! Calls in flight at once: a counter per key, given back by a guard.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Counts the calls in flight per key against one maximum.
///
/// A key's entry exists only while it has calls in flight, so the table
/// is as large as the set of callers with something outstanding. A clone
/// shares the counts.
#[derive(Debug, Clone)]
pub(crate) struct ConcurrentCalls {
    max: u32,
    in_flight: Arc<Mutex<HashMap<String, u32>>>,
}

/// One call's place under a concurrency limit; dropping it gives the
/// place back (the response came, the call failed, was cancelled, or the
/// session ended).
#[derive(Debug)]
pub(crate) struct Slot {
    key: String,
    in_flight: Arc<Mutex<HashMap<String, u32>>>,
}

impl ConcurrentCalls {
    /// A limit of `max` calls in flight per key.
    pub(crate) fn new(max: u32) -> Self {
        Self {
            max,
            in_flight: Arc::default(),
        }
    }

    /// The configured maximum.
    pub(crate) fn max(&self) -> u32 {
        self.max
    }

    /// Takes a place for one more call of `key`, unless it already has
    /// `max` in flight.
    pub(crate) fn acquire(&self, key: &str) -> Option<Slot> {
        let mut in_flight = lock(&self.in_flight);
        let count = in_flight.get(key).copied().unwrap_or(0);
        if count >= self.max {
            return None;
        }
        in_flight.insert(key.to_owned(), count + 1);
        Some(Slot {
            key: key.to_owned(),
            in_flight: Arc::clone(&self.in_flight),
        })
    }

    /// Calls of `key` in flight now.
    pub(crate) fn count(&self, key: &str) -> u32 {
        lock(&self.in_flight).get(key).copied().unwrap_or(0)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut in_flight = lock(&self.in_flight);
        if let Some(count) = in_flight.get_mut(&self.key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                in_flight.remove(&self.key);
            }
        }
    }
}

/// A poisoned counter is still a consistent count: every update is one
/// step under the lock.
fn lock(map: &Mutex<HashMap<String, u32>>) -> MutexGuard<'_, HashMap<String, u32>> {
    map.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_past_the_maximum_and_gives_places_back() {
        let calls = ConcurrentCalls::new(2);
        let first = calls.acquire("alice").expect("1st");
        let _second = calls.acquire("alice").expect("2nd");
        assert!(calls.acquire("alice").is_none());
        assert!(calls.acquire("bob").is_some(), "bob has his own count");
        drop(first);
        assert_eq!(calls.count("alice"), 1);
        assert!(calls.acquire("alice").is_some());
    }

    #[test]
    fn idle_keys_leave_the_table() {
        let calls = ConcurrentCalls::new(1);
        drop(calls.acquire("k").expect("free"));
        assert!(lock(&calls.in_flight).is_empty());
    }

    #[test]
    fn a_refused_key_leaves_no_entry_when_the_maximum_is_zero() {
        let calls = ConcurrentCalls::new(0);
        assert!(calls.acquire("k").is_none());
        assert_eq!(calls.count("k"), 0);
    }
}
