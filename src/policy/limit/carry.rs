//! A reloaded policy's limits keep the state of the limits that did not
//! change: a reload must not hand every caller a fresh quota, nor forget
//! the calls in flight.

use super::set::RateLimits;

impl RateLimits {
    /// These limits, where each whose definition (`[[policy.limit]]`
    /// entry, every key alike) is also in `previous` shares that limit's
    /// buckets and counts in flight; new and changed limits start empty,
    /// and limits that are gone are dropped with their state.
    pub fn carry_over(mut self, previous: &RateLimits) -> RateLimits {
        for limit in &mut self.limits {
            if let Some(kept) = previous.limits.iter().find(|old| old.spec == limit.spec) {
                *limit = kept.clone();
            }
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use crate::policy::limit::LimitedCall;
    use crate::policy::Policy;

    fn limits(text: &str) -> Policy {
        Policy::from_toml_str("proxy.toml", text).unwrap_or_else(|err| panic!("{err}"))
    }

    const CALL: LimitedCall<'static> = LimitedCall {
        hooks: &["protocols/MCP/tools/call"],
        tool: Some("echo"),
        called_as: None,
        user: None,
        agent: "a",
        session: "s",
    };

    #[test]
    fn unchanged_limits_keep_their_buckets_and_changed_ones_start_afresh() {
        let kept =
            "[[policy.limit]]\nname = \"kept\"\nper = \"global\"\ncalls = 2\ninterval_s = 60\n";
        let before = limits(&format!(
            "{kept}[[policy.limit]]\nname = \"changed\"\nper = \"global\"\nconcurrent = 1\n"
        ));
        let held = before.limits().admit(&CALL).expect("first");
        let after = limits(&format!(
            "{kept}[[policy.limit]]\nname = \"changed\"\nper = \"global\"\nconcurrent = 2\n"
        ))
        .limits()
        .clone()
        .carry_over(before.limits());
        let _second = after.admit(&CALL).expect("the changed limit starts empty");
        let refused = after.admit(&CALL).expect_err("the kept bucket is spent");
        assert_eq!(refused.limit(), "kept");
        drop(held);
    }
}
