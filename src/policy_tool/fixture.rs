//! `*.fixture.json`: hooks and the decisions a configuration's policy must
//! give them, for either engine.
//!
//! ```json
//! {
//!   "config": "../rego.toml",
//!   "cases": [
//!     {"name": "viewers cannot write",
//!      "hook": {"method": "steps/toolCallRequest", "params": {...}},
//!      "expect": {"decision": "deny", "reason_codes": ["role_not_allowed"]}}
//!   ]
//! }
//! ```
//!
//! `config` is relative to the fixture file. `hook` is a hook file (see
//! [`HookFile`](super::HookFile)). `expect` needs `decision` (or
//! `"failure": true` for a hook the policy must fail to decide); `rule`
//! (the `rule_id` of the first policy reference), `reason_codes` and
//! `modifications` are compared when given.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::error::ToolError;
use crate::guardian::{Decision, Disposition, GuardianError};

/// One fixture file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fixture {
    /// The configuration whose policy decides, relative to the fixture.
    pub config: PathBuf,
    /// The hooks and what they must get.
    pub cases: Vec<FixtureCase>,
}

/// One hook and its expected decision.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixtureCase {
    /// What the case checks, printed with PASS / FAIL.
    pub name: String,
    /// The hook, as a hook file.
    pub hook: Value,
    /// What the policy must decide.
    pub expect: Expectation,
}

/// The parts of a decision a case pins down.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expectation {
    /// The disposition.
    #[serde(default)]
    pub decision: Option<Disposition>,
    /// The hook must be a decision failure (the failure posture applies).
    #[serde(default)]
    pub failure: bool,
    /// The `rule_id` of the first policy reference.
    #[serde(default)]
    pub rule: Option<String>,
    /// The reason codes, in order.
    #[serde(default)]
    pub reason_codes: Option<Vec<String>>,
    /// The `modifications` object, exactly.
    #[serde(default)]
    pub modifications: Option<Value>,
}

impl Fixture {
    /// Reads a fixture file.
    pub fn load(path: &Path) -> Result<Fixture, ToolError> {
        let text = std::fs::read_to_string(path).map_err(|source| ToolError::Read {
            path: path.to_owned(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|err| ToolError::Format {
            path: path.to_owned(),
            message: err.to_string(),
        })
    }
}

impl Expectation {
    /// `None` when `result` meets the expectation, else what differs.
    pub fn mismatch(&self, result: &Result<Decision, GuardianError>) -> Option<String> {
        let decision = match (result, self.failure) {
            (Err(_), true) => return None,
            (Ok(decision), true) => {
                return Some(format!(
                    "expected a decision failure, got {}",
                    decision.decision.as_str()
                ))
            }
            (Err(err), false) => return Some(format!("no decision: {err}")),
            (Ok(decision), false) => decision,
        };
        let mut problems = Vec::new();
        if let Some(expected) = self.decision {
            if expected != decision.decision {
                problems.push(format!(
                    "decision {} (expected {})",
                    decision.decision.as_str(),
                    expected.as_str()
                ));
            }
        }
        if let Some(expected) = &self.rule {
            let rule = decision
                .policy_references
                .first()
                .and_then(|reference| reference.rule_id.as_deref());
            if rule != Some(expected.as_str()) {
                problems.push(format!("rule {rule:?} (expected {expected:?})"));
            }
        }
        if let Some(expected) = &self.reason_codes {
            if expected != &decision.reason_codes {
                problems.push(format!(
                    "reason_codes {:?} (expected {expected:?})",
                    decision.reason_codes
                ));
            }
        }
        if let Some(expected) = &self.modifications {
            let got = serde_json::to_value(&decision.modifications).unwrap_or(Value::Null);
            if &got != expected {
                problems.push(format!("modifications {got} (expected {expected})"));
            }
        }
        (!problems.is_empty()).then(|| problems.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expect(value: Value) -> Expectation {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn compares_only_what_is_given() {
        let mut decision = Decision::deny("no", Some("role_not_allowed"));
        decision.policy_references =
            std::sync::Arc::new([crate::hooks::decision::PolicyReference {
                policy_id: Some("p".into()),
                rule_id: Some("r".into()),
            }]);
        let result = Ok(decision);
        assert_eq!(
            expect(serde_json::json!({"decision": "deny"})).mismatch(&result),
            None
        );
        assert_eq!(
            expect(serde_json::json!({"decision": "deny", "rule": "r", "reason_codes": ["role_not_allowed"]}))
                .mismatch(&result),
            None
        );
        let wrong = expect(serde_json::json!({"decision": "allow", "rule": "x"}))
            .mismatch(&result)
            .unwrap();
        assert!(wrong.contains("decision deny (expected allow)"), "{wrong}");
        assert!(wrong.contains("expected \"x\""), "{wrong}");
    }

    #[test]
    fn failures_are_expected_explicitly() {
        let failed: Result<Decision, GuardianError> = Err(GuardianError::Evaluation("boom".into()));
        assert_eq!(
            expect(serde_json::json!({"failure": true})).mismatch(&failed),
            None
        );
        assert!(expect(serde_json::json!({"decision": "deny"}))
            .mismatch(&failed)
            .unwrap()
            .contains("boom"));
    }
}
