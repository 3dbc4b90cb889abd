//! The errors of the pin file, the rules and the review commands.

use std::path::PathBuf;

/// What can go wrong with the pin file, the rules or a review.
#[derive(Debug, thiserror::Error)]
pub enum IntegrityError {
    /// The pin file exists but cannot be read.
    #[error("cannot read the pin file {path}: {source}")]
    ReadPins {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The pin file is not valid pin-file JSON.
    #[error("the pin file {path} is malformed: {source}")]
    ParsePins {
        /// The file.
        path: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
    /// The pin file has a format version this build does not know.
    #[error("the pin file {path} has version {version}; this build reads version {expected}")]
    PinVersion {
        /// The file.
        path: PathBuf,
        /// Its version.
        version: u32,
        /// The version this build reads.
        expected: u32,
    },
    /// The pin file cannot be written.
    #[error("cannot write the pin file {path}: {source}")]
    WritePins {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A poisoning rule does not compile.
    #[error("integrity rule {name:?}: {message}")]
    Rule {
        /// The rule.
        name: String,
        /// Why.
        message: String,
    },
    /// The current definitions could not be read from an upstream.
    #[error("upstream {upstream:?}: {message}")]
    Fetch {
        /// The upstream route.
        upstream: String,
        /// Why.
        message: String,
    },
    /// An audit log could not be read.
    #[error("cannot read the audit log {path}: {message}")]
    AuditLog {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// A review named something the config or the pins do not have.
    #[error("{0}")]
    Review(String),
}
