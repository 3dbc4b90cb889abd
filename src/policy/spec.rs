//! What `proxy.toml` says under `[policy]`, exactly as written.
//!
//! These types only mirror the file; every check that needs more than the
//! TOML grammar (globs, regexes, pointers, which blocks go with which
//! decision) happens in [`Policy::compile`](super::Policy::compile), so the
//! config module can embed [`PolicySpec`] and still get precise errors.
//! Unknown keys are rejected here so that a typo never silently weakens a
//! rule.

use serde::Deserialize;
use toml::{Spanned, Table};

pub use super::limit::LimitSpec;
use crate::guardian::decision::Disposition;

/// The `[policy]` table: a default and an ordered list of rules.
///
/// Rules keep their source span so compile errors can name the line of the
/// rule that is wrong; for that to work the whole file must be deserialized
/// straight from its text (spans do not survive a detour through
/// `toml::Value`).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicySpec {
    /// `policy_id` in every `policy_references` entry; defaults to the
    /// name of the file the policy came from.
    #[serde(default)]
    pub id: Option<String>,
    /// The decision when no rule matches.
    #[serde(default)]
    pub default: Verdict,
    /// The rules, in the order they are tried (`[[policy.rule]]`).
    #[serde(default, rename = "rule")]
    pub rules: Vec<Spanned<RuleSpec>>,
    /// `enforce` (the default) or `monitor`: the whole policy's decisions
    /// are only recorded, every step passes.
    #[serde(default)]
    pub mode: Mode,
    /// Rate limits and quotas on calls (`[[policy.limit]]`).
    #[serde(default, rename = "limit")]
    pub limits: Vec<Spanned<LimitSpec>>,
    /// Which engine decides: the rules above or a Rego policy.
    #[serde(default)]
    pub engine: EngineKind,
    /// `engine = "rego"`: globs of `.rego` files, relative to the config
    /// file's directory.
    #[serde(default)]
    pub rego: Vec<String>,
    /// `engine = "rego"`: a JSON or YAML document loaded as `data`.
    #[serde(default)]
    pub data: Option<std::path::PathBuf>,
    /// `engine = "rego"`: the rule whose value is the decision (default
    /// `data.acs.decision`).
    #[serde(default)]
    pub query: Option<String>,
}

/// Whether decisions are applied or only recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Decisions are applied.
    #[default]
    Enforce,
    /// Decisions are evaluated, audited and counted, but the step passes:
    /// a way to try a policy on live traffic before it blocks anything.
    Monitor,
}

/// `[policy] engine`: which language the embedded Guardian's policy is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// `[[policy.rule]]` entries in the config file.
    #[default]
    Rules,
    /// Rego modules (OPA's language), evaluated by regorus.
    Rego,
}

/// Allow or deny: the only outcomes that need no further detail, used for
/// the policy default and for what happens when an ask or defer times out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Let unmatched steps proceed (the usual gateway posture).
    #[default]
    Allow,
    /// Block every step no rule allows.
    Deny,
}

/// One `[[policy.rule]]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    /// Unique rule name, reported as `rule_id`.
    pub name: String,
    /// Glob over the hook method; `*` crosses `/`.
    #[serde(default = "any_hook")]
    pub hook: String,
    /// Glob over the tool name; when present the rule only matches hooks
    /// that concern a tool call.
    #[serde(default)]
    pub tool: Option<String>,
    /// Glob over the caller's user id; the rule never matches a hook
    /// without an identity.
    #[serde(default)]
    pub user: Option<String>,
    /// Glob over the caller's roles: matches when any role does.
    #[serde(default)]
    pub role: Option<String>,
    /// Glob over the caller's tenant; never matches a caller without one.
    #[serde(default)]
    pub tenant: Option<String>,
    /// `monitor` records what the rule would decide and lets evaluation go
    /// on as if the rule were absent; `enforce` (the default) applies it.
    #[serde(default)]
    pub mode: Mode,
    /// A condition on the hook payload.
    #[serde(default, rename = "match")]
    pub matcher: Option<MatchSpec>,
    /// What the rule decides when it matches.
    pub decision: Disposition,
    /// Why; required for everything but allow.
    #[serde(default)]
    pub reasoning: Option<String>,
    /// Machine-readable codes copied into the decision.
    #[serde(default)]
    pub reason_codes: Vec<String>,
    /// Modify: rewrite string leaves that match a regex.
    #[serde(default)]
    pub redact: Option<RedactSpec>,
    /// Modify: tool argument name → replacement value.
    #[serde(default)]
    pub set: Option<Table>,
    /// Ask: how to put the question to an approver.
    #[serde(default)]
    pub ask: Option<AskSpec>,
    /// Defer: how long to hold the step and what happens then.
    #[serde(default)]
    pub defer: Option<DeferSpec>,
}

