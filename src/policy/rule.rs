//! One compiled rule: when it fires and what it decides.

use super::caller::CallerMatch;
use super::condition::{Condition, Lookups};
use super::error::RuleProblem;
use super::hook::HookView;
use super::outcome::Outcome;
use super::pattern::NamePattern;
use super::spec::{Mode, RuleSpec};
use crate::hooks::decision::{Decision, Disposition};

/// A `[[policy.rule]]` ready to evaluate.
///
/// The hook pattern is kept for the index, which matches it before the
/// rule is consulted; [`Rule::applies`] checks everything else.
#[derive(Debug, Clone)]
pub(crate) struct Rule {
    name: String,
    hook: NamePattern,
    tool: Option<NamePattern>,
    caller: Option<CallerMatch>,
    condition: Option<Condition>,
    outcome: Outcome,
    mode: Mode,
}

impl Rule {
    /// Compiles one rule; `policy_id` goes into its policy reference.
    pub(crate) fn compile(spec: &RuleSpec, policy_id: &str) -> Result<Self, RuleProblem> {
        if spec.name.is_empty() {
            return Err(RuleProblem::EmptyName);
        }
        Ok(Self {
            name: spec.name.clone(),
            hook: NamePattern::compile(&spec.hook, "hook")?,
            tool: spec
                .tool
                .as_deref()
                .map(|tool| NamePattern::compile(tool, "tool"))
                .transpose()?,
            caller: CallerMatch::compile(spec)?,
            condition: spec.matcher.as_ref().map(Condition::compile).transpose()?,
            outcome: Outcome::compile(spec, policy_id)?,
            mode: spec.mode,
        })
    }

    /// The rule's name (its `rule_id`).
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The `hook` pattern, for indexing.
    pub(crate) fn hook(&self) -> &NamePattern {
        &self.hook
    }

    /// The `tool` pattern, for indexing.
    pub(crate) fn tool(&self) -> Option<&NamePattern> {
        self.tool.as_ref()
    }

    /// Whether the rule fires for `hook`, whose method the caller has
    /// already matched against [`Rule::hook`].
    ///
    /// Cheapest checks first: tool name, then the caller, then the payload
    /// condition, then (for redaction) the walk over the payload.
    pub(crate) fn applies<'v>(&self, hook: &HookView<'v>, lookups: &mut Lookups<'v>) -> bool {
        self.tool_matches(hook.tool)
            && self
                .caller
                .as_ref()
                .is_none_or(|caller| caller.matches(hook.user))
            && self
                .condition
                .as_ref()
                .is_none_or(|c| c.holds(hook.payload, lookups))
            && self.outcome.applies(hook)
    }

    /// Whether the rule selects `hook` by tool and caller alone (its
    /// payload condition, if any, not looked at).
    pub(crate) fn selects(&self, hook: &HookView<'_>) -> bool {
        self.tool_matches(hook.tool)
            && self
                .caller
                .as_ref()
                .is_none_or(|caller| caller.matches(hook.user))
    }

    /// Whether the rule fires on every hook it selects: no `match`, and
    /// not a rewrite that may find nothing to do.
    pub(crate) fn is_unconditional(&self) -> bool {
        self.condition.is_none() && self.outcome.is_unconditional()
    }

    /// What the rule decides.
    pub(crate) fn disposition(&self) -> Disposition {
        self.outcome.disposition()
    }

    /// Whether the rule is applied or only monitored.
    pub(crate) fn mode(&self) -> Mode {
        self.mode
    }

    /// The `match` clause, so the policy can share equal pointers.
    pub(crate) fn condition_mut(&mut self) -> Option<&mut Condition> {
        self.condition.as_mut()
    }

    /// The decision for a hook this rule applies to.
    pub(crate) fn decide(&self, hook: &HookView<'_>) -> Decision {
        self.outcome.decide(hook)
    }

    /// A `tool` glob limits the rule to hooks about a tool call.
    fn tool_matches(&self, tool: Option<&str>) -> bool {
        match (&self.tool, tool) {
            (None, _) => true,
            (Some(pattern), Some(name)) => pattern.matches(name),
            (Some(_), None) => false,
        }
    }
}
