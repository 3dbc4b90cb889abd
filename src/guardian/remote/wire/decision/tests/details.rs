//! Decision replies: the details of `modify`, `ask` and `defer`, which must
//! come with their decision and only with it.

use serde_json::json;

use super::*;

#[test]
fn details_are_required_on_their_decision() {
    for (name, decision) in [
        ("modifications", Disposition::Modify),
        ("ask_details", Disposition::Ask),
        ("defer_details", Disposition::Defer),
    ] {
        let response = reply(json!({"decision": decision.as_str(), "reasoning": "r"}));
        assert_eq!(
            err(&response),
            WireError::MissingDetails {
                decision,
                field: name
            }
        );
    }
}

#[test]
fn details_are_refused_on_other_decisions() {
    let cases = [
        ("modifications", modifications(), Disposition::Modify),
        ("ask_details", ask_details(), Disposition::Ask),
        ("defer_details", defer_details(), Disposition::Defer),
    ];
    for (name, value, owner) in cases {
        for decision in [
            Disposition::Allow,
            Disposition::Deny,
            Disposition::Modify,
            Disposition::Ask,
            Disposition::Defer,
        ] {
            if decision == owner {
                continue;
            }
            let mut members =
                json!({"decision": decision.as_str(), "reasoning": "r", name: value.clone()});
            // Give the decision its own details so only `name` is wrong.
            match decision {
                Disposition::Modify => members["modifications"] = modifications(),
                Disposition::Ask => members["ask_details"] = ask_details(),
                Disposition::Defer => members["defer_details"] = defer_details(),
                Disposition::Allow | Disposition::Deny => {}
            }
            assert_eq!(
                err(&reply(members)),
                WireError::UnexpectedDetails {
                    decision,
                    field: name,
                    allowed_on: owner
                },
                "{name} on {decision:?}"
            );
        }
    }
}

#[test]
fn modifications_shape_is_checked_but_composition_is_left_to_enforcement() {
    for bad in [
        json!("redact it"),
        json!([]),
        json!({"redactions": "all"}),
        json!({"redactions": [{"replacement": "x"}]}),
        json!({"modified_content": 5}),
        json!({"parameter_overrides": []}),
    ] {
        let response = reply(json!({"decision": "modify", "reasoning": "r", "modifications": bad}));
        assert!(
            matches!(
                err(&response),
                WireError::MalformedDetails {
                    field: "modifications",
                    ..
                }
            ),
            "{response}"
        );
    }
    // Empty, or modified_content next to redactions: shape-valid; enforcement
    // turns them into DENY (§6.3), which a wire error could not.
    for composition in [
        json!({}),
        json!({"modified_content": "x", "redactions": [{"path": "/a"}]}),
    ] {
        let response =
            reply(json!({"decision": "modify", "reasoning": "r", "modifications": composition}));
        assert!(parse(&response).is_ok(), "{response}");
    }
}

#[test]
fn ask_details_are_parsed() {
    let parsed = decision(&reply(
        json!({"decision": "ask", "reasoning": "r", "ask_details": ask_details()}),
    ));
    assert_eq!(
        parsed.ask_details.as_deref(),
        Some(&AskDetails {
            approver: Some(json!({"type": "human", "id": "ops"})),
            question: Some("Run rm?".into()),
            context: None,
            timeout_seconds: Some(60),
            timeout_disposition: Some(Disposition::Deny),
        })
    );
    for bad in [
        json!("ask ops"),
        json!({"timeout_seconds": -1}),
        json!({"timeout_disposition": "DENY"}),
    ] {
        let response = reply(json!({"decision": "ask", "reasoning": "r", "ask_details": bad}));
        assert!(
            matches!(
                err(&response),
                WireError::MalformedDetails {
                    field: "ask_details",
                    ..
                }
            ),
            "{response}"
        );
    }
}

#[test]
fn defer_details_are_parsed() {
    let parsed = decision(&reply(
        json!({"decision": "defer", "reasoning": "r", "defer_details": defer_details()}),
    ));
    assert_eq!(
        parsed.defer_details.as_deref(),
        Some(&DeferDetails {
            reason: Some("insufficient_context".into()),
            resolution_timeout_ms: Some(30000),
            timeout_decision: Some(Disposition::Deny),
        })
    );
    for bad in [json!(30000), json!({"resolution_timeout_ms": "soon"})] {
        let response = reply(json!({"decision": "defer", "reasoning": "r", "defer_details": bad}));
        assert!(
            matches!(
                err(&response),
                WireError::MalformedDetails {
                    field: "defer_details",
                    ..
                }
            ),
            "{response}"
        );
    }
}
