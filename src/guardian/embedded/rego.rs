//! A Rego policy's answer → a decision, checked exactly as a remote
//! Guardian's `result` is.

use std::sync::Arc;

use crate::guardian::remote::wire::read_decision_object;
use crate::guardian::{Decision, GuardianError};
use crate::hooks::decision::PolicyReference;
use crate::hooks::{GatewayContext, HookRequest, Metadata};
use crate::policy::RegoPolicy;

/// Evaluates `policy` for one hook. Undefined means the policy default; an
/// evaluation error or an answer that is not a valid ACS decision is a
/// decision failure, for the failure posture to resolve.
pub(super) fn decide(
    policy: &RegoPolicy,
    hook: &HookRequest,
    metadata: &Metadata,
    context: Option<&GatewayContext>,
) -> Result<Decision, GuardianError> {
    let answer = policy
        .evaluate(hook, metadata, context)
        .map_err(|err| GuardianError::Evaluation(err.to_string()))?;
    let Some(answer) = answer else {
        return Ok(policy.default_decision().clone());
    };
    let mut decision = read_decision_object(&answer)
        .map_err(|err| GuardianError::Malformed(format!("{} gave {err}", policy.query())))?;
    if decision.policy_references.is_empty() {
        decision.policy_references = Arc::new([PolicyReference {
            policy_id: Some(policy.policy_id().into()),
            rule_id: None,
        }]);
    }
    Ok(decision)
}

/// What decided, as `policy eval` reports it: the rule the policy named
/// in `policy_references`, else the query, else the default.
pub(super) fn decided_by(policy: &RegoPolicy, decision: Option<&Decision>) -> String {
    let Some(decision) = decision else {
        return format!("{} (evaluation failed)", policy.query());
    };
    if decision == policy.default_decision() {
        return format!("the policy default ({} is undefined)", policy.query());
    }
    let rule = decision
        .policy_references
        .iter()
        .find_map(|reference| reference.rule_id.as_deref());
    match rule {
        Some(rule) => format!("{} (rule {rule:?})", policy.query()),
        None => policy.query().to_owned(),
    }
}
