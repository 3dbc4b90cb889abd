//! What a modify rule changes: redactions and parameter overrides.

use serde_json::{Map, Value};

use super::error::RuleProblem;
use super::hook::HookView;
use super::overrides;
use super::redact::Redactor;
use super::spec::RuleSpec;
use crate::guardian::decision::Modifications;
use crate::hooks::HookPayload;

/// The compiled `redact` / `set` blocks of a modify rule.
#[derive(Debug, Clone)]
pub(crate) struct Modify {
    redactor: Option<Redactor>,
    overrides: Map<String, Value>,
}

impl Modify {
    /// Compiles the blocks; a modify rule that could never change anything
    /// is refused rather than left to emit empty `modifications`, which the
    /// schema forbids (minProperties 1).
    pub(crate) fn compile(spec: &RuleSpec) -> Result<Self, RuleProblem> {
        let redactor = spec.redact.as_ref().map(Redactor::compile).transpose()?;
        let overrides = match &spec.set {
            Some(set) => overrides::compile(set)?,
            None => Map::new(),
        };
        if redactor.is_none() && overrides.is_empty() {
            return Err(RuleProblem::EmptyModify);
        }
        Ok(Self {
            redactor,
            overrides,
        })
    }

    /// Whether the rule has something to change in `payload`.
    ///
    /// Overrides always apply; redaction only when some leaf matches, so a
    /// redact-only rule falls through on a clean payload instead of
    /// returning a modify that changes nothing.
    pub(crate) fn applies(&self, payload: &HookPayload) -> bool {
        !self.overrides.is_empty() || self.redactor.as_ref().is_some_and(|r| r.finds_any(payload))
    }

    /// The `modifications` object for this hook.
    pub(crate) fn modifications(&self, hook: &HookView<'_>) -> Modifications {
        let mut redactions = match &self.redactor {
            Some(redactor) => redactor.redactions(hook.payload.tree()),
            None => Vec::new(),
        };
        overrides::retain_disjoint(&mut redactions, &self.overrides, hook.method);
        Modifications {
            modified_content: None,
            redactions,
            parameter_overrides: self.overrides.clone(),
        }
    }
}
