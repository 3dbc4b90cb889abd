//! Why a Rego policy could not be loaded or could not decide.

use std::path::PathBuf;

use thiserror::Error;

/// A Rego policy that cannot load, or an evaluation that gave no answer.
///
/// Load errors stop the proxy at startup (and fail `config check`);
/// evaluation errors are decision failures, resolved by the failure
/// posture for the one hook they concern.
#[derive(Debug, Error)]
pub enum RegoError {
    /// `[policy] engine = "rego"` with nothing to load.
    #[error("policy.rego: engine = \"rego\" needs at least one glob of .rego files")]
    NoPatterns,
    /// `[[policy.rule]]` entries next to `engine = "rego"`: they would be ignored.
    #[error(
        "{file}:{line}: [[policy.rule]] is not used with engine = \"rego\"; write the rule in Rego"
    )]
    RulesWithRego {
        /// The config file.
        file: String,
        /// The first rule's line.
        line: usize,
    },
    /// `rego`, `data` or `query` set while the engine is the TOML rules.
    #[error("policy.{key} is only used with engine = \"rego\"")]
    RegoKeyWithRules {
        /// The key set in vain.
        key: &'static str,
    },
    /// A glob that does not compile.
    #[error("policy.rego: invalid glob {pattern:?}: {message}")]
    BadGlob {
        /// The glob as written.
        pattern: String,
        /// The glob compiler's complaint.
        message: String,
    },
    /// A glob that names no file: a missing policy is an error, not an
    /// empty (allow-everything) one.
    #[error("policy.rego: {pattern:?} matches no .rego file")]
    NoFiles {
        /// The glob as resolved against the config file's directory.
        pattern: String,
    },
    /// A policy or data file that cannot be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A module that does not parse or analyse; regorus's message names
    /// `file:line:column`.
    #[error("{0}")]
    Compile(String),
    /// The data document is not a JSON / YAML object.
    #[error("{}: {message}", path.display())]
    Data {
        /// The data file.
        path: PathBuf,
        /// The parser's complaint.
        message: String,
    },
    /// The query is not a rule the modules define, or fails on an empty input.
    #[error("policy.query {query:?}: {message}")]
    Query {
        /// The query as configured.
        query: String,
        /// regorus's complaint.
        message: String,
    },
    /// The hook could not be turned into `input`.
    #[error("the hook could not be given to the Rego policy: {0}")]
    Input(String),
    /// Evaluation failed (a runtime error or the time limit).
    #[error("Rego evaluation failed: {0}")]
    Evaluation(String),
    /// The query's value has no JSON form.
    #[error("the Rego decision has no JSON form: {0}")]
    Output(String),
}
