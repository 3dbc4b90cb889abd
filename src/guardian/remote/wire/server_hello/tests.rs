//! ServerHello parsing: the Go reference shape, defaults, every required
//! member, the refused forms, and the negotiated terms.

use serde_json::json;

use super::*;
use crate::guardian::remote::signing::{sign_response, verify_response, SessionKey, SigningSecret};

/// A ServerHello as the Go reference Guardian marshals it (DIGEST §3.2,
/// agt-go `acs/handshake.go` field order), signed at `result.signature`.
fn go_reply() -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": "hello-1",
        "result": {
            "negotiated_version": "0.1.0",
            "methods_evaluated": ["steps/toolCallRequest", "steps/toolCallResult", "protocols/MCP/tools/call"],
            "selected_transport": "http",
            "signature_algorithms_supported": ["HMAC-SHA256"],
            "timeout_config": {"default_ms": 5000, "per_method_ms": {"steps/toolCallRequest": 2000}},
            "skew_window_ms": 300000,
            "on_decision_failure": "deny",
            "policy_requires_provenance": false,
            "profiles_accepted": ["acs-core", "acs-audit"]
        }
    })
}

/// The smallest ServerHello the Python contract test accepts.
fn minimal_reply() -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": 1,
        "result": {
            "negotiated_version": "0.1.0",
            "methods_evaluated": [],
            "selected_transport": "stdio",
            "timeout_config": {"default_ms": 1}
        }
    })
}

fn with(mut reply: Value, member: &str, value: Value) -> Value {
    reply["result"][member] = value;
    reply
}

fn without(mut reply: Value, member: &str) -> Value {
    reply["result"].as_object_mut().unwrap().remove(member);
    reply
}

fn err(reply: &Value) -> WireError {
    parse_server_hello(reply).unwrap_err()
}

#[test]
fn go_reference_shape_parses() {
    let hello = parse_server_hello(&go_reply()).unwrap();
    assert_eq!(
        hello,
        ServerHello {
            negotiated_version: "0.1.0".into(),
            methods_evaluated: vec![
                "steps/toolCallRequest".into(),
                "steps/toolCallResult".into(),
                "protocols/MCP/tools/call".into(),
            ],
            selected_transport: Transport::Http,
            timeout_config: TimeoutConfig {
                default_ms: 5000,
                per_method_ms: BTreeMap::from([("steps/toolCallRequest".into(), 2000)]),
            },
            on_decision_failure: FailurePosture::Deny,
            skew_window_ms: 300_000,
            signature_algorithms_supported: vec!["HMAC-SHA256".into()],
            profiles_accepted: vec!["acs-core".into(), "acs-audit".into()],
            policy_requires_provenance: false,
        }
    );
}

#[test]
fn go_nil_lists_marshalled_as_null_are_absent() {
    let reply = with(
        with(go_reply(), "profiles_accepted", Value::Null),
        "signature_algorithms_supported",
        Value::Null,
    );
    let hello = parse_server_hello(&reply).unwrap();
    assert!(hello.profiles_accepted.is_empty());
    assert!(hello.signature_algorithms_supported.is_empty());
}

#[test]
fn signed_server_hello_verifies_and_parses() {
    let secret = SigningSecret::from_bytes([9u8; 32]).unwrap();
    let key = SessionKey::derive(&secret, "00000000-0000-4000-8000-000000000001");
    let mut reply = go_reply();
    sign_response(&mut reply, &key, "k1").unwrap();
    assert!(reply["result"]["signature"].is_object());
    verify_response(&reply, &key).unwrap();
    assert_eq!(
        parse_server_hello(&reply).unwrap(),
        parse_server_hello(&go_reply()).unwrap()
    );
}

#[test]
fn minimal_hello_gets_the_defaults() {
    let hello = parse_server_hello(&minimal_reply()).unwrap();
    assert_eq!(hello.on_decision_failure, FailurePosture::Proceed);
    assert_eq!(hello.skew_window_ms, DEFAULT_SKEW_WINDOW_MS);
    assert!(hello.timeout_config.per_method_ms.is_empty());
    assert!(hello.profiles_accepted.is_empty());
    assert!(!hello.policy_requires_provenance);
    assert_eq!(hello.selected_transport, Transport::Stdio);
}

