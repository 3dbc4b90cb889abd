//! Admission limits: how many requests may be in flight per session and
//! across the process, and how many sessions the network listeners hold.
//!
//! A request over a limit is not queued behind the others (that would be
//! silent backpressure the agent cannot tell from a slow server): it is
//! answered at once with JSON-RPC error [`codes::LIMIT_EXCEEDED`] naming the
//! limit, counted in `acs_proxy_limit_refusals_total{limit}` and recorded in
//! the session's audit chain.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::LazyLock;

use prometheus::IntCounterVec;

use crate::config::{LimitsConfig, ListenConfig};
use crate::jsonrpc::codes;
use crate::metrics::METRICS;

/// `acs_proxy_limit_refusals_total{limit}`: requests and sessions refused
/// because a limit was reached, by limit (`session_requests`,
/// `global_requests`, `sessions`).
pub static LIMIT_REFUSALS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    METRICS.register_counter_vec(
        "acs_proxy_limit_refusals_total",
        "Requests and sessions refused because a limit was reached, by limit",
        &["limit"],
    )
});

/// A limit that refused a request or a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LimitExceeded {
    /// `[limits] max_requests_per_session`.
    #[error("too many requests in flight in this session: the limit is {max} (limits.max_requests_per_session); retry once earlier requests are answered")]
    SessionRequests {
        /// The configured limit.
        max: usize,
    },
    /// `[limits] max_requests_total`.
    #[error("too many requests in flight across all sessions: the limit is {max} (limits.max_requests_total); retry later")]
    GlobalRequests {
        /// The configured limit.
        max: usize,
    },
    /// `[listen] max_sessions`.
    #[error("the proxy already serves its maximum of {max} sessions (listen.max_sessions); try again later")]
    Sessions {
        /// The configured limit.
        max: usize,
    },
}

impl LimitExceeded {
    /// The metric label and audit reason code of this limit.
    pub fn label(&self) -> &'static str {
        match self {
            LimitExceeded::SessionRequests { .. } => "session_requests",
            LimitExceeded::GlobalRequests { .. } => "global_requests",
            LimitExceeded::Sessions { .. } => "sessions",
        }
    }

    /// The JSON-RPC error code the refusal is answered with.
    pub fn code(&self) -> i64 {
        codes::LIMIT_EXCEEDED
    }

    /// Counts the refusal in `acs_proxy_limit_refusals_total`.
    pub fn count(&self) {
        LIMIT_REFUSALS.with_label_values(&[self.label()]).inc();
    }
}

/// The in-flight request limits every session of a process shares: the
/// per-session cap and the one global counter.
#[derive(Debug, Default)]
pub struct RequestBudget {
    in_flight: AtomicUsize,
    per_session: Option<usize>,
    global: Option<usize>,
}

impl RequestBudget {
    /// The budget `[limits]` describes; unset limits are unlimited.
    pub fn new(limits: &LimitsConfig) -> Self {
        Self {
            in_flight: AtomicUsize::new(0),
            per_session: limits.max_requests_per_session,
            global: limits.max_requests_total,
        }
    }

    /// Takes one request slot for a session that already has
    /// `session_in_flight` requests in flight.
    pub fn acquire(&self, session_in_flight: usize) -> Result<(), LimitExceeded> {
        if let Some(max) = self.per_session {
            if session_in_flight >= max {
                return Err(LimitExceeded::SessionRequests { max });
            }
        }
        let Some(max) = self.global else {
            self.in_flight.fetch_add(1, Ordering::AcqRel);
            return Ok(());
        };
        self.in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .map(|_| ())
            .map_err(|_| LimitExceeded::GlobalRequests { max })
    }

    /// Gives back `count` slots (requests answered, blocked or abandoned).
    pub fn release(&self, count: usize) {
        if count > 0 {
            self.in_flight.fetch_sub(count, Ordering::AcqRel);
        }
    }

    /// Requests in flight across every session.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }
}

/// The session limit of the network listeners, as a refusal.
pub fn sessions_exceeded(listen: &ListenConfig) -> LimitExceeded {
    LimitExceeded::Sessions {
        max: listen.max_sessions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(per_session: Option<usize>, global: Option<usize>) -> RequestBudget {
        RequestBudget::new(&LimitsConfig {
            max_requests_per_session: per_session,
            max_requests_total: global,
            ..LimitsConfig::default()
        })
    }

    #[test]
    fn the_session_limit_counts_the_sessions_own_requests() {
        let budget = budget(Some(2), None);
        assert_eq!(budget.acquire(0), Ok(()));
        assert_eq!(budget.acquire(1), Ok(()));
        assert_eq!(
            budget.acquire(2),
            Err(LimitExceeded::SessionRequests { max: 2 })
        );
        assert_eq!(budget.in_flight(), 2);
    }

    #[test]
    fn the_global_limit_is_freed_by_release() {
        let budget = budget(None, Some(1));
        assert_eq!(budget.acquire(0), Ok(()));
        assert_eq!(
            budget.acquire(0),
            Err(LimitExceeded::GlobalRequests { max: 1 })
        );
        budget.release(1);
        assert_eq!(budget.acquire(0), Ok(()));
    }

    #[test]
    fn refusals_name_their_key() {
        let text = LimitExceeded::SessionRequests { max: 3 }.to_string();
        assert!(text.contains("limits.max_requests_per_session"), "{text}");
        assert!(LimitExceeded::Sessions { max: 1 }
            .to_string()
            .contains("listen.max_sessions"));
    }
}
