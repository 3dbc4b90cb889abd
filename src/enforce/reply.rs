//! The replies that stand in for a blocked message (DESIGN §3.5).
//!
//! A denied `tools/call` is answered with a `CallToolResult` whose
//! `isError` is true and whose text is the Guardian's reasoning, so the
//! model sees why and can adapt. Any other denied request, and a denied
//! response, becomes a JSON-RPC error with code
//! [`codes::POLICY_DENIED`](crate::jsonrpc::codes::POLICY_DENIED) and
//! `data: {decision, reasoning, reason_codes, audit_entry_id}`. A message
//! refused because the audit log cannot record it is not the policy's
//! answer: it is always a JSON-RPC error, code
//! [`codes::AUDIT_UNAVAILABLE`](crate::jsonrpc::codes::AUDIT_UNAVAILABLE).

use bytes::Bytes;
use serde_json::{json, Value};

use crate::audit::AUDIT_UNAVAILABLE_REASON;
use crate::guardian::Decision;
use crate::jsonrpc::{codes, error_response, RequestId};

/// What to tell the agent about a block.
#[derive(Debug, Clone)]
pub struct Denial<'a> {
    /// The decision that blocked (possibly a posture or proxy decision).
    pub decision: &'a Decision,
    /// The audit entry that records it, so an operator can find it.
    pub audit_entry_id: Option<&'a str>,
    /// Error code for JSON-RPC error replies.
    pub code: i64,
}

impl<'a> Denial<'a> {
    /// The denial `decision` calls for: -32013 when it stands in for a
    /// decision the audit log could not record, else a policy denial.
    pub fn of(decision: &'a Decision, audit_entry_id: Option<&'a str>) -> Self {
        let audit_failed = decision
            .reason_codes
            .iter()
            .any(|code| code == AUDIT_UNAVAILABLE_REASON);
        let code = if audit_failed {
            codes::AUDIT_UNAVAILABLE
        } else {
            codes::POLICY_DENIED
        };
        Self {
            decision,
            audit_entry_id,
            code,
        }
    }

    fn reasoning(&self) -> &str {
        self.decision
            .reasoning
            .as_deref()
            .unwrap_or("denied by policy")
    }

    fn data(&self) -> Value {
        json!({
            "decision": self.decision.decision.as_str(),
            "reasoning": self.reasoning(),
            "reason_codes": self.decision.reason_codes,
            "audit_entry_id": self.audit_entry_id,
        })
    }
}

/// The reply to the sender of a blocked request with this `method`.
pub fn blocked_request(id: &RequestId, method: &str, denial: &Denial<'_>) -> Bytes {
    if method == "tools/call" && denial.code == codes::POLICY_DENIED {
        return denied_tool_result(id, denial);
    }
    error_reply(id, denial)
}

/// The message that replaces a blocked response to a request with `method`.
pub fn blocked_response(id: &RequestId, method: &str, denial: &Denial<'_>) -> Bytes {
    blocked_request(id, method, denial)
}

fn error_reply(id: &RequestId, denial: &Denial<'_>) -> Bytes {
    let message = format!("acs-proxy: {}", denial.reasoning());
    error_response(Some(id), denial.code, &message, Some(denial.data()))
}

fn denied_tool_result(id: &RequestId, denial: &Denial<'_>) -> Bytes {
    let text = format!("Blocked by policy: {}", denial.reasoning());
    let reply = json!({
        "jsonrpc": "2.0",
        "id": id.to_value(),
        "result": {
            "content": [{ "type": "text", "text": text }],
            "isError": true,
            "_meta": { "io.acs-proxy/decision": denial.data() },
        },
    });
    Bytes::from(reply.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denied_tool_call_is_an_error_result_with_reasoning() {
        let decision = Decision::deny("shell tools are blocked", None);
        let id = RequestId::from_json("5");
        let bytes = blocked_request(&id, "tools/call", &Denial::of(&decision, Some("3")));
        let reply: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(reply["id"], 5);
        assert_eq!(reply["result"]["isError"], true);
        assert!(reply["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("shell tools are blocked"));
    }

    #[test]
    fn other_denials_are_json_rpc_errors_with_data() {
        let decision = Decision::deny("no", Some("approver_unavailable"));
        let id = RequestId::from_json("\"r\"");
        let bytes = blocked_request(&id, "resources/read", &Denial::of(&decision, Some("9")));
        let reply: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(reply["error"]["code"], codes::POLICY_DENIED);
        assert_eq!(
            reply["error"]["data"]["reason_codes"][0],
            "approver_unavailable"
        );
        assert_eq!(reply["error"]["data"]["audit_entry_id"], "9");
    }

    #[test]
    fn audit_refusals_are_errors_even_for_tool_calls() {
        let decision = Decision::deny(
            "the audit log cannot be written",
            Some(AUDIT_UNAVAILABLE_REASON),
        );
        let id = RequestId::from_json("1");
        let bytes = blocked_request(&id, "tools/call", &Denial::of(&decision, None));
        let reply: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(reply["error"]["code"], codes::AUDIT_UNAVAILABLE);
        assert!(reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("audit log cannot be written"));
    }
}