#[test]
fn unknown_members_are_ignored() {
    let reply = with(go_reply(), "trace_emission", json!({"otel_enabled": true}));
    let reply = with(reply, "x_future_member", json!([1, 2, 3]));
    assert!(parse_server_hello(&reply).is_ok());
}

#[test]
fn superseded_on_timeout_spelling_is_read() {
    let reply = with(minimal_reply(), "on_timeout", json!("deny"));
    assert_eq!(
        parse_server_hello(&reply).unwrap().on_decision_failure,
        FailurePosture::Deny
    );
}

#[test]
fn both_posture_spellings_take_the_stricter() {
    for (current, superseded) in [("proceed", "deny"), ("deny", "proceed")] {
        let reply = with(minimal_reply(), "on_decision_failure", json!(current));
        let reply = with(reply, "on_timeout", json!(superseded));
        assert_eq!(
            parse_server_hello(&reply).unwrap().on_decision_failure,
            FailurePosture::Deny
        );
    }
}

#[test]
fn unknown_posture_is_refused() {
    for member in ["on_decision_failure", "on_timeout"] {
        let reply = with(minimal_reply(), member, json!("fail_open"));
        assert_eq!(err(&reply), WireError::UnknownPosture("fail_open".into()));
        let reply = with(minimal_reply(), member, json!(true));
        assert!(matches!(err(&reply), WireError::InvalidField { .. }));
    }
}

#[test]
fn wrapped_server_hello_is_refused() {
    // The form older Python adapters read: a decision carrying the
    // ServerHello in `payload`.
    let hello = go_reply()["result"].clone();
    let wrapped = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "result": {
            "type": "final",
            "acs_version": "0.1.0",
            "request_id": "11111111-1111-4111-8111-111111111111",
            "decision": "allow",
            "payload": hello
        }
    });
    assert_eq!(err(&wrapped), WireError::WrappedServerHello);
    assert!(err(&wrapped).to_string().contains("ServerHello itself"));
    // Either marker alone is enough, even next to a real ServerHello.
    assert_eq!(
        err(&with(go_reply(), "type", json!("final"))),
        WireError::WrappedServerHello
    );
    assert_eq!(
        err(&with(go_reply(), "decision", json!("allow"))),
        WireError::WrappedServerHello
    );
}

#[test]
fn error_reply_is_a_refusal() {
    let reply = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "error": {
            "code": -32001,
            "message": "no common version",
            "data": {"reason": "unsupported_version", "supported_versions": ["1.0.0"]}
        }
    });
    assert_eq!(
        err(&reply),
        WireError::Refused {
            code: -32001,
            message: "no common version".into(),
            data: Some(json!({"reason": "unsupported_version", "supported_versions": ["1.0.0"]})),
        }
    );
}

#[test]
fn required_members() {
    for (member, field) in [
        ("negotiated_version", "result.negotiated_version"),
        ("methods_evaluated", "result.methods_evaluated"),
        ("selected_transport", "result.selected_transport"),
        ("timeout_config", "result.timeout_config"),
    ] {
        assert_eq!(
            err(&without(minimal_reply(), member)),
            WireError::MissingField(field)
        );
    }
    let reply = with(
        minimal_reply(),
        "timeout_config",
        json!({"per_method_ms": {}}),
    );
    assert_eq!(
        err(&reply),
        WireError::MissingField("result.timeout_config.default_ms")
    );
}

#[test]
fn negotiated_version_must_share_our_major() {
    let reply = with(minimal_reply(), "negotiated_version", json!("1.0.0"));
    assert!(matches!(err(&reply), WireError::IncompatibleVersion { .. }));
    let reply = with(minimal_reply(), "negotiated_version", json!("0.1"));
    assert!(matches!(err(&reply), WireError::BadVersion { .. }));
    let reply = with(minimal_reply(), "negotiated_version", json!("0.2.0"));
    assert_eq!(
        parse_server_hello(&reply).unwrap().negotiated_version,
        "0.2.0"
    );
}

