//! The Guardian's answer to one hook, in the ACS v0.1.0 wire shape (§6).
//!
//! These types are shared by both Guardians (embedded and remote), by
//! enforcement, and by the audit log, so they mirror the wire exactly:
//! dispositions are lowercase, optional members are omitted when empty.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What the Guardian wants done with a step (§6, lowercase on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Disposition {
    /// Proceed unchanged.
    Allow,
    /// Block the step.
    Deny,
    /// Proceed with the changes in `modifications`.
    Modify,
    /// Pause until an approver answers (`ask_details`).
    Ask,
    /// The verdict is not reachable yet; suspend (`defer_details`).
    Defer,
}

impl Disposition {
    /// The wire spelling, also used as a metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Disposition::Allow => "allow",
            Disposition::Deny => "deny",
            Disposition::Modify => "modify",
            Disposition::Ask => "ask",
            Disposition::Defer => "defer",
        }
    }
}

/// A decision as the enforcement stage consumes it: the ACS `result` members
/// that matter to the Observed Agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// allow / deny / modify / ask / defer.
    pub decision: Disposition,
    /// Human-readable reason, required for everything but allow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// Machine-readable codes; the registered ones (`modify_unsupported`,
    /// `approver_unavailable`, `chain_mismatch`) are spelled exactly.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reason_codes: Vec<String>,
    /// Which policy rule fired. Shared: a rule's decision is cloned for
    /// every hook it decides, and an empty list allocates nothing.
    #[serde(default, skip_serializing_if = "<[_]>::is_empty")]
    pub policy_references: Arc<[PolicyReference]>,
    /// Present iff `decision == modify` (§6.3). Boxed, like the two
    /// details below: most decisions have none, and a decision moves
    /// through several calls and futures on every hook, at its full size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modifications: Option<Box<Modifications>>,
    /// Present iff `decision == ask` (§9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask_details: Option<Box<AskDetails>>,
    /// Present iff `decision == defer` (§6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defer_details: Option<Box<DeferDetails>>,
    /// The Guardian's audit-chain head after this step (remote Guardians, §8.6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain_hash: Option<String>,
    /// What a policy or rule in monitor mode would have decided, had it
    /// been enforced: recorded and counted, never applied. Not an ACS
    /// member, so never on the wire; the embedded engines set it and the
    /// relay records it whatever engine produced it.
    #[serde(skip)]
    pub monitored: Option<Box<Decision>>,
    /// Which version of the embedded policy decided (the digest of its
    /// files), for the audit entry. Not an ACS member either.
    #[serde(skip)]
    pub policy_digest: Option<Arc<str>>,
}

impl Decision {
    /// A plain allow with no reasoning.
    pub fn allow() -> Self {
        Self::new(Disposition::Allow, None)
    }

    /// A deny carrying a reason and, optionally, a registered reason code.
    pub fn deny(reasoning: impl Into<String>, code: Option<&str>) -> Self {
        let mut decision = Self::new(Disposition::Deny, Some(reasoning.into()));
        decision.reason_codes.extend(code.map(str::to_owned));
        decision
    }

    /// A decision with only its disposition and reasoning set.
    pub fn new(decision: Disposition, reasoning: Option<String>) -> Self {
        Self {
            decision,
            reasoning,
            reason_codes: Vec::new(),
            policy_references: Arc::default(),
            modifications: None,
            ask_details: None,
            defer_details: None,
            chain_hash: None,
            monitored: None,
            policy_digest: None,
        }
    }

    /// Monitor mode: an allow that carries `would_be` as what would have
    /// applied. A `would_be` that is itself an allow changes nothing and is
    /// returned as it is.
    pub fn monitoring(would_be: Decision) -> Self {
        if would_be.decision == Disposition::Allow {
            return would_be;
        }
        let mut allow = Self::allow();
        allow.monitored = Some(Box::new(would_be));
        allow
    }

    /// This decision, also recording what a monitored rule would have
    /// decided (the first such rule keeps its record).
    pub fn with_monitored(mut self, would_be: Option<Decision>) -> Self {
        if self.monitored.is_none() {
            self.monitored = would_be.map(Box::new);
        }
        self
    }
}

/// Names the policy and rule that produced a decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct PolicyReference {
    /// Policy identifier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_id: Option<Arc<str>>,
    /// Rule identifier within the policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_id: Option<Arc<str>>,
}

/// The changes a `modify` decision asks for (§6.3): either
/// `modified_content` alone, or `redactions` and/or `parameter_overrides`
/// with disjoint targets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Modifications {
    /// Replaces the whole payload (not applicable to wrapped MCP messages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified_content: Option<String>,
    /// Values replaced in place, addressed by RFC 6901 pointers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redactions: Vec<Redaction>,
    /// Tool argument name → new raw JSON value.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub parameter_overrides: Map<String, Value>,
}

/// One redaction: the value at `path` becomes `replacement`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Redaction {
    /// RFC 6901 pointer into the hook payload.
    pub path: String,
    /// The replacement string (`"[REDACTED]"` when absent on the wire).
    #[serde(default = "default_replacement")]
    pub replacement: String,
}

fn default_replacement() -> String {
    "[REDACTED]".to_owned()
}

/// Who should approve an `ask`, and how long to wait (§9).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct AskDetails {
    /// The approver (human, agent or service).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approver: Option<Value>,
    /// The question put to the approver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// Extra context for the approver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// How long to wait for an answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    /// What to do when nobody answers in time (absent = deny).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_disposition: Option<Disposition>,
}

/// Why and for how long a step is deferred (§6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct DeferDetails {
    /// insufficient_context | conflicting_policies | low_confidence | pending_dependency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// How long the step may be held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution_timeout_ms: Option<u64>,
    /// What applies when the hold expires (default deny).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_decision: Option<Disposition>,
}
