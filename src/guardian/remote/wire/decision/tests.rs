//! Decision replies: every validation rule, one test (or table) each.

use serde_json::json;

use super::*;
use crate::guardian::decision::{AskDetails, DeferDetails, Modifications, Redaction};

mod details;

const GO_VECTORS: &str = include_str!("../../../../../tests/vectors/agt-go-envelope-vectors.json");

const REQUEST_ID: &str = "11111111-1111-4111-8111-111111111111";
const CHAIN_HASH: &str = "14e6d50a913e8295606bc0d86ee9cde870040e0e0a319b13ae15836128d0d111";

fn id() -> Value {
    json!(7)
}

/// A reply to request 7 with the given result members on top of a valid
/// allow header.
fn reply(members: Value) -> Value {
    let mut result = json!({
        "type": "final",
        "acs_version": "0.1.0",
        "request_id": REQUEST_ID,
        "decision": "allow"
    });
    for (name, value) in members.as_object().unwrap() {
        result[name] = value.clone();
    }
    json!({"jsonrpc": "2.0", "id": 7, "result": result})
}

fn without(mut response: Value, member: &str) -> Value {
    response["result"].as_object_mut().unwrap().remove(member);
    response
}

fn parse(response: &Value) -> Result<Reply, WireError> {
    parse_decision(response, &id(), REQUEST_ID)
}

fn decision(response: &Value) -> Decision {
    match parse(response).unwrap() {
        Reply::Decision(decision) => *decision,
        Reply::Error(error) => panic!("error reply {error:?}"),
    }
}

fn err(response: &Value) -> WireError {
    parse(response).unwrap_err()
}

fn modifications() -> Value {
    json!({"redactions": [{"path": "/arguments/cmd/value"}], "parameter_overrides": {"limit": 10}})
}

fn ask_details() -> Value {
    json!({
        "approver": {"type": "human", "id": "ops"},
        "question": "Run rm?",
        "timeout_seconds": 60,
        "timeout_disposition": "deny"
    })
}

fn defer_details() -> Value {
    json!({
        "reason": "insufficient_context",
        "resolution_method": "additional_context",
        "resolution_timeout_ms": 30000,
        "timeout_decision": "deny"
    })
}

#[test]
fn minimal_allow() {
    assert_eq!(decision(&reply(json!({}))), Decision::allow());
}

#[test]
fn go_vector_deny_parses() {
    let vectors: Value = serde_json::from_str(GO_VECTORS).unwrap();
    let response = &vectors["response"]["signed"];
    let request_id = vectors["request"]["signed"]["params"]["request_id"]
        .as_str()
        .unwrap();
    let expected_id = &vectors["request"]["signed"]["id"];
    let Reply::Decision(parsed) = parse_decision(response, expected_id, request_id).unwrap() else {
        panic!("not a decision");
    };
    let mut expected = Decision::deny("blocked", Some("destructive_shell_command_blocked"));
    expected.chain_hash = Some(CHAIN_HASH.into());
    assert_eq!(*parsed, expected);
}

#[test]
fn every_member_is_read() {
    let parsed = decision(&reply(json!({
        "decision": "modify",
        "reasoning": "redacting the command",
        "reason_codes": ["pii_detected", "rate_limited"],
        "policy_references": [{"policy_id": "p", "policy_version": "3", "rule_id": "r"}, {}],
        "modifications": modifications(),
        "chain_hash": CHAIN_HASH
    })));
    assert_eq!(parsed.decision, Disposition::Modify);
    assert_eq!(parsed.reasoning.as_deref(), Some("redacting the command"));
    assert_eq!(parsed.reason_codes, ["pii_detected", "rate_limited"]);
    assert_eq!(parsed.policy_references.len(), 2);
    assert_eq!(parsed.policy_references[0].policy_id.as_deref(), Some("p"));
    assert_eq!(parsed.policy_references[0].rule_id.as_deref(), Some("r"));
    assert_eq!(
        parsed.modifications.as_deref(),
        Some(&Modifications {
            modified_content: None,
            redactions: vec![Redaction {
                path: "/arguments/cmd/value".into(),
                replacement: "[REDACTED]".into(),
            }],
            parameter_overrides: json!({"limit": 10}).as_object().unwrap().clone(),
        })
    );
    assert_eq!(parsed.chain_hash.as_deref(), Some(CHAIN_HASH));
}