fn any_hook() -> String {
    "*".to_owned()
}

/// `match = { pointer, regex }`: the value at `pointer` must match `regex`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatchSpec {
    /// RFC 6901 pointer into the hook payload.
    pub pointer: String,
    /// Searched (unanchored) in the value's text.
    pub regex: String,
}

/// `redact = { pointer, regex, replacement }`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedactSpec {
    /// Where to look; `""` is the whole payload.
    #[serde(default)]
    pub pointer: String,
    /// What to rewrite inside each string leaf.
    pub regex: String,
    /// Replacement text; `$1` / `$name` expand capture groups (`$$` is a
    /// literal dollar).
    #[serde(default = "default_replacement")]
    pub replacement: String,
}

fn default_replacement() -> String {
    "[REDACTED]".to_owned()
}

/// `ask = { question, timeout_seconds, timeout_disposition }`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AskSpec {
    /// The question for the approver (default: the rule's reasoning).
    #[serde(default)]
    pub question: Option<String>,
    /// How long to wait for an answer (default 120).
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    /// What applies when nobody answers (default deny).
    #[serde(default)]
    pub timeout_disposition: Option<Verdict>,
}

/// `defer = { timeout_ms, timeout_decision }`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeferSpec {
    /// How long the step may be held (default 5000).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// What applies when the hold expires (default deny).
    #[serde(default)]
    pub timeout_decision: Option<Verdict>,
}

impl Verdict {
    /// The wire disposition this verdict stands for.
    pub fn disposition(self) -> Disposition {
        match self {
            Verdict::Allow => Disposition::Allow,
            Verdict::Deny => Disposition::Deny,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Doc {
        policy: PolicySpec,
    }

    fn parse(text: &str) -> Result<PolicySpec, toml::de::Error> {
        toml::from_str::<Doc>(text).map(|doc| doc.policy)
    }

    #[test]
    fn empty_policy_defaults_to_allow_without_rules() {
        let spec = parse("[policy]\n").expect("valid");
        assert_eq!(spec.default, Verdict::Allow);
        assert!(spec.rules.is_empty());
    }

    #[test]
    fn full_rule_parses_with_defaults_and_span() {
        let text = r#"
[policy]
default = "deny"
[[policy.rule]]
name = "scrub"
decision = "modify"
reasoning = "keys"
redact = { regex = "sk-[a-z]+" }
set = { limit = 10, deep = { a = [1, 2] } }
"#;
        let spec = parse(text).expect("valid");
        assert_eq!(spec.default, Verdict::Deny);
        let rule = &spec.rules[0];
        assert_eq!(rule.get_ref().hook, "*");
        let redact = rule.get_ref().redact.as_ref().expect("redact");
        assert_eq!(redact.pointer, "");
        assert_eq!(redact.replacement, "[REDACTED]");
        assert!(
            text[rule.span()].starts_with("[[policy.rule]]"),
            "{:?}",
            &text[rule.span()]
        );
    }

    #[test]
    fn unknown_key_is_named() {
        let text = "[policy]\n[[policy.rule]]\nname = \"x\"\ndecision = \"allow\"\nbogus = 1\n";
        let err = parse(text).expect_err("unknown key");
        assert!(err.message().contains("bogus"), "{err}");
    }

    #[test]
    fn unknown_decision_is_rejected() {
        let text = "[policy]\n[[policy.rule]]\nname = \"x\"\ndecision = \"maybe\"\n";
        assert!(parse(text).is_err());
    }
}
