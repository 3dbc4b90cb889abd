//! Narrowing the rules to those whose `hook` (and exact `tool`) fit.
//!
//! Policies grow by adding rules for other hooks and tools, so evaluation
//! must not scan them all: exact names are hash lookups, and only the
//! distinct hook globs are tested one by one.

use std::collections::HashMap;

use super::candidates::Candidates;
use super::hook::HookView;
use super::pattern::NamePattern;
use super::rule::Rule;

/// Rule indices grouped by hook pattern, then by exact tool name.
#[derive(Debug, Default)]
pub(crate) struct HookIndex {
    /// Rules whose hook has no glob syntax, by method.
    exact: HashMap<String, Bucket>,
    /// Rules with `hook = "*"` (the default), which need no matching.
    any: Bucket,
    /// One entry per distinct hook glob, shared by every rule that uses it.
    globs: Vec<(NamePattern, Bucket)>,
}

/// The rules filed under one hook pattern.
#[derive(Debug, Default)]
struct Bucket {
    /// Rules with an exact `tool`, by tool name.
    by_tool: HashMap<String, Vec<usize>>,
    /// Rules with no `tool` or a tool glob; [`Rule::applies`] checks those.
    rest: Vec<usize>,
}

impl HookIndex {
    /// Files every rule by its hook and tool patterns.
    ///
    /// Indices are pushed in rule order, so every list is ascending, which
    /// [`Candidates`] relies on.
    pub(crate) fn build(rules: &[Rule]) -> Self {
        let mut index = Self::default();
        let mut glob_slots: HashMap<String, usize> = HashMap::new();
        for (position, rule) in rules.iter().enumerate() {
            let bucket = match rule.hook() {
                NamePattern::Any => &mut index.any,
                NamePattern::Exact(method) => index.exact.entry(method.clone()).or_default(),
                NamePattern::Glob { glob, .. } => {
                    let slot = *glob_slots.entry(glob.glob().to_owned()).or_insert_with(|| {
                        index.globs.push((rule.hook().clone(), Bucket::default()));
                        index.globs.len() - 1
                    });
                    &mut index.globs[slot].1
                }
            };
            bucket.insert(rule.tool(), position);
        }
        index
    }

    /// The rules that may apply to `hook`, in rule order.
    pub(crate) fn candidates<'a>(&'a self, hook: &HookView<'_>) -> Candidates<'a> {
        let mut merge = Candidates::new();
        if let Some(bucket) = self.exact.get(hook.method) {
            bucket.offer(hook.tool, &mut merge);
        }
        self.any.offer(hook.tool, &mut merge);
        for (pattern, bucket) in &self.globs {
            if pattern.matches(hook.method) {
                bucket.offer(hook.tool, &mut merge);
            }
        }
        merge
    }
}

impl Bucket {
    fn insert(&mut self, tool: Option<&NamePattern>, position: usize) {
        match tool {
            Some(NamePattern::Exact(name)) => {
                self.by_tool.entry(name.clone()).or_default().push(position)
            }
            _ => self.rest.push(position),
        }
    }

    /// Adds this bucket's lists for a hook about `tool`; exact-tool rules
    /// are skipped outright when the hook is not about a tool.
    fn offer<'a>(&'a self, tool: Option<&str>, merge: &mut Candidates<'a>) {
        if let Some(list) = tool.and_then(|name| self.by_tool.get(name)) {
            merge.push(list);
        }
        merge.push(&self.rest);
    }
}