#[test]
fn unknown_members_are_ignored() {
    let parsed = decision(&reply(json!({
        "policy_data": {"ibac": {"x": 1}},
        "cited_provenance_ids": ["p1"],
        "metadata": {"evaluator": "deterministic", "confidence": 0.9},
        "payload": {},
        "x_future": [null],
        "signature": {"algorithm": "HMAC-SHA256", "value": "AAAA", "key_id": "k1"}
    })));
    assert_eq!(parsed, Decision::allow());
}

#[test]
fn null_optional_members_are_absent() {
    let parsed = decision(&reply(json!({
        "reasoning": null, "reason_codes": null, "chain_hash": null, "modifications": null
    })));
    assert_eq!(parsed, Decision::allow());
}

#[test]
fn jsonrpc_id_must_match() {
    let response = reply(json!({}));
    let error = parse_decision(&response, &json!(8), REQUEST_ID).unwrap_err();
    assert_eq!(
        error,
        WireError::IdMismatch {
            expected: "8".into(),
            got: "7".into()
        }
    );
    // Same digits, different JSON type.
    assert!(matches!(
        parse_decision(&response, &json!("7"), REQUEST_ID),
        Err(WireError::IdMismatch { .. })
    ));
    let mut no_id = response;
    no_id.as_object_mut().unwrap().remove("id");
    assert_eq!(err(&no_id), WireError::MissingField("id"));
}

#[test]
fn type_must_be_final() {
    assert_eq!(
        err(&reply(json!({"type": "progress"}))),
        WireError::NotFinal("progress".into())
    );
    assert_eq!(
        err(&without(reply(json!({})), "type")),
        WireError::MissingField("result.type")
    );
}

#[test]
fn acs_version_must_share_our_major() {
    assert!(matches!(
        err(&reply(json!({"acs_version": "1.0.0"}))),
        WireError::IncompatibleVersion { .. }
    ));
    assert!(matches!(
        err(&reply(json!({"acs_version": "0.1"}))),
        WireError::BadVersion { .. }
    ));
    assert_eq!(
        err(&without(reply(json!({})), "acs_version")),
        WireError::MissingField("result.acs_version")
    );
    // A later minor of the same major is forward compatible.
    assert!(parse(&reply(json!({"acs_version": "0.3.1"}))).is_ok());
}

#[test]
fn request_id_must_echo_ours() {
    let other = "22222222-2222-4222-8222-222222222222";
    assert_eq!(
        err(&reply(json!({"request_id": other}))),
        WireError::RequestIdMismatch {
            expected: REQUEST_ID.into(),
            got: other.into()
        }
    );
    assert_eq!(
        err(&without(reply(json!({})), "request_id")),
        WireError::MissingField("result.request_id")
    );
    assert!(matches!(
        err(&reply(json!({"request_id": 1}))),
        WireError::InvalidField { .. }
    ));
}

#[test]
fn decision_must_be_lowercase_and_known() {
    for bad in ["ALLOW", "Deny", "block", "redact", ""] {
        assert_eq!(
            err(&reply(json!({"decision": bad, "reasoning": "r"}))),
            WireError::UnknownDecision(bad.into()),
            "{bad}"
        );
    }
    assert!(err(&reply(json!({"decision": "ALLOW"})))
        .to_string()
        .contains("lowercase"));
    assert!(matches!(
        err(&reply(json!({"decision": true}))),
        WireError::InvalidField { .. }
    ));
    assert_eq!(
        err(&without(reply(json!({})), "decision")),
        WireError::MissingField("result.decision")
    );
}

