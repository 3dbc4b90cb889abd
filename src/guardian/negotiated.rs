//! What a session agreed with its Guardian (the ServerHello, §4).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// What to do when no usable decision arrives (§6.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailurePosture {
    /// Fail open: proceed, and audit the bypass.
    #[default]
    Proceed,
    /// Fail closed.
    Deny,
}

/// The per-session outcome of the handshake.
#[derive(Debug, Clone, Default)]
pub struct Negotiated {
    /// Methods the Guardian evaluates; `None` means all of them.
    pub methods_evaluated: Option<HashSet<String>>,
    /// Default decision timeout.
    pub default_timeout: Option<Duration>,
    /// Per-method decision timeouts.
    pub per_method_timeout: HashMap<String, Duration>,
    /// The failure posture.
    pub on_decision_failure: FailurePosture,
    /// Set when the handshake got no answer and the startup posture let the
    /// session run anyway: hooks are not sent, and each bypass is audited.
    pub unguarded: Option<String>,
}

impl Negotiated {
    /// Whether hooks of `method` go to the Guardian.
    pub fn evaluates(&self, method: &str) -> bool {
        self.methods_evaluated
            .as_ref()
            .is_none_or(|methods| methods.contains(method))
    }

    /// How long to wait for a decision on `method`.
    pub fn timeout_for(&self, method: &str) -> Option<Duration> {
        self.per_method_timeout
            .get(method)
            .copied()
            .or(self.default_timeout)
    }
}
