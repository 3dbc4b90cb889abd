//! `handshake/hello`: the ServerHello (DIGEST §2.6, §3).
//!
//! The reply's `result` is the ServerHello itself, signed at
//! `result.signature`. Members, in order: `negotiated_version`,
//! `methods_evaluated`, `selected_transport`, `timeout_config`,
//! `on_decision_failure`, `skew_window_ms`, `signature_algorithms_supported`,
//! then the script's `hello.extra`.

use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::decide::MALFORMED_BODY;
use crate::reply::{error_data, error_envelope, result_envelope, Body, Plan, Signing};
use crate::request::Request;
use crate::script::{Hello, HelloAction};
use crate::{signing, ACS_VERSION};

/// The answer to a handshake and its `--record` label.
pub fn answer(hello: &Hello, request: &Request, transport: &str) -> (Plan, String) {
    let (plan, label) = respond(hello, request, transport);
    (plan.delayed(Duration::from_millis(hello.delay_ms)), label)
}

fn respond(hello: &Hello, request: &Request, transport: &str) -> (Plan, String) {
    let id = &request.id;
    match hello.action {
        HelloAction::Silent => return (Plan::bare(Body::Silent), "hello:silent".into()),
        HelloAction::Drop => return (Plan::bare(Body::Drop), "hello:drop".into()),
        HelloAction::Malformed => {
            let body = Body::Raw(MALFORMED_BODY.as_bytes().to_vec());
            return (Plan::bare(body), "hello:malformed".into());
        }
        HelloAction::Refuse => {
            let message = hello
                .message
                .as_deref()
                .unwrap_or("session refused by the acs-test-guardian script");
            let data = hello
                .data
                .clone()
                .unwrap_or_else(|| error_data("refused_by_script", message));
            let reply = error_envelope(id, hello.code, message, Some(data));
            return (Plan::signed(reply), "hello:refuse".into());
        }
        HelloAction::Ok | HelloAction::Unsigned | HelloAction::BadSignature => {}
    }

    let client = request.payload();
    let Some(versions) = strings(client.get("acs_versions_supported")) else {
        let message = "ClientHello.acs_versions_supported must be a list of strings";
        let reply = error_envelope(
            id,
            -32602,
            message,
            Some(error_data("invalid_params", message)),
        );
        return (Plan::signed(reply), "reject:invalid_params".into());
    };
    let Some(methods) = strings(client.get("methods_implemented")) else {
        let message = "ClientHello.methods_implemented must be a list of strings";
        let reply = error_envelope(
            id,
            -32602,
            message,
            Some(error_data("invalid_params", message)),
        );
        return (Plan::signed(reply), "reject:invalid_params".into());
    };
    if !versions
        .iter()
        .any(|version| same_major(version, ACS_VERSION))
    {
        let message = "no ACS version in common";
        let mut data = error_data("unsupported_version", message);
        data["supported_versions"] = json!([ACS_VERSION]);
        let reply = error_envelope(id, -32001, message, Some(data));
        return (Plan::signed(reply), "reject:unsupported_version".into());
    }

    let mut server = Map::new();
    server.insert("negotiated_version".into(), json!(ACS_VERSION));
    let evaluated = hello.methods_evaluated.clone().unwrap_or(methods);
    server.insert("methods_evaluated".into(), json!(evaluated));
    server.insert("selected_transport".into(), json!(transport));
    if let Some(timeouts) = &hello.timeout_config {
        server.insert("timeout_config".into(), timeouts.clone());
    }
    if let Some(posture) = &hello.on_decision_failure {
        server.insert("on_decision_failure".into(), json!(posture));
    }
    server.insert("skew_window_ms".into(), json!(hello.skew_window_ms));
    server.insert(
        "signature_algorithms_supported".into(),
        json!([signing::ALGORITHM]),
    );
    if let Some(extra) = &hello.extra {
        for (name, value) in extra {
            server.insert(name.clone(), value.clone());
        }
    }
    let (signing, label) = match hello.action {
        HelloAction::Unsigned => (Signing::Omit, "hello:unsigned"),
        HelloAction::BadSignature => (Signing::Corrupt, "hello:bad_signature"),
        _ => (Signing::Sign, "hello:ok"),
    };
    let body = Body::Envelope {
        value: result_envelope(id, server),
        signing,
    };
    (Plan::bare(body), label.into())
}

/// A JSON array of strings, as owned strings.
fn strings(value: Option<&Value>) -> Option<Vec<String>> {
    value?
        .as_array()?
        .iter()
        .map(|item| item.as_str().map(str::to_owned))
        .collect()
}

/// Whether two `X.Y.Z` versions share the major number.
fn same_major(a: &str, b: &str) -> bool {
    let major = |v: &str| v.split('.').next().map(str::to_owned);
    a.split('.').count() == 3 && major(a) == major(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::Script;

    fn request(payload: Value) -> Request {
        Request::parse(
            json!({"jsonrpc": "2.0", "id": "h", "method": "handshake/hello", "params": {
            "acs_version": "0.1.0", "request_id": "r", "timestamp": "2026-01-01T00:00:00Z",
            "metadata": {"agent_id": "a", "session_id": "s"}, "payload": payload}}),
        )
        .expect("usable")
    }

    fn client_hello() -> Value {
        json!({"acs_versions_supported": ["0.1.0"], "methods_implemented": ["steps/toolCallRequest", "system/ping"],
               "transports_supported": ["http"], "provenance_producer": "none"})
    }

    fn envelope(plan: Plan) -> Value {
        match plan.body {
            Body::Envelope { value, .. } => value,
            other => panic!("not an envelope: {other:?}"),
        }
    }

    #[test]
    fn server_hello_echoes_client_methods_by_default() {
        let (plan, label) = answer(&Hello::default(), &request(client_hello()), "http");
        assert_eq!(label, "hello:ok");
        let reply = envelope(plan);
        let server = &reply["result"];
        assert_eq!(server["negotiated_version"], "0.1.0");
        assert_eq!(
            server["methods_evaluated"],
            client_hello()["methods_implemented"]
        );
        assert_eq!(server["selected_transport"], "http");
        assert_eq!(server["timeout_config"]["default_ms"], 2000);
        assert_eq!(server["on_decision_failure"], "proceed");
        assert_eq!(server["skew_window_ms"], 300_000);
        assert!(server.get("type").is_none());
    }

    #[test]
    fn script_overrides_and_refusals() {
        let script = Script::parse(
            r#"{"hello": {"methods_evaluated": ["steps/toolCallRequest"], "on_decision_failure": null,
                          "timeout_config": {"default_ms": 50}}}"#,
        )
        .expect("valid");
        let reply = envelope(answer(&script.hello, &request(client_hello()), "stdio").0);
        assert_eq!(
            reply["result"]["methods_evaluated"],
            json!(["steps/toolCallRequest"])
        );
        assert!(reply["result"].get("on_decision_failure").is_none());

        let refuse =
            Script::parse(r#"{"hello": {"action": "refuse", "code": -32002}}"#).expect("valid");
        let reply = envelope(answer(&refuse.hello, &request(client_hello()), "http").0);
        assert_eq!(reply["error"]["code"], -32002);

        let mut old = client_hello();
        old["acs_versions_supported"] = json!(["1.0.0"]);
        let reply = envelope(answer(&Hello::default(), &request(old), "http").0);
        assert_eq!(reply["error"]["code"], -32001);
        assert_eq!(
            reply["error"]["data"]["supported_versions"],
            json!(["0.1.0"])
        );
    }
}
