//! The reply to `system/ping` (§13): a liveness answer, never an
//! enforcement event.

use serde_json::Value;

use super::decision::disposition;
use super::fields::{member, object, required, string};
use super::frame::{check_error_reply_id, check_reply_id, check_result_header, outcome, Outcome};
use super::WireError;
use crate::guardian::Disposition;

/// A healthy Guardian's answer to `system/ping`.
#[derive(Debug, Clone, PartialEq)]
pub struct Pong {
    /// `payload.echo`: what the ping sent, returned.
    pub echo: Option<Value>,
    /// `payload.server_timestamp`: the Guardian's clock (ISO 8601), useful
    /// for spotting drift against `skew_window_ms`.
    pub server_timestamp: Option<String>,
}

/// Reads the reply to a `system/ping` with JSON-RPC id `expected_id` and
/// `params.request_id` `expected_request_id`: a final result that allows,
/// with `payload.status: "ok"`. The reply is bound like a decision because
/// pings travel unsigned. An error reply is [`WireError::Refused`].
pub fn parse_ping(
    response: &Value,
    expected_id: &Value,
    expected_request_id: &str,
) -> Result<Pong, WireError> {
    let result = match outcome(response)? {
        Outcome::Error(error) => {
            check_error_reply_id(response, expected_id)?;
            return Err(error.into());
        }
        Outcome::Result(result) => result,
    };
    check_reply_id(response, expected_id)?;
    check_result_header(result, expected_request_id)?;
    let decision = disposition(result)?;
    if decision != Disposition::Allow {
        return Err(WireError::PingNotAllowed(decision));
    }
    let payload = object(
        required(result, "payload", "result.payload")?,
        "result.payload",
    )?;
    let status = required(payload, "status", "result.payload.status")?;
    let status = string(status, "result.payload.status")?;
    if status != "ok" {
        return Err(WireError::PingNotOk(status.to_owned()));
    }
    Ok(Pong {
        echo: member(payload, "echo").cloned(),
        server_timestamp: member(payload, "server_timestamp")
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const REQUEST_ID: &str = "33333333-3333-4333-8333-333333333333";

    fn pong(decision: &str, payload: Value) -> Value {
        json!({
            "jsonrpc": "2.0",
            "id": 9,
            "result": {
                "type": "final",
                "acs_version": "0.1.0",
                "request_id": REQUEST_ID,
                "decision": decision,
                "payload": payload
            }
        })
    }

    fn parse(response: &Value) -> Result<Pong, WireError> {
        parse_ping(response, &json!(9), REQUEST_ID)
    }

    #[test]
    fn healthy_pong() {
        let response = pong(
            "allow",
            json!({"status": "ok", "echo": {"n": 1}, "server_timestamp": "2026-01-01T00:00:00Z"}),
        );
        assert_eq!(
            parse(&response).unwrap(),
            Pong {
                echo: Some(json!({"n": 1})),
                server_timestamp: Some("2026-01-01T00:00:00Z".into()),
            }
        );
    }

    #[test]
    fn status_is_the_only_required_payload_member() {
        let pong = parse(&pong("allow", json!({"status": "ok"}))).unwrap();
        assert_eq!(pong.echo, None);
        assert_eq!(pong.server_timestamp, None);
    }

    #[test]
    fn ping_must_allow() {
        let response = pong("deny", json!({"status": "ok"}));
        assert_eq!(
            parse(&response),
            Err(WireError::PingNotAllowed(Disposition::Deny))
        );
        let response = pong("ALLOW", json!({"status": "ok"}));
        assert!(matches!(
            parse(&response),
            Err(WireError::UnknownDecision(_))
        ));
    }

    #[test]
    fn status_must_be_ok() {
        let response = pong("allow", json!({"status": "degraded"}));
        assert_eq!(
            parse(&response),
            Err(WireError::PingNotOk("degraded".into()))
        );
        let response = pong("allow", json!({}));
        assert_eq!(
            parse(&response),
            Err(WireError::MissingField("result.payload.status"))
        );
        let mut response = pong("allow", json!({}));
        response["result"]
            .as_object_mut()
            .unwrap()
            .remove("payload");
        assert_eq!(
            parse(&response),
            Err(WireError::MissingField("result.payload"))
        );
    }

    #[test]
    fn pong_is_bound_to_the_ping() {
        let response = pong("allow", json!({"status": "ok"}));
        assert!(matches!(
            parse_ping(&response, &json!(10), REQUEST_ID),
            Err(WireError::IdMismatch { .. })
        ));
        assert!(matches!(
            parse_ping(&response, &json!(9), "44444444-4444-4444-8444-444444444444"),
            Err(WireError::RequestIdMismatch { .. })
        ));
        let mut progress = response;
        progress["result"]["type"] = json!("progress");
        assert!(matches!(parse(&progress), Err(WireError::NotFinal(_))));
    }

    #[test]
    fn error_reply_is_refused() {
        let response =
            json!({"jsonrpc": "2.0", "id": 9, "error": {"code": -32603, "message": "down"}});
        assert_eq!(
            parse(&response),
            Err(WireError::Refused {
                code: -32603,
                message: "down".into(),
                data: None
            })
        );
    }
}
