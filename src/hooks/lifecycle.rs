//! `steps/sessionStart` and `steps/sessionEnd` payloads.

use std::sync::Arc;

use serde_json::{json, Value};

use super::identity::Identity;

/// What the proxy knows when a session starts: the first client message
/// (normally `initialize`) and where it is going.
#[derive(Debug, Clone, Default)]
pub struct SessionStartInfo {
    /// Downstream transport name (`stdio`, `http`, `ws`).
    pub transport: &'static str,
    /// The upstream route name.
    pub upstream: String,
    /// `params.clientInfo` of the client's `initialize`, when present.
    pub client_info: Option<Value>,
    /// `params.protocolVersion` of the client's `initialize`, when present.
    pub protocol_version: Option<String>,
    /// Who opened the session, when the downstream side knows.
    pub user: Option<Arc<Identity>>,
}

/// The `steps/sessionStart` payload.
pub fn session_start_payload(info: &SessionStartInfo) -> Value {
    let mut platform = json!({
        "platform": "acs-proxy",
        "transport": info.transport,
        "upstream": info.upstream,
    });
    if let Some(client) = &info.client_info {
        platform["client_info"] = client.clone();
    }
    if let Some(version) = &info.protocol_version {
        platform["mcp_protocol_version"] = Value::from(version.as_str());
    }
    let mut payload = json!({ "platform_context": platform });
    if let Some(user) = &info.user {
        payload["user_identity"] = user.user_identity();
    }
    payload
}

/// Why a session ended (`reason` in `steps/sessionEnd`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionEndReason {
    /// The client closed the session.
    Completed,
    /// The proxy was asked to stop.
    Cancelled,
    /// The upstream failed or exited.
    Error,
}

impl SessionEndReason {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionEndReason::Completed => "completed",
            SessionEndReason::Cancelled => "cancelled",
            SessionEndReason::Error => "error",
        }
    }
}

/// The `steps/sessionEnd` payload; `final_chain_hash` is the proxy's own
/// audit-chain head before the sealing entry.
pub fn session_end_payload(reason: SessionEndReason, final_chain_hash: Option<&str>) -> Value {
    let mut payload = json!({ "reason": reason.as_str() });
    if let Some(head) = final_chain_hash {
        payload["final_chain_hash"] = Value::from(head);
    }
    payload
}
