//! `AuditRecord`: what a caller knows about a step, before it is chained.
//!
//! Callers describe the step and the decision; the chain alone assigns
//! `entry_id`, `session_id`, `timestamp`, `previous_hash` and `entry_hash`,
//! so no caller can break the chain by filling those wrongly.

use serde_json::Value;

use super::entry::ContextEntry;
use super::monitored::Monitored;
use crate::enforce::Action;
use crate::guardian::DecisionSource;
use crate::hooks::Identity;
use crate::session::Direction;

/// A step to be recorded, built up with chained setters.
///
/// ```
/// use acs_proxy::audit::AuditRecord;
/// use acs_proxy::enforce::Action;
/// use acs_proxy::guardian::DecisionSource;
/// use acs_proxy::session::Direction;
/// let record = AuditRecord::new("req-7", "steps/toolCallRequest")
///     .decision("deny")
///     .decision_source(DecisionSource::Embedded)
///     .rule("no-shell")
///     .direction(Direction::ClientToServer)
///     .action(Action::Blocked);
/// # let _ = record;
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRecord {
    // A ContextEntry whose chain members are placeholders until
    // `into_entry` fills them; sharing the type avoids a second field list.
    entry: ContextEntry,
}

impl AuditRecord {
    /// Starts a record for the hook request `step_id` (its `request_id`) of
    /// method `step_type`, or [`super::ENFORCEMENT_STEP_TYPE`].
    pub fn new(step_id: impl Into<String>, step_type: impl Into<String>) -> Self {
        Self {
            entry: ContextEntry {
                step_id: step_id.into(),
                step_type: step_type.into(),
                ..ContextEntry::default()
            },
        }
    }

    /// Sets `request_hash`, normally from [`super::request_hash`].
    pub fn request_hash(mut self, hash: impl Into<String>) -> Self {
        self.entry.request_hash = Some(hash.into());
        self
    }

    /// Sets the decision applied (`allow`, `deny`, …).
    pub fn decision(mut self, decision: impl Into<String>) -> Self {
        self.entry.decision = Some(decision.into());
        self
    }

    /// Sets who produced the decision.
    pub fn decision_source(mut self, source: DecisionSource) -> Self {
        self.entry.decision_source = Some(source);
        self
    }

    /// Sets the human-readable reason.
    pub fn reasoning(mut self, reasoning: impl Into<String>) -> Self {
        self.entry.reasoning = Some(reasoning.into());
        self
    }

    /// Sets the ACS reason codes.
    pub fn reason_codes(mut self, codes: Vec<String>) -> Self {
        self.entry.reason_codes = codes;
        self
    }

    /// Sets the embedded-policy rule that matched.
    pub fn rule(mut self, rule: impl Into<String>) -> Self {
        self.entry.rule = Some(rule.into());
        self
    }

    /// Names the `[[policy.limit]]` that refused the call.
    pub fn limit(mut self, limit: impl Into<String>) -> Self {
        self.entry.limit = Some(limit.into());
        self
    }

    /// Names the version of the embedded policy that decided.
    pub fn policy_digest(mut self, digest: impl Into<String>) -> Self {
        self.entry.policy_digest = Some(digest.into());
        self
    }

    /// Records what a monitored rule or policy would have decided, and
    /// that it was not enforced.
    pub fn monitored(mut self, monitored: Monitored) -> Self {
        self.entry.enforced = Some(false);
        self.entry.monitored = Some(monitored);
        self
    }

    /// Sets which way the message was travelling.
    pub fn direction(mut self, direction: Direction) -> Self {
        self.entry.direction = Some(direction);
        self
    }

    /// Sets the MCP method.
    pub fn mcp_method(mut self, method: impl Into<String>) -> Self {
        self.entry.mcp_method = Some(method.into());
        self
    }

    /// Sets the JSON-RPC id of the MCP message.
    pub fn mcp_id(mut self, id: Value) -> Self {
        self.entry.mcp_id = Some(id);
        self
    }

    /// Sets what the proxy did with the message.
    pub fn action(mut self, action: Action) -> Self {
        self.entry.action = Some(action);
        self
    }

    /// Sets the `chain_hash` a remote Guardian published for this step.
    pub fn guardian_chain_hash(mut self, hash: impl Into<String>) -> Self {
        self.entry.guardian_chain_hash = Some(hash.into());
        self
    }

    /// Sets the digest of arguments or results.
    pub fn content_digest(mut self, digest: impl Into<String>) -> Self {
        self.entry.content_digest = Some(digest.into());
        self
    }

    /// Keeps the hook request's full `params` in the entry.
    pub fn hook_params(mut self, params: Value) -> Self {
        self.entry.hook_params = Some(params);
        self
    }

    /// Sets free-form detail (enforcement events).
    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.entry.detail = Some(detail.into());
        self
    }

    /// Names the session's caller on the entry.
    pub(crate) fn caller(mut self, caller: &Identity) -> Self {
        self.entry.user_id = Some(caller.user_id.clone());
        self.entry.authentication_method =
            Some(caller.descriptor.authentication_method().to_owned());
        self.entry.tenant_id = caller.tenant.clone();
        self
    }

    /// Names the upstream of a virtual server the entry is about.
    pub(crate) fn upstream(mut self, upstream: &str) -> Self {
        self.entry.upstream = Some(upstream.to_owned());
        self
    }

    /// The `step_type` this record will carry.
    pub fn step_type(&self) -> &str {
        &self.entry.step_type
    }

    /// Checks that the record's JSON values (`mcp_id`, `hook_params`) have a
    /// canonical form, so that hashing the entry later cannot fail. Every
    /// other member is a string or a flag, which always has one.
    pub(crate) fn check_canonical(&self) -> Result<(), crate::jcs::JcsError> {
        let values = [&self.entry.mcp_id, &self.entry.hook_params];
        values
            .into_iter()
            .flatten()
            .try_for_each(crate::jcs::check_value)
    }

    /// Completes the record with its chain position; `entry_hash` is left
    /// empty for the caller (the chain head) to compute.
    pub(crate) fn into_entry(
        self,
        session_id: &str,
        entry_id: u64,
        timestamp: String,
        previous_hash: Option<String>,
    ) -> ContextEntry {
        ContextEntry {
            entry_id: entry_id.to_string(),
            session_id: session_id.to_owned(),
            timestamp,
            previous_hash,
            ..self.entry
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_beyond_the_double_range_has_no_canonical_form() {
        let number = |text: &str| Value::Number(serde_json::from_str(text).unwrap());
        let record = AuditRecord::new("r", "steps/toolCallRequest").mcp_id(number("7"));
        assert!(record.check_canonical().is_ok());
        let params = serde_json::json!({"payload": {"arguments": [1.5, number("1e400")]}});
        assert!(record
            .clone()
            .hook_params(params)
            .check_canonical()
            .is_err());
        assert!(record.mcp_id(number("-1e999")).check_canonical().is_err());
    }

    #[test]
    fn into_entry_fills_only_chain_members() {
        let entry = AuditRecord::new("r", "steps/toolCallRequest")
            .request_hash("abc")
            .mcp_id(serde_json::json!("id-1"))
            .action(Action::Forwarded)
            .into_entry("s", 3, "t".into(), Some("p".into()));
        assert_eq!(entry.entry_id, "3");
        assert_eq!(entry.session_id, "s");
        assert_eq!(entry.previous_hash.as_deref(), Some("p"));
        assert_eq!(entry.request_hash.as_deref(), Some("abc"));
        assert_eq!(entry.action, Some(Action::Forwarded));
        assert_eq!(entry.entry_hash, "");
    }
}
