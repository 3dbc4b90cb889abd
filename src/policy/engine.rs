//! The compiled policy and how it decides a hook.

use std::collections::HashMap;

use super::condition::Lookups;
use super::hook::HookView;
use super::index::HookIndex;
use super::rule::Rule;
use crate::guardian::decision::Decision;

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
}

impl Policy {
    /// Assembles a policy from rules that already compiled.
    pub(crate) fn new(mut rules: Vec<Rule>, default: Decision) -> Self {
        share_pointers(&mut rules);
        let index = HookIndex::build(&rules);
        Self {
            rules,
            index,
            default,
        }
    }

    /// Decides one hook: the first rule (in file order) that applies wins,
    /// otherwise the policy default.
    ///
    /// Only rules whose hook pattern fits are looked at, so the cost grows
    /// with the rules that could apply, not with the size of the policy.
    pub fn evaluate(&self, hook: &HookView<'_>) -> Decision {
        match self.first_applicable(hook) {
            Some(rule) => rule.decide(hook),
            None => self.default.clone(),
        }
    }

    /// The name of the rule that would decide `hook`, if any; useful for
    /// `config check` style tooling and tests.
    pub fn matching_rule(&self, hook: &HookView<'_>) -> Option<&str> {
        self.first_applicable(hook).map(Rule::name)
    }

    /// How many rules the policy holds.
    pub fn rule_count(&self) -> usize {
        self.rules.len()
    }

    fn first_applicable(&self, hook: &HookView<'_>) -> Option<&Rule> {
        let mut glob_hits = Vec::new();
        let mut lookups = Lookups::default();
        self.index
            .candidates(hook, &mut glob_hits)
            .filter_map(|position| self.rules.get(position))
            .find(|rule| rule.applies(hook, &mut lookups))
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
mod tests;
