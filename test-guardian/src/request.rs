//! Reading an ACS request envelope (DIGEST §1.1) into the parts the
//! Guardian needs, and the JSON-RPC errors for envelopes it cannot use.

use serde_json::Value;

use crate::{HELLO, PING};

/// A request envelope that has the shape the Guardian needs.
#[derive(Debug, Clone)]
pub struct Request {
    /// The envelope exactly as parsed.
    pub envelope: Value,
    /// JSON-RPC `id` (a string or a number).
    pub id: Value,
    /// `method`.
    pub method: String,
    /// `params.request_id`.
    pub request_id: String,
    /// `params.metadata.session_id`; always present except on `system/ping`.
    pub session_id: Option<String>,
    /// `params.timestamp`; always present except on `system/ping`.
    pub timestamp: Option<String>,
    /// `params.nonce`, if any.
    pub nonce: Option<String>,
    /// `params.signature.key_id`, if any.
    pub key_id: Option<String>,
}

/// Why an envelope is unusable: a JSON-RPC error to send, unsigned.
#[derive(Debug, Clone, PartialEq)]
pub struct Unusable {
    /// The request `id` if it could be read, else `null`.
    pub id: Value,
    /// -32600 (invalid request) or -32602 (invalid params).
    pub code: i64,
    /// `data.reason`.
    pub reason: &'static str,
    /// Human text.
    pub message: String,
}

impl Request {
    /// `params` (an object).
    pub fn params(&self) -> &Value {
        &self.envelope["params"]
    }

    /// `params.payload` (`null` when absent, which only `system/ping` allows).
    pub fn payload(&self) -> &Value {
        &self.envelope["params"]["payload"]
    }

    /// Whether this is `system/ping`.
    pub fn is_ping(&self) -> bool {
        self.method == PING
    }

    /// Whether this is `handshake/hello`.
    pub fn is_hello(&self) -> bool {
        self.method == HELLO
    }

    /// `params.metadata.session_state.chain_hash`, if sent.
    pub fn client_chain_hash(&self) -> Option<&str> {
        self.params()
            .get("metadata")?
            .get("session_state")?
            .get("chain_hash")?
            .as_str()
    }

    /// Reads `envelope`. Everything but `system/ping` must carry
    /// `request_id`, `timestamp`, `metadata.session_id` and an object `payload`.
    pub fn parse(envelope: Value) -> Result<Request, Unusable> {
        let id = match envelope.get("id") {
            Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
            _ => Value::Null,
        };
        let invalid = |message: &str| Unusable {
            id: id.clone(),
            code: -32600,
            reason: "invalid_request",
            message: message.to_owned(),
        };
        if !envelope.is_object() {
            return Err(invalid("the request is not a JSON object"));
        }
        if envelope.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(invalid("\"jsonrpc\" must be \"2.0\""));
        }
        let Some(method) = envelope.get("method").and_then(Value::as_str) else {
            return Err(invalid("\"method\" must be a string"));
        };
        if id.is_null() {
            return Err(invalid("\"id\" must be a string or a number"));
        }
        let params_invalid = |message: String| Unusable {
            id: id.clone(),
            code: -32602,
            reason: "invalid_params",
            message,
        };
        let Some(params) = envelope.get("params").filter(|p| p.is_object()) else {
            return Err(params_invalid("\"params\" must be an object".into()));
        };
        let text = |pointer: &str| params.pointer(pointer).and_then(Value::as_str);
        let Some(request_id) = text("/request_id") else {
            return Err(params_invalid(
                "\"params.request_id\" must be a string".into(),
            ));
        };
        let ping = method == PING;
        let session_id = text("/metadata/session_id");
        let timestamp = text("/timestamp");
        if !ping {
            for (name, value) in [
                ("metadata.session_id", session_id),
                ("timestamp", timestamp),
            ] {
                if value.is_none() {
                    return Err(params_invalid(format!(
                        "\"params.{name}\" must be a string"
                    )));
                }
            }
            if !params.get("payload").is_some_and(Value::is_object) {
                return Err(params_invalid(
                    "\"params.payload\" must be an object".into(),
                ));
            }
        }
        Ok(Request {
            id: id.clone(),
            method: method.to_owned(),
            request_id: request_id.to_owned(),
            session_id: session_id.map(str::to_owned),
            timestamp: timestamp.map(str::to_owned),
            nonce: text("/nonce").map(str::to_owned),
            key_id: text("/signature/key_id").map(str::to_owned),
            envelope,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hook() -> Value {
        json!({"jsonrpc": "2.0", "id": 3, "method": "steps/toolCallRequest", "params": {
            "acs_version": "0.1.0", "request_id": "r", "timestamp": "2026-01-01T00:00:00Z",
            "metadata": {"agent_id": "a", "session_id": "s"}, "payload": {"tool": {"name": "t"}},
            "signature": {"algorithm": "HMAC-SHA256", "value": "", "key_id": "k1"}}})
    }

    #[test]
    fn reads_a_hook() {
        let request = Request::parse(hook()).expect("usable");
        assert_eq!(request.id, json!(3));
        assert_eq!(request.session_id.as_deref(), Some("s"));
        assert_eq!(request.key_id.as_deref(), Some("k1"));
        assert_eq!(request.payload()["tool"]["name"], "t");
    }

    #[test]
    fn names_what_is_missing() {
        let mut no_session = hook();
        no_session["params"]["metadata"] = json!({});
        let err = Request::parse(no_session).expect_err("unusable");
        assert_eq!((err.code, err.id), (-32602, json!(3)));

        let mut no_id = hook();
        no_id.as_object_mut().expect("object").remove("id");
        assert_eq!(Request::parse(no_id).expect_err("unusable").code, -32600);

        assert_eq!(
            Request::parse(json!([1])).expect_err("unusable").code,
            -32600
        );
    }

    #[test]
    fn ping_needs_only_a_request_id() {
        let ping = json!({"jsonrpc": "2.0", "id": "p", "method": "system/ping",
                          "params": {"request_id": "r", "payload": {"echo": "x"}}});
        let request = Request::parse(ping).expect("usable");
        assert!(request.is_ping());
        assert_eq!(request.session_id, None);
    }
}
