//! What a rule decides once it matches.
//!
//! Everything that does not depend on the hook (disposition, reasoning,
//! codes, policy reference, ask/defer details) is built once at compile
//! time into a template; evaluation only clones it and, for modify, adds
//! the changes computed from the payload.

use std::sync::Arc;

use super::error::RuleProblem;
use super::hook::HookView;
use super::modify::Modify;
use super::spec::{AskSpec, DeferSpec, RuleSpec, Verdict};
use crate::guardian::decision::{AskDetails, Decision, DeferDetails, Disposition, PolicyReference};

/// How long an approver gets when the rule does not say (seconds).
const DEFAULT_ASK_TIMEOUT_SECONDS: u64 = 120;
/// How long a deferred step is held when the rule does not say (ms).
const DEFAULT_DEFER_TIMEOUT_MS: u64 = 5000;
/// A policy rule cannot observe anything else, so a deferral always waits
/// on something outside the step.
const DEFER_REASON: &str = "pending_dependency";

/// A rule's decision template plus, for modify, what to change.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    template: Decision,
    modify: Option<Modify>,
}

impl Outcome {
    /// Checks that the blocks fit the decision and builds the template.
    pub(crate) fn compile(spec: &RuleSpec, policy_id: &str) -> Result<Self, RuleProblem> {
        check_blocks(spec)?;
        let reasoning = reasoning(spec)?;
        check_reason_codes(&spec.reason_codes)?;
        let mut template = Decision::new(spec.decision, reasoning);
        template.reason_codes = spec.reason_codes.clone();
        template.policy_references = Arc::new([reference(policy_id, Some(&spec.name))]);
        let mut modify = None;
        match spec.decision {
            Disposition::Ask => {
                let question = template.reasoning.as_deref();
                template.ask_details = Some(Box::new(ask_details(spec.ask.as_ref(), question)));
            }
            Disposition::Defer => {
                template.defer_details = Some(Box::new(defer_details(spec.defer.as_ref())));
            }
            Disposition::Modify => modify = Some(Modify::compile(spec)?),
            Disposition::Allow | Disposition::Deny => {}
        }
        Ok(Self { template, modify })
    }

    /// Whether the rule has something to do for this hook (only a modify
    /// rule can decline after its conditions matched).
    pub(crate) fn applies(&self, hook: &HookView<'_>) -> bool {
        self.modify.as_ref().is_none_or(|m| m.applies(hook.payload))
    }

    /// Whether the outcome applies to every hook (only a rewrite can
    /// decline).
    pub(crate) fn is_unconditional(&self) -> bool {
        self.modify.is_none()
    }

    /// What the outcome decides.
    pub(crate) fn disposition(&self) -> Disposition {
        self.template.decision
    }

    /// The decision for a hook this outcome applies to.
    pub(crate) fn decide(&self, hook: &HookView<'_>) -> Decision {
        let mut decision = self.template.clone();
        decision.modifications = self
            .modify
            .as_ref()
            .map(|m| Box::new(m.modifications(hook)));
        decision
    }
}

/// The decision when no rule matches.
///
/// It still names the policy (without a rule) so the audit log can tell a
/// default from a rule; a default deny gets a reasoning because the wire
/// requires one.
pub(crate) fn fallback(default: Verdict, policy_id: &str) -> Decision {
    let reasoning = match default {
        Verdict::Allow => None,
        Verdict::Deny => Some(format!(
            "no rule of policy {policy_id:?} matched and its default is deny"
        )),
    };
    let mut decision = Decision::new(default.disposition(), reasoning);
    decision.policy_references = Arc::new([reference(policy_id, None)]);
    decision
}

fn reference(policy_id: &str, rule: Option<&str>) -> PolicyReference {
    PolicyReference {
        policy_id: Some(policy_id.into()),
        rule_id: rule.map(Arc::from),
    }
}

/// Refuses `redact`, `set`, `ask` and `defer` next to a decision that would
/// ignore them: a block that silently does nothing is a misconfiguration.
fn check_blocks(spec: &RuleSpec) -> Result<(), RuleProblem> {
    let blocks = [
        ("redact", spec.redact.is_some(), Disposition::Modify),
        ("set", spec.set.is_some(), Disposition::Modify),
        ("ask", spec.ask.is_some(), Disposition::Ask),
        ("defer", spec.defer.is_some(), Disposition::Defer),
    ];
    for (block, present, needs) in blocks {
        if present && spec.decision != needs {
            return Err(RuleProblem::MisplacedBlock {
                block,
                needs: needs.as_str(),
            });
        }
    }
    Ok(())
}

/// The rule's reasoning, which the wire requires for all but allow.
fn reasoning(spec: &RuleSpec) -> Result<Option<String>, RuleProblem> {
    let given = spec.reasoning.as_deref().filter(|r| !r.trim().is_empty());
    if given.is_none() && spec.decision != Disposition::Allow {
        return Err(RuleProblem::MissingReasoning {
            decision: spec.decision.as_str(),
        });
    }
    Ok(given.map(str::to_owned))
}

/// `reason_codes` is `uniqueItems` in the result schema.
fn check_reason_codes(codes: &[String]) -> Result<(), RuleProblem> {
    for (i, code) in codes.iter().enumerate() {
        if codes[..i].contains(code) {
            return Err(RuleProblem::DuplicateReasonCode(code.clone()));
        }
    }
    Ok(())
}

/// `ask_details` with the documented defaults: the reasoning as the
/// question, 120 s, deny on timeout (the safe side when nobody answers).
fn ask_details(spec: Option<&AskSpec>, reasoning: Option<&str>) -> AskDetails {
    let spec = spec.cloned().unwrap_or_default();
    AskDetails {
        question: spec.question.or_else(|| reasoning.map(str::to_owned)),
        timeout_seconds: Some(spec.timeout_seconds.unwrap_or(DEFAULT_ASK_TIMEOUT_SECONDS)),
        timeout_disposition: Some(timeout_choice(spec.timeout_disposition)),
        ..AskDetails::default()
    }
}

/// `defer_details` with the documented defaults: 5 s, then deny.
fn defer_details(spec: Option<&DeferSpec>) -> DeferDetails {
    let spec = spec.cloned().unwrap_or_default();
    DeferDetails {
        reason: Some(DEFER_REASON.to_owned()),
        resolution_timeout_ms: Some(spec.timeout_ms.unwrap_or(DEFAULT_DEFER_TIMEOUT_MS)),
        timeout_decision: Some(timeout_choice(spec.timeout_decision)),
    }
}

/// Timeouts default to deny: an unanswered question is not consent.
fn timeout_choice(choice: Option<Verdict>) -> Disposition {
    choice.unwrap_or(Verdict::Deny).disposition()
}
