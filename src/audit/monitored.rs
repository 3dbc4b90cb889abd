//! What a policy or rule in monitor mode would have decided, as an audit
//! entry records it.

use serde::{Deserialize, Serialize};

use crate::hooks::decision::Decision;

/// The `monitored` member of an entry: the decision that would have
/// applied had the monitored rule or policy been enforced. The entry's own
/// `decision` is what was applied; `enforced: false` marks the difference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Monitored {
    /// The would-be disposition (`deny`, `modify`, `ask`, …).
    pub decision: String,
    /// The rule that would have decided, when a rule did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Its reasoning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// Its reason codes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reason_codes: Vec<String>,
}

impl Monitored {
    /// The record of `would_be`.
    pub fn of(would_be: &Decision) -> Self {
        Self {
            decision: would_be.decision.as_str().to_owned(),
            rule: would_be
                .policy_references
                .first()
                .and_then(|reference| reference.rule_id.as_deref().map(str::to_owned)),
            reasoning: would_be.reasoning.clone(),
            reason_codes: would_be.reason_codes.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::hooks::decision::PolicyReference;

    #[test]
    fn records_disposition_rule_reasoning_and_codes() {
        let mut deny = Decision::deny("too risky", Some("risky"));
        deny.policy_references = Arc::new([PolicyReference {
            policy_id: Some("p".into()),
            rule_id: Some("no-x".into()),
        }]);
        let monitored = Monitored::of(&deny);
        assert_eq!(
            serde_json::to_value(&monitored).unwrap(),
            serde_json::json!({"decision": "deny", "rule": "no-x", "reasoning": "too risky", "reason_codes": ["risky"]})
        );
    }
}
