//! Calls per interval: a token bucket per key (GCRA, from `governor`).

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use governor::clock::Clock;
use governor::middleware::StateInformationMiddleware;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

/// How many checks pass between sweeps of keys whose bucket is full again,
/// so a stream of one-off callers does not grow the table for ever.
const SWEEP_EVERY: u64 = 4096;

/// `calls` per `interval` for each key: a bucket of `calls` tokens that
/// refills one token every `interval / calls`.
#[derive(Debug)]
pub(crate) struct CallRate {
    limiter: DefaultKeyedRateLimiter<String, StateInformationMiddleware>,
    calls: u32,
    period: Duration,
    /// Tokens each key had left after its last admitted call, and when:
    /// governor has no way to look at a bucket without taking from it, and
    /// a policy reads how full the caller's bucket is.
    left: Mutex<HashMap<String, (u32, Instant)>>,
    checks: AtomicU64,
}

impl CallRate {
    /// A bucket of `calls` per `interval`; `None` when the interval is
    /// too short to spread `calls` over (under a nanosecond per call).
    pub(crate) fn new(calls: NonZeroU32, interval: Duration) -> Option<Self> {
        let period = interval.checked_div(calls.get())?;
        let quota = Quota::with_period(period)?.allow_burst(calls);
        Some(Self {
            limiter: RateLimiter::keyed(quota).with_middleware::<StateInformationMiddleware>(),
            calls: calls.get(),
            period,
            left: Mutex::default(),
            checks: AtomicU64::new(0),
        })
    }

    /// Takes one token for `key`, or says how long until one is back.
    pub(crate) fn check(&self, key: &str) -> Result<(), Duration> {
        if self.checks.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            self.limiter.retain_recent();
            let now = Instant::now();
            self.lock_left()
                .retain(|_, &mut (left, at)| self.refilled(left, now - at) < self.calls);
        }
        let key = key.to_owned();
        match self.limiter.check_key(&key) {
            Ok(snapshot) => {
                let left = snapshot.remaining_burst_capacity();
                self.lock_left().insert(key, (left, Instant::now()));
                Ok(())
            }
            Err(not_until) => Err(not_until.wait_time_from(self.limiter.clock().now())),
        }
    }

    /// Tokens `key` has now, without taking one; rounded down, so it may
    /// read one less than the bucket holds, never more.
    pub(crate) fn remaining(&self, key: &str) -> u32 {
        match self.lock_left().get(key) {
            Some(&(left, at)) => self.refilled(left, at.elapsed()),
            None => self.calls,
        }
    }

    /// What `left` tokens become after `elapsed`: one more per period, up
    /// to the bucket's size.
    fn refilled(&self, left: u32, elapsed: Duration) -> u32 {
        let periods = elapsed.as_nanos() / self.period.as_nanos().max(1);
        let periods = u32::try_from(periods).unwrap_or(u32::MAX);
        left.saturating_add(periods).min(self.calls)
    }

    /// A poisoned table is still usable: every update is one insert.
    fn lock_left(&self) -> MutexGuard<'_, HashMap<String, (u32, Instant)>> {
        self.left
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(calls: u32, interval_s: u64) -> CallRate {
        let calls = NonZeroU32::new(calls).expect("non-zero");
        CallRate::new(calls, Duration::from_secs(interval_s)).expect("valid quota")
    }

    #[test]
    fn the_call_past_the_quota_is_refused_with_a_wait() {
        let rate = rate(10, 60);
        for _ in 0..10 {
            assert_eq!(rate.check("alice"), Ok(()));
        }
        let wait = rate.check("alice").expect_err("11th call");
        assert!(
            wait > Duration::from_secs(5) && wait <= Duration::from_secs(6),
            "{wait:?}"
        );
    }

    #[test]
    fn remaining_tokens_are_read_without_taking_one() {
        let rate = rate(10, 60);
        assert_eq!(
            rate.remaining("alice"),
            10,
            "an unseen key has a full bucket"
        );
        for _ in 0..3 {
            assert_eq!(rate.check("alice"), Ok(()));
        }
        assert_eq!(rate.remaining("alice"), 7);
        assert_eq!(rate.remaining("alice"), 7, "reading takes nothing");
        assert_eq!(rate.remaining("bob"), 10);
    }

    #[test]
    fn keys_have_their_own_buckets() {
        let rate = rate(1, 60);
        assert_eq!(rate.check("alice"), Ok(()));
        assert!(rate.check("alice").is_err());
        assert_eq!(rate.check("bob"), Ok(()));
    }

    #[test]
    fn the_bucket_refills() {
        let rate = CallRate::new(NonZeroU32::MIN, Duration::from_millis(20)).expect("valid");
        assert_eq!(rate.check("k"), Ok(()));
        let wait = rate.check("k").expect_err("empty");
        std::thread::sleep(wait + Duration::from_millis(5));
        assert_eq!(rate.check("k"), Ok(()));
    }

    #[test]
    fn an_interval_too_short_to_divide_is_refused() {
        assert!(CallRate::new(NonZeroU32::MAX, Duration::from_nanos(1)).is_none());
    }
}
