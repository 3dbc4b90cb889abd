//! What an audit entry says happened to a hook: who decided it and what
//! enforcement did. Defined here, below the Guardian and enforcement that
//! produce them, because the stored entry is what fixes their spelling.

/// Where a decision came from; recorded in every audit entry and metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionSource {
    /// The embedded policy engine.
    Embedded,
    /// A remote ACS Guardian.
    Remote,
    /// The failure posture, because no usable decision arrived.
    Posture,
    /// The Guardian does not evaluate this method (allowed, audited).
    NotEvaluated,
    /// The proxy itself (an enforcement event, e.g. an invalid modification).
    Proxy,
}

impl DecisionSource {
    /// The audit and metric spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionSource::Embedded => "embedded",
            DecisionSource::Remote => "remote",
            DecisionSource::Posture => "posture",
            DecisionSource::NotEvaluated => "not_evaluated",
            DecisionSource::Proxy => "proxy",
        }
    }
}

/// What enforcement did with a message; recorded in the audit log and in
/// `acs_proxy_enforcement_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Passed to the next stage or forwarded unchanged.
    Forwarded,
    /// Forwarded with changes.
    Rewritten,
    /// Not forwarded; the sender got a reply saying why.
    Blocked,
    /// Not forwarded, silently (a notification, or a cancelled request).
    Dropped,
    /// Waiting for an approver or a deferral.
    Held,
    /// Only recorded (audit-only hooks such as `steps/sessionEnd`).
    Recorded,
}

impl Action {
    /// The audit and metric spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Forwarded => "forwarded",
            Action::Rewritten => "rewritten",
            Action::Blocked => "blocked",
            Action::Dropped => "dropped",
            Action::Held => "held",
            Action::Recorded => "recorded",
        }
    }
}
