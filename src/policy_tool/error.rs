//! Why a policy tool could not run at all (as opposed to a failing test).

use std::path::PathBuf;

use thiserror::Error;

use crate::config::ConfigError;
use crate::policy::rego::RegoError;

/// A file the tool needs that is missing or unusable.
#[derive(Debug, Error)]
pub enum ToolError {
    /// A hook or fixture file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A hook or fixture file is not what the format says.
    #[error("{}: {message}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The configuration a fixture or `eval` names does not load.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The Rego modules under the tested directory do not load.
    #[error(transparent)]
    Rego(#[from] RegoError),
}
