//! Calls per interval: a token bucket per key (GCRA, from `governor`).

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use governor::clock::Clock;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

/// How many checks pass between sweeps of keys whose bucket is full again,
/// so a stream of one-off callers does not grow the table for ever.
const SWEEP_EVERY: u64 = 4096;

/// `calls` per `interval` for each key: a bucket of `calls` tokens that
/// refills one token every `interval / calls`.
#[derive(Debug)]
pub(crate) struct CallRate {
    limiter: DefaultKeyedRateLimiter<String>,
    checks: AtomicU64,
}

impl CallRate {
    /// A bucket of `calls` per `interval`; `None` when the interval is
    /// too short to spread `calls` over (under a nanosecond per call).
    pub(crate) fn new(calls: NonZeroU32, interval: Duration) -> Option<Self> {
        let period = interval.checked_div(calls.get())?;
        let quota = Quota::with_period(period)?.allow_burst(calls);
        Some(Self {
            limiter: RateLimiter::keyed(quota),
            checks: AtomicU64::new(0),
        })
    }

    /// Takes one token for `key`, or says how long until one is back.
    pub(crate) fn check(&self, key: &str) -> Result<(), Duration> {
        if self.checks.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            self.limiter.retain_recent();
        }
        self.limiter
            .check_key(&key.to_owned())
            .map_err(|not_until| not_until.wait_time_from(self.limiter.clock().now()))
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