#[test]
fn reasoning_is_required_unless_allow() {
    let cases = [
        (Disposition::Deny, json!({"decision": "deny"})),
        (
            Disposition::Modify,
            json!({"decision": "modify", "modifications": modifications()}),
        ),
        (
            Disposition::Ask,
            json!({"decision": "ask", "ask_details": ask_details()}),
        ),
        (
            Disposition::Defer,
            json!({"decision": "defer", "defer_details": defer_details()}),
        ),
    ];
    for (disposition, members) in cases {
        assert_eq!(
            err(&reply(members.clone())),
            WireError::MissingReasoning(disposition)
        );
        let mut with_reasoning = members;
        with_reasoning["reasoning"] = json!("because");
        assert!(parse(&reply(with_reasoning)).is_ok());
    }
    assert!(matches!(
        err(&reply(json!({"decision": "deny", "reasoning": 5}))),
        WireError::InvalidField { .. }
    ));
}

#[test]
fn chain_hash_must_be_64_lowercase_hex() {
    let upper = CHAIN_HASH.to_uppercase();
    let short = &CHAIN_HASH[..63];
    let long = format!("{CHAIN_HASH}0");
    let not_hex = format!("{}g", &CHAIN_HASH[..63]);
    for bad in [
        json!(upper),
        json!(short),
        json!(long),
        json!(not_hex),
        json!(12),
    ] {
        assert!(
            matches!(
                err(&reply(json!({"chain_hash": bad}))),
                WireError::InvalidChainHash(_)
            ),
            "{bad}"
        );
    }
}

#[test]
fn list_members_are_type_checked() {
    for members in [
        json!({"reason_codes": "pii_detected"}),
        json!({"reason_codes": [1]}),
        json!({"policy_references": {"policy_id": "p"}}),
        json!({"policy_references": [["p"]]}),
        json!({"policy_references": [{"policy_id": 5}]}),
    ] {
        assert!(
            matches!(err(&reply(members.clone())), WireError::InvalidField { .. }),
            "{members}"
        );
    }
}

#[test]
fn error_reply_is_returned_not_raised() {
    let response = json!({
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32004, "message": "bad signature", "data": {"reason": "signature_invalid"}}
    });
    let Reply::Error(error) = parse(&response).unwrap() else {
        panic!("not an error");
    };
    assert_eq!(error.code, -32004);
    assert_eq!(error.message, "bad signature");
    assert_eq!(error.data, Some(json!({"reason": "signature_invalid"})));
    assert!(error.fails_closed());
}

#[test]
fn error_reply_binding() {
    let null_id =
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "parse error"}});
    assert!(matches!(parse(&null_id), Ok(Reply::Error(_))));
    let foreign = json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32603, "message": "m"}});
    assert!(matches!(parse(&foreign), Err(WireError::IdMismatch { .. })));
    let malformed = json!({"jsonrpc": "2.0", "id": 7, "error": {"code": "x", "message": "m"}});
    assert!(matches!(
        parse(&malformed),
        Err(WireError::MalformedError(_))
    ));
}

#[test]
fn frame_violations() {
    assert_eq!(err(&json!(null)), WireError::NotAnObject);
    let mut old = reply(json!({}));
    old["jsonrpc"] = json!("1.0");
    assert!(matches!(err(&old), WireError::NotJsonRpc2(_)));
    assert_eq!(
        err(&json!({"jsonrpc": "2.0", "id": 7})),
        WireError::NoOutcome
    );
    let mut both = reply(json!({}));
    both["error"] = json!({"code": 1, "message": "m"});
    assert_eq!(err(&both), WireError::BothOutcomes);
    let scalar = json!({"jsonrpc": "2.0", "id": 7, "result": "allow"});
    assert!(matches!(err(&scalar), WireError::InvalidField { .. }));
}
