//! Why a policy could not be loaded.

use thiserror::Error;

/// A policy that cannot be parsed or compiled.
///
/// Every variant carries the file name and line so the message reads like
/// a compiler diagnostic: `proxy.toml:42: rule "no-env": invalid regex in
/// match.regex: ...`. The proxy refuses to start on any of these, because
/// running with a rule silently dropped would weaken the policy.
#[derive(Debug, Error)]
pub enum PolicyError {
    /// The TOML itself is malformed or has an unknown / mistyped key.
    #[error("{file}:{line}: {message}")]
    Toml {
        /// Source file name.
        file: String,
        /// 1-based line of the offending text.
        line: usize,
        /// The TOML parser's message (it names the key).
        message: String,
    },
    /// One rule is well-formed TOML but not a usable rule.
    #[error("{file}:{line}: rule {rule:?}: {problem}")]
    Rule {
        /// Source file name.
        file: String,
        /// 1-based line of the rule.
        line: usize,
        /// The rule's `name`.
        rule: String,
        /// What is wrong with it.
        problem: RuleProblem,
    },
    /// One `[[policy.limit]]` is well-formed TOML but not a usable limit.
    #[error("{file}:{line}: limit {limit:?}: {problem}")]
    Limit {
        /// Source file name.
        file: String,
        /// 1-based line of the limit.
        line: usize,
        /// The limit's `name`.
        limit: String,
        /// What is wrong with it.
        problem: LimitProblem,
    },
    /// The Rego policy (`engine = "rego"`) cannot be loaded.
    #[error(transparent)]
    Rego(#[from] super::rego::RegoError),
}

/// What is wrong with a single rule; wrapped in [`PolicyError::Rule`].
#[derive(Debug, Error)]
pub enum RuleProblem {
    /// `name = ""`: a rule must be nameable in `rule_id` and in errors.
    #[error("name must not be empty")]
    EmptyName,
    /// Two rules share a name, so `rule_id` would be ambiguous.
    #[error("duplicate rule name (first defined on line {first_line})")]
    DuplicateName {
        /// Where the earlier rule with this name starts.
        first_line: usize,
    },
    /// A `hook` or `tool` glob does not compile.
    #[error("invalid glob in {field}: {source}")]
    InvalidGlob {
        /// `hook` or `tool`.
        field: &'static str,
        /// The glob compiler's complaint.
        source: globset::Error,
    },
    /// A `match.regex` or `redact.regex` does not compile.
    #[error("invalid regex in {field}: {source}")]
    InvalidRegex {
        /// `match.regex` or `redact.regex`.
        field: &'static str,
        /// The regex compiler's complaint.
        source: regex::Error,
    },
    /// A pointer is not RFC 6901.
    #[error("invalid JSON pointer in {field}: {pointer:?} ({why})")]
    InvalidPointer {
        /// `match.pointer` or `redact.pointer`.
        field: &'static str,
        /// The pointer as written.
        pointer: String,
        /// Which RFC 6901 rule it breaks.
        why: &'static str,
    },
    /// deny / modify / ask / defer need a reasoning on the wire.
    #[error("reasoning is required with decision = {decision:?}")]
    MissingReasoning {
        /// The rule's decision.
        decision: &'static str,
    },
    /// A block that only means something with another decision.
    #[error("`{block}` is only allowed with decision = {needs:?}")]
    MisplacedBlock {
        /// `redact`, `set`, `ask` or `defer`.
        block: &'static str,
        /// The decision it belongs to.
        needs: &'static str,
    },
    /// A modify rule that would change nothing.
    #[error("decision = \"modify\" needs `redact` or `set` (or both)")]
    EmptyModify,
    /// A `set` value has no JSON form.
    #[error("set.{key}: {why}")]
    InvalidOverride {
        /// The argument name.
        key: String,
        /// Why it cannot be sent.
        why: &'static str,
    },
    /// `reason_codes` must be unique on the wire.
    #[error("reason code {0:?} is listed twice")]
    DuplicateReasonCode(String),
}

/// What is wrong with a single `[[policy.limit]]`; wrapped in
/// [`PolicyError::Limit`] with its file and line.
#[derive(Debug, Error)]
pub enum LimitProblem {
    /// `name = ""`: a limit must be nameable in refusals and metrics.
    #[error("name must not be empty")]
    EmptyName,
    /// Two limits share a name, so refusals would be ambiguous.
    #[error("duplicate limit name (first defined on line {first_line})")]
    DuplicateName {
        /// Where the earlier limit with this name starts.
        first_line: usize,
    },
    /// A `hook` or `tool` glob does not compile (boxed: a glob error is
    /// large and this is the rare case).
    #[error(transparent)]
    Pattern(Box<RuleProblem>),
    /// Neither a rate nor a concurrency limit.
    #[error("a limit needs `calls` with `interval_s`, or `concurrent`")]
    NothingLimited,
    /// `calls` and `interval_s` only make sense together.
    #[error("`calls` and `interval_s` go together")]
    HalfRate,
    /// A zero would refuse every call, which `deny` says more clearly.
    #[error("`{0}` must be at least 1")]
    Zero(&'static str),
    /// More calls than nanoseconds in the interval.
    #[error("`calls` = {calls} cannot be spread over {interval_s} s")]
    RateTooFine {
        /// The configured calls.
        calls: u32,
        /// The configured interval.
        interval_s: u64,
    },
}

impl From<RuleProblem> for LimitProblem {
    fn from(problem: RuleProblem) -> Self {
        LimitProblem::Pattern(Box::new(problem))
    }
}
