//! Why a configuration could not be used.

use std::path::PathBuf;

use crate::policy::PolicyError;

/// A configuration problem, always naming where it is.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The TOML is malformed or has an unknown or mistyped key.
    #[error("{origin}: {message}")]
    Parse {
        /// The file (or `<defaults>`).
        origin: String,
        /// The parser's message, which names the line and key.
        message: String,
    },
    /// A policy rule cannot be compiled.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// Values that parse but cannot work together.
    #[error("{origin}: {message}")]
    Invalid {
        /// The file.
        origin: String,
        /// What is wrong.
        message: String,
    },
}
