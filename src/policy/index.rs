//! Narrowing the rules to those whose `hook` (and exact `tool`) fit.
//!
//! Policies grow by adding rules for other hooks and tools, so evaluation
//! must not scan them all: exact names are hash lookups, the tool globs of
//! a bucket are matched all at once by one `GlobSet`, and only the distinct
//! hook globs are tested one by one.

use std::collections::HashMap;

use globset::{Candidate, Glob, GlobSet, GlobSetBuilder};

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
    /// Rules with no `tool` or `tool = "*"`, and tool globs when they could
    /// not be combined into a set; [`Rule::applies`] checks those.
    rest: Vec<usize>,
    /// Rules with a tool glob, ascending; `tool_globs.set` glob `i` is
    /// rule `tool_globs.rules[i]`'s.
    tool_globs: ToolGlobs,
}

/// A bucket's tool globs, matched in one pass.
#[derive(Debug, Default)]
struct ToolGlobs {
    rules: Vec<usize>,
    pending: Vec<Glob>,
    set: GlobSet,
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
        index.any.seal();
        index.exact.values_mut().for_each(Bucket::seal);
        index.globs.iter_mut().for_each(|(_, bucket)| bucket.seal());
        index
    }

    /// The rules that may apply to `hook`, in rule order.
    ///
    /// Rules whose tool glob matched are collected into `glob_hits` (left
    /// unallocated when none does), which the merge then borrows.
    pub(crate) fn candidates<'a>(
        &'a self,
        hook: &HookView<'_>,
        glob_hits: &'a mut Vec<usize>,
    ) -> Candidates<'a> {
        let mut merge = Candidates::new();
        let tool = hook.tool.map(Candidate::from_bytes);
        let mut offer =
            |bucket: &'a Bucket| bucket.offer(hook.tool, tool.as_ref(), &mut merge, glob_hits);
        if let Some(bucket) = self.exact.get(hook.method) {
            offer(bucket);
        }
        offer(&self.any);
        for (pattern, bucket) in &self.globs {
            if pattern.matches(hook.method) {
                offer(bucket);
            }
        }
        // Each rule sits in one bucket, so the hits hold no duplicates.
        glob_hits.sort_unstable();
        let glob_hits: &'a Vec<usize> = glob_hits;
        merge.push(glob_hits);
        merge
    }
}

impl Bucket {
    fn insert(&mut self, tool: Option<&NamePattern>, position: usize) {
        match tool {
            Some(NamePattern::Exact(name)) => {
                self.by_tool.entry(name.clone()).or_default().push(position)
            }
            Some(NamePattern::Glob { glob, .. }) => {
                self.tool_globs.rules.push(position);
                self.tool_globs.pending.push(glob.clone());
            }
            _ => self.rest.push(position),
        }
    }

    /// Combines the tool globs into one set. A set too large to build
    /// leaves them in `rest`, matched one by one as before.
    fn seal(&mut self) {
        let pending = std::mem::take(&mut self.tool_globs.pending);
        let mut builder = GlobSetBuilder::new();
        for glob in pending {
            builder.add(glob);
        }
        match builder.build() {
            Ok(set) => self.tool_globs.set = set,
            Err(error) => {
                tracing::warn!(%error, "tool globs matched one by one");
                self.rest.append(&mut self.tool_globs.rules);
                self.rest.sort_unstable();
            }
        }
    }

    /// Adds this bucket's lists for a hook about `tool`; exact-tool and
    /// tool-glob rules are skipped outright when the hook is not about a
    /// tool, and of the tool globs only the rules whose glob matched are
    /// added, to `glob_hits`.
    fn offer<'a>(
        &'a self,
        tool: Option<&str>,
        candidate: Option<&Candidate<'_>>,
        merge: &mut Candidates<'a>,
        glob_hits: &mut Vec<usize>,
    ) {
        if let Some(list) = tool.and_then(|name| self.by_tool.get(name)) {
            merge.push(list);
        }
        merge.push(&self.rest);
        if let Some(candidate) = candidate.filter(|_| !self.tool_globs.rules.is_empty()) {
            glob_hits.extend(
                self.tool_globs
                    .set
                    .matches_candidate(candidate)
                    .into_iter()
                    .filter_map(|glob| self.tool_globs.rules.get(glob)),
            );
        }
    }
}
