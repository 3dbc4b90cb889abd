//! `ContextEntry`: one line of the audit log, in the shape ACS §8.1 names.
//!
//! The ACS members come first (`entry_id`, `step_id`, `step_type`,
//! `session_id`, `timestamp`, `request_hash`), then what the proxy adds
//! about the decision and what it did, then the chain members. That is the
//! order serde writes; the log itself stores each entry as its canonical
//! (sorted) content followed by the chain members, the bytes it hashed
//! (see `chain::hashed_line_into`). Readers parse lines as JSON, so member order
//! carries no meaning.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::monitored::Monitored;
use crate::enforce::Action;
use crate::guardian::DecisionSource;
use crate::session::Direction;

/// `step_type` of entries that record what the proxy did on its own (posture
/// fallback, `modify_unsupported`, …) rather than a hook decision.
pub const ENFORCEMENT_STEP_TYPE: &str = "enforcement";

/// `step_type` of the hook that ends a session; an entry of this type seals
/// its chain, so a truncated chain is distinguishable from a finished one.
pub const SESSION_END_STEP_TYPE: &str = "steps/sessionEnd";

/// One audit entry as stored and hashed.
///
/// Deserializing is lossy for one corner: an `mcp_id` of JSON `null` reads
/// back as `None`. The verifier therefore hashes the stored JSON, never a
/// round-tripped `ContextEntry`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContextEntry {
    /// Position in the session's chain: "1", "2", … (ACS reference convention).
    pub entry_id: String,
    /// The hook request's `request_id` this entry is about.
    pub step_id: String,
    /// The hook method, or [`ENFORCEMENT_STEP_TYPE`].
    pub step_type: String,
    /// The ACS session the chain belongs to.
    pub session_id: String,
    /// When the entry was made: RFC 3339, UTC, millisecond precision.
    pub timestamp: String,
    /// Lowercase hex SHA-256 of the JCS form of the hook request's `params`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_hash: Option<String>,

    /// The decision applied (`allow`, `deny`, `modify`, `ask`, `defer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    /// Who produced the decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision_source: Option<DecisionSource>,
    /// The Guardian's or policy's human-readable reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// Registered or custom ACS reason codes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reason_codes: Vec<String>,
    /// Name of the embedded-policy rule that matched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Name of the `[[policy.limit]]` that refused the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
    /// `false` when a rule or policy in monitor mode decided something that
    /// was not applied (then in `monitored`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforced: Option<bool>,
    /// What the monitored rule or policy would have decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitored: Option<Monitored>,
    /// The digest of the embedded policy that decided (its files' SHA-256,
    /// first 16 hex digits): which version of the policy made the decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_digest: Option<String>,
    /// Which way the MCP message was travelling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<Direction>,
    /// The MCP method of the message (or of the request a response answers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_method: Option<String>,
    /// The JSON-RPC id of the MCP message, verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_id: Option<Value>,
    /// What the proxy did with the message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<Action>,
    /// The `chain_hash` a remote Guardian published: a witness of its head.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guardian_chain_hash: Option<String>,
    /// Digest of arguments or results, stored instead of the content itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_digest: Option<String>,
    /// The hook request's `params` in full, only when `[audit]
    /// record_content` is on (by default arguments and results are kept
    /// only as the digest in `request_hash`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook_params: Option<Value>,
    /// Free-form detail for enforcement events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Who the session's caller is (`user_context.user_id`), on every
    /// entry of a session whose caller is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// How the caller authenticated (`user_context.authentication_method`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication_method: Option<String>,
    /// The caller's tenant (`params.tenant_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// The `[[upstream]]` the entry is about, on every entry of a session
    /// that is one upstream of a virtual server (`[[aggregate]]`), whose
    /// agent session spans several chains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,

    /// `entry_hash` of the previous entry of the session; written as an
    /// explicit `null` on the first entry so a reader sees a chain root, not
    /// a forgotten field.
    #[serde(default)]
    pub previous_hash: Option<String>,
    /// ACS §8.2 hash of this entry, linked to `previous_hash`.
    pub entry_hash: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minimal() -> ContextEntry {
        ContextEntry {
            entry_id: "1".into(),
            step_id: "req-1".into(),
            step_type: "steps/sessionStart".into(),
            session_id: "s".into(),
            timestamp: "2026-12-02T11:15:05.123Z".into(),
            entry_hash: "h".into(),
            ..ContextEntry::default()
        }
    }

    #[test]
    fn first_entry_writes_explicit_null_previous_hash_and_skips_empty_options() {
        let json = serde_json::to_string(&minimal()).unwrap();
        assert_eq!(
            json,
            r#"{"entry_id":"1","step_id":"req-1","step_type":"steps/sessionStart","session_id":"s","timestamp":"2026-12-02T11:15:05.123Z","previous_hash":null,"entry_hash":"h"}"#
        );
    }

    #[test]
    fn details_serialize_in_declared_order_with_wire_spellings() {
        let mut entry = minimal();
        entry.decision = Some("deny".into());
        entry.decision_source = Some(DecisionSource::NotEvaluated);
        entry.reason_codes = vec!["policy_violation".into()];
        entry.direction = Some(Direction::ServerToClient);
        entry.mcp_id = Some(serde_json::json!(7));
        entry.action = Some(Action::Blocked);
        let json = serde_json::to_string(&entry).unwrap();
        assert!(json.contains(
            r#""decision":"deny","decision_source":"not_evaluated","reason_codes":["policy_violation"],"direction":"server_to_client","mcp_id":7,"action":"blocked","previous_hash":null"#
        ));
        let back: ContextEntry = serde_json::from_str(&json).unwrap();
        assert_eq!(back, entry);
    }

    #[test]
    fn timestamp_has_millisecond_utc_shape() {
        let ts = crate::hooks::now_rfc3339();
        assert_eq!(ts.len(), "2026-12-02T11:15:05.123Z".len(), "{ts}");
        assert!(ts.ends_with('Z') && ts.as_bytes()[19] == b'.', "{ts}");
    }
}
