//! The embedded Guardian's policy engine: rules from `proxy.toml`.
//!
//! ```text
//!  [policy] in proxy.toml ──serde──▶ PolicySpec ──Policy::compile──▶ Policy
//!                                                                     │
//!  HookView { method, tool, payload, user } ──Policy::evaluate──▶ Decision
//!                                                                     │
//!  LimitedCall { hooks, tool, user, .. } ──policy.limits().admit──▶ Admitted
//! ```
//!
//! A policy is an ordered list of rules; the first rule that applies
//! decides, otherwise the policy's default does. A rule selects hooks by
//! method glob (`hook`), tool glob (`tool`) and caller globs (`user`,
//! `role`, `tenant`), may test one value of the payload (`match`), and
//! decides allow / deny / modify / ask / defer. A rule (or the whole
//! policy) in `mode = "monitor"` only records what it would decide.
//! `[[policy.limit]]` entries ([`limit`]) cap how often and how many calls
//! at once a caller may make; the relay checks them before any rule.
//!
//! Compilation does all the checking (globs, regexes, pointers, which
//! blocks go with which decision) and reports `file:line: rule "name": ...`
//! so an operator can fix the file without guessing. Evaluation uses an
//! index by hook so large policies stay cheap; see [`Policy::evaluate`].
//!
//! The engine knows nothing about transports or MCP framing: it sees a
//! method, an optional tool name, and a JSON payload.
//!
//! `[policy] engine = "rego"` replaces the rules with a Rego policy; see
//! [`rego`].

mod caller;
mod candidates;
mod compile;
mod condition;
mod engine;
mod error;
mod hook;
mod index;
pub mod limit;
mod listing;
mod modify;
mod monitor;
mod outcome;
mod overrides;
mod pattern;
mod pointer;
mod redact;
pub mod rego;
mod rule;
mod source;
mod spec;

pub use engine::Policy;
pub use error::{LimitProblem, PolicyError, RuleProblem};
pub use hook::HookView;
pub use limit::RateLimits;
pub use rego::RegoPolicy;
pub use source::PolicySource;
pub use spec::{
    AskSpec, DeferSpec, EngineKind, MatchSpec, Mode, PolicySpec, RedactSpec, RuleSpec, Verdict,
};