#[test]
fn methods_evaluated_must_be_strings() {
    for bad in [json!("steps/toolCallRequest"), json!([1]), json!({})] {
        let reply = with(minimal_reply(), "methods_evaluated", bad);
        assert!(matches!(err(&reply), WireError::InvalidField { .. }));
    }
}

#[test]
fn selected_transport_must_be_known() {
    let reply = with(minimal_reply(), "selected_transport", json!("grpc"));
    assert_eq!(err(&reply), WireError::UnknownTransport("grpc".into()));
}

#[test]
fn timeouts_must_be_positive_integers() {
    for bad in [json!(0), json!(-5), json!("5000"), json!(1.5)] {
        let reply = with(
            minimal_reply(),
            "timeout_config",
            json!({"default_ms": bad}),
        );
        assert!(
            matches!(err(&reply), WireError::InvalidField { .. }),
            "{reply}"
        );
        let reply = with(
            minimal_reply(),
            "timeout_config",
            json!({"default_ms": 1, "per_method_ms": {"steps/toolCallRequest": bad}}),
        );
        let WireError::InvalidField { field, .. } = err(&reply) else {
            panic!("{reply}");
        };
        assert!(field.contains("steps/toolCallRequest"), "{field}");
    }
    let reply = with(minimal_reply(), "timeout_config", json!(5000));
    assert!(matches!(err(&reply), WireError::InvalidField { .. }));
}

#[test]
fn optional_members_are_type_checked() {
    let cases = [
        ("skew_window_ms", json!(-1)),
        ("skew_window_ms", json!("300000")),
        ("profiles_accepted", json!("acs-core")),
        ("signature_algorithms_supported", json!([true])),
        ("policy_requires_provenance", json!("yes")),
    ];
    for (member, bad) in cases {
        let reply = with(minimal_reply(), member, bad);
        assert!(
            matches!(err(&reply), WireError::InvalidField { .. }),
            "{reply}"
        );
    }
    let reply = with(minimal_reply(), "skew_window_ms", json!(0));
    assert_eq!(parse_server_hello(&reply).unwrap().skew_window_ms, 0);
}

#[test]
fn negotiated_terms_come_from_the_hello() {
    let negotiated = parse_server_hello(&go_reply()).unwrap().negotiated(None);
    assert!(negotiated.evaluates("protocols/MCP/tools/call"));
    assert!(!negotiated.evaluates("steps/sessionStart"));
    assert_eq!(
        negotiated.timeout_for("steps/toolCallRequest"),
        Some(Duration::from_millis(2000))
    );
    assert_eq!(
        negotiated.timeout_for("steps/toolCallResult"),
        Some(Duration::from_millis(5000))
    );
    assert_eq!(negotiated.on_decision_failure, FailurePosture::Deny);
}

#[test]
fn empty_methods_evaluated_evaluates_nothing() {
    let negotiated = parse_server_hello(&minimal_reply())
        .unwrap()
        .negotiated(None);
    assert!(!negotiated.evaluates("steps/toolCallRequest"));
}

#[test]
fn local_posture_only_tightens() {
    use FailurePosture::{Deny, Proceed};
    for (guardian, local, expected) in [
        (Proceed, None, Proceed),
        (Deny, None, Deny),
        (Proceed, Some(Deny), Deny),
        (Deny, Some(Proceed), Deny),
        (Proceed, Some(Proceed), Proceed),
        (Deny, Some(Deny), Deny),
    ] {
        let mut hello = parse_server_hello(&minimal_reply()).unwrap();
        hello.on_decision_failure = guardian;
        assert_eq!(
            hello.negotiated(local).on_decision_failure,
            expected,
            "guardian {guardian:?}, local {local:?}"
        );
    }
}
