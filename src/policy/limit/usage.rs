//! A read-only view of the limits a call falls under, for a policy to
//! look at (`input.context.limits` for a Rego engine).

use serde::Serialize;

use super::concurrent::ConcurrentCalls;
use super::set::{Limit, LimitedCall, RateLimits};

/// One limit a call falls under, and where its caller stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LimitUsage {
    /// The limit's name.
    pub name: String,
    /// Its `per` (`user`, `agent`, `tenant`, `session`, `global`).
    pub per: &'static str,
    /// Its `calls`, with `interval_s`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calls: Option<u32>,
    /// Its `interval_s`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval_s: Option<u64>,
    /// The tokens left in the caller's bucket (with `calls`): the call
    /// being decided has taken its own already, so 0 means the next call
    /// is refused. Rounded down.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remaining: Option<u32>,
    /// Its `concurrent`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrent: Option<u32>,
    /// The caller's calls in flight under it now (with `concurrent`);
    /// a call already admitted counts itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<u32>,
}

impl RateLimits {
    /// The limits `call` falls under, without counting it: what a policy
    /// engine can add to its input (a call over a limit never reaches a
    /// policy: the relay refuses it first).
    pub fn usage(&self, call: &LimitedCall<'_>) -> Vec<LimitUsage> {
        self.covering(call)
            .map(|(limit, key)| usage_of(limit, &key))
            .collect()
    }
}

/// Where a caller of `key` stands under `limit`.
fn usage_of(limit: &Limit, key: &str) -> LimitUsage {
    LimitUsage {
        name: limit.name.clone(),
        per: limit.per.as_str(),
        calls: limit.rate.as_ref().map(|rate| rate.calls),
        interval_s: limit.rate.as_ref().map(|rate| rate.interval_s),
        remaining: limit.rate.as_ref().map(|rate| rate.bucket.remaining(key)),
        concurrent: limit.concurrent.as_ref().map(ConcurrentCalls::max),
        in_flight: limit.concurrent.as_ref().map(|c| c.count(key)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

    #[test]
    fn lists_the_limits_a_call_falls_under_with_its_in_flight_count() {
        let text = "[[policy.limit]]\nname = \"c\"\nper = \"session\"\nconcurrent = 2\n\
                    [[policy.limit]]\nname = \"r\"\ntool = \"echo\"\nper = \"global\"\ncalls = 5\ninterval_s = 60\n\
                    [[policy.limit]]\nname = \"other\"\ntool = \"add\"\nper = \"global\"\nconcurrent = 1\n";
        let policy = Policy::from_toml_str("proxy.toml", text).unwrap_or_else(|e| panic!("{e}"));
        let call = LimitedCall {
            hooks: &["protocols/MCP/tools/call", "steps/toolCallRequest"],
            tool: Some("echo"),
            called_as: None,
            user: None,
            agent: "a",
            session: "s",
        };
        let _held = policy.limits().admit(&call).expect("admitted");
        let usage = serde_json::to_value(policy.limits().usage(&call)).expect("serializes");
        assert_eq!(
            usage,
            serde_json::json!([
                {"name": "c", "per": "session", "concurrent": 2, "in_flight": 1},
                {"name": "r", "per": "global", "calls": 5, "interval_s": 60, "remaining": 4}
            ])
        );
    }
}
