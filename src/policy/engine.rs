//! The compiled policy and how it decides a hook.

use std::sync::{PoisonError, RwLock};

use foldhash::HashMap;

use super::condition::Lookups;
use super::hook::HookView;
use super::index::HookIndex;
use super::limit::RateLimits;
use super::pattern::NamePattern;
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
    /// Names a tool was called by (through a virtual server), and whether
    /// any rule's `tool` pattern fits them: the same few names come back
    /// on every call, and most fit none.
    fitting_names: RwLock<HashMap<String, bool>>,
}

/// How many names [`Policy::fitting_names`] remembers; past that, names
/// are matched each time.
const FITTING_NAMES_REMEMBERED: usize = 1024;

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
            fitting_names: RwLock::default(),
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
    /// `own`'s monitored rule.
    ///
    /// The second pass looks only at rules that name a tool: the others
    /// see the same method, payload and caller under either name, so the
    /// first pass has already found what they say. A monitored one of
    /// those still counts for the second name when it comes first.
    pub fn evaluate_either(&self, own: &HookView<'_>, called: Option<&HookView<'_>>) -> Decision {
        let first = self.pass(own, Scope::EveryRule);
        if let Some((_, rule)) = first.enforcing {
            return self.decided(rule.decide(own), first.monitored, own);
        }
        if let Some(called) = called.filter(|hook| self.some_rule_names(hook.tool)) {
            let second = self.pass(called, Scope::NamingATool);
            if let Some((at, rule)) = second.enforcing {
                let earlier = first
                    .monitored_any_tool
                    .filter(|(position, _)| *position < at);
                let monitored = match (second.monitored, earlier) {
                    (Some(a), Some(b)) => Some(if a.0 < b.0 { a } else { b }),
                    (a, b) => a.or(b),
                };
                return self.decided(rule.decide(called), monitored, called);
            }
        }
        self.decided(self.default.clone(), first.monitored, own)
    }

    /// Whether any rule's `tool` pattern fits `tool`: when none does, no
    /// rule that names a tool can apply to it, whatever the hook.
    fn some_rule_names(&self, tool: Option<&str>) -> bool {
        let Some(tool) = tool else { return false };
        let remembered = self
            .fitting_names
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(tool)
            .copied();
        if let Some(fits) = remembered {
            return fits;
        }
        let fits = self.rules.iter().any(|rule| {
            names_a_tool(rule) && rule.tool().is_some_and(|pattern| pattern.matches(tool))
        });
        let mut names = self
            .fitting_names
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if names.len() < FITTING_NAMES_REMEMBERED {
            names.insert(tool.to_owned(), fits);
        }
        fits
    }

    /// `decision` with what the monitored rule would have decided, under
    /// the policy's mode.
    fn decided(
        &self,
        decision: Decision,
        monitored: Option<(usize, &Rule)>,
        hook: &HookView<'_>,
    ) -> Decision {
        let monitored = monitored.map(|(_, rule)| rule.decide(hook));
        self.mode.apply(decision.with_monitored(monitored))
    }

    /// The name of the enforcing rule that would decide `hook`, if any;
    /// useful for `config check` style tooling and tests.
    pub fn matching_rule(&self, hook: &HookView<'_>) -> Option<&str> {
        self.pass(hook, Scope::EveryRule)
            .enforcing
            .map(|(_, rule)| rule.name())
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
    /// The rules in `scope` that apply to `hook`, in file order, up to the
    /// first enforcing one.
    fn pass<'p>(&'p self, hook: &HookView<'_>, scope: Scope) -> Pass<'p> {
        let mut glob_hits = Vec::new();
        let mut lookups = Lookups::default();
        let mut found = Pass::default();
        let applicable = self
            .index
            .candidates(hook, &mut glob_hits)
            .filter_map(|position| Some((position, self.rules.get(position)?)))
            .filter(|(_, rule)| scope == Scope::EveryRule || names_a_tool(rule))
            .filter(|(_, rule)| rule.applies(hook, &mut lookups));
        for (position, rule) in applicable {
            match rule.mode() {
                Mode::Enforce => {
                    found.enforcing = Some((position, rule));
                    break;
                }
                Mode::Monitor => {
                    found.monitored.get_or_insert((position, rule));
                    if !names_a_tool(rule) {
                        found.monitored_any_tool.get_or_insert((position, rule));
                    }
                }
            }
        }
        found
    }
}

/// Which rules a pass looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    EveryRule,
    NamingATool,
}

/// What one pass over the rules found, each with its place in the file.
#[derive(Default)]
struct Pass<'p> {
    /// The first enforcing rule that applies.
    enforcing: Option<(usize, &'p Rule)>,
    /// The first monitored rule that applies before it.
    monitored: Option<(usize, &'p Rule)>,
    /// The first of those that names no tool.
    monitored_any_tool: Option<(usize, &'p Rule)>,
}

/// Whether `rule` applies only to some tools' hooks.
fn names_a_tool(rule: &Rule) -> bool {
    matches!(
        rule.tool(),
        Some(NamePattern::Exact(_) | NamePattern::Glob { .. })
    )
}

/// Gives conditions with the same pointer the same id, so one evaluation
/// walks each pointer once however many rules test it.
fn share_pointers(rules: &mut [Rule]) {
    let mut ids: HashMap<String, usize> = HashMap::default();
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
