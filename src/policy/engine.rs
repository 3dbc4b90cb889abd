//! The compiled policy and how it decides a hook.

use std::collections::HashMap;

use super::condition::Lookups;
use super::hook::HookView;
use super::index::HookIndex;
use super::limit::RateLimits;
use super::rule::Rule;
use super::spec::Mode;
use crate::hooks::decision::{Decision, Disposition};

/// A compiled `[policy]`: rules in order, an index over them, and the
/// decision for when none matches.
///
/// Built by [`Policy::compile`] (or [`Policy::from_toml_str`]); immutable
/// afterwards, so one instance can be shared by every session.
#[derive(Debug)]
pub struct Policy {
    rules: Vec<Rule>,
    index: HookIndex,
    default: Decision,
    mode: Mode,
    limits: RateLimits,
}

impl Policy {
    /// Assembles a policy from rules that already compiled.
    pub(crate) fn new(
        mut rules: Vec<Rule>,
        default: Decision,
        mode: Mode,
        limits: RateLimits,
    ) -> Self {
        share_pointers(&mut rules);
        let index = HookIndex::build(&rules);
        Self {
            rules,
            index,
            default,
            mode,
            limits,
        }
    }

    /// Decides one hook: the first enforcing rule (in file order) that
    /// applies wins, otherwise the policy default.
    ///
    /// A rule in monitor mode that applies first is kept as the decision's
    /// `monitored` record and evaluation goes on as if it were absent, so
    /// adding a monitored rule never changes what is enforced. In a policy
    /// in monitor mode the result is an allow carrying what would have
    /// applied (see [`Mode::apply`]).
    ///
    /// Only rules whose hook pattern fits are looked at, so the cost grows
    /// with the rules that could apply, not with the size of the policy.
    pub fn evaluate(&self, hook: &HookView<'_>) -> Decision {
        self.evaluate_either(hook, None)
    }

    /// Decides a hook that names a tool two ways (a virtual server's tool,
    /// by its server's name in `own` and by the agent's in `called`): the
    /// rules that apply to `own` decide first; when none enforces, those
    /// that apply to `called`; when none does either, the default, with
    /// `own`'s monitored rule. One pass per name, whatever decides.
    pub fn evaluate_either(&self, own: &HookView<'_>, called: Option<&HookView<'_>>) -> Decision {
        let mut monitored = None;
        if let Some(rule) = self.first_enforcing(own, &mut monitored) {
            return self.decided(rule.decide(own), monitored, own);
        }
        if let Some(called) = called {
            let mut monitored_called = None;
            if let Some(rule) = self.first_enforcing(called, &mut monitored_called) {
                return self.decided(rule.decide(called), monitored_called, called);
            }
        }
        self.decided(self.default.clone(), monitored, own)
    }

    /// `decision` with what the monitored rule would have decided, under
    /// the policy's mode.
    fn decided(
        &self,
        decision: Decision,
        monitored: Option<&Rule>,
        hook: &HookView<'_>,
    ) -> Decision {
        let monitored = monitored.map(|rule| rule.decide(hook));
        self.mode.apply(decision.with_monitored(monitored))
    }

    /// The name of the enforcing rule that would decide `hook`, if any;
    /// useful for `config check` style tooling and tests.
    pub fn matching_rule(&self, hook: &HookView<'_>) -> Option<&str> {
        self.first_enforcing(hook, &mut None).map(Rule::name)
    }

    /// `[policy] mode`: whether the policy's decisions are applied.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The `[[policy.limit]]` entries and their counts, shared by every
    /// session that holds this policy.
    pub fn limits(&self) -> &RateLimits {
        &self.limits
    }

    /// The rules whose hook pattern fits `hook`, in file order.
    pub(crate) fn candidate_rules<'p>(&'p self, hook: &HookView<'_>) -> Vec<&'p Rule> {
        let mut glob_hits = Vec::new();
        self.index
            .candidates(hook, &mut glob_hits)
            .filter_map(|position| self.rules.get(position))
            .collect()
    }

    /// What the policy decides when no rule applies.
    pub(crate) fn default_disposition(&self) -> Disposition {
        self.default.decision
    }

    /// How many rules the policy holds.
    pub fn rule_count(&self) -> usize {
        self.rules.len()
    }

    /// The first applicable rule in enforce mode; the first applicable
    /// monitored rule before it goes to `monitored`.
    fn first_enforcing<'p>(
        &'p self,
        hook: &HookView<'_>,
        monitored: &mut Option<&'p Rule>,
    ) -> Option<&'p Rule> {
        let mut glob_hits = Vec::new();
        let mut lookups = Lookups::default();
        let applicable = self
            .index
            .candidates(hook, &mut glob_hits)
            .filter_map(|position| self.rules.get(position))
            .filter(|rule| rule.applies(hook, &mut lookups));
        for rule in applicable {
            match rule.mode() {
                Mode::Enforce => return Some(rule),
                Mode::Monitor => {
                    monitored.get_or_insert(rule);
                }
            }
        }
        None
    }
}

/// Gives conditions with the same pointer the same id, so one evaluation
/// walks each pointer once however many rules test it.
fn share_pointers(rules: &mut [Rule]) {
    let mut ids: HashMap<String, usize> = HashMap::new();
    for condition in rules.iter_mut().filter_map(Rule::condition_mut) {
        let next = ids.len();
        let id = *ids.entry(condition.pointer().to_owned()).or_insert(next);
        condition.share_pointer(id);
    }
}

#[cfg(test)]
mod caller_tests;
#[cfg(test)]
mod monitor_tests;
#[cfg(test)]
mod tests;
