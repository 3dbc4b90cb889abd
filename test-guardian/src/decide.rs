//! Turning a script [`Action`] into a reply [`Plan`] (DIGEST §2, §4).
//!
//! Decision results are built in this member order: `type`, `acs_version`,
//! `request_id`, `decision`, `reasoning`, `reason_codes`,
//! `modifications`/`ask_details`/`defer_details`, `payload` (ping only),
//! `chain_hash`, then the action's `extra` members; the signature is added
//! last by [`Plan::finish`].

use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::reply::{error_envelope, result_envelope, Body, Plan, Signing};
use crate::script::{Action, Verdict, Wrapped};
use crate::ACS_VERSION;

/// What a decision is about.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// JSON-RPC `id` to answer.
    pub id: &'a Value,
    /// `params.request_id` to echo.
    pub request_id: &'a str,
    /// The session's chain head after this request's entry (content-bearing
    /// requests only).
    pub chain_hash: Option<&'a str>,
    /// `result.payload` (the `system/ping` answer).
    pub payload: Option<&'a Value>,
}

/// The default `reasoning` where ACS requires one.
const DENY_REASONING: &str = "denied by the acs-test-guardian script";
const MODIFY_REASONING: &str = "modified by the acs-test-guardian script";
const ASK_REASONING: &str = "approval required by the acs-test-guardian script";
const DEFER_REASONING: &str = "deferred by the acs-test-guardian script";
const CHAIN_MISMATCH_REASONING: &str =
    "the client's session_state.chain_hash does not match the Guardian's chain head";

/// The default body of a `malformed` reply: truncated JSON.
pub const MALFORMED_BODY: &str = "{\"jsonrpc\":\"2.0\",\"result\":{\"type\":\"final\",";

/// The reply plan for `action`.
pub fn plan(action: &Action, ctx: &Context<'_>) -> Plan {
    match action {
        Action::Allow(v) => decision(ctx, "allow", v.reasoning.as_deref(), v, None),
        Action::Deny(v) => decision(ctx, "deny", Some(or(&v.reasoning, DENY_REASONING)), v, None),
        Action::Modify(m) => {
            let verdict = verdict(&m.reasoning, &m.reason_codes, &m.extra);
            let reasoning = or(&m.reasoning, MODIFY_REASONING);
            let details = ("modifications", m.modifications.clone());
            decision(ctx, "modify", Some(reasoning), &verdict, Some(details))
        }
        Action::Ask(a) => {
            let verdict = verdict(&a.reasoning, &a.reason_codes, &a.extra);
            let details = a.ask_details.clone().unwrap_or_else(default_ask_details);
            let reasoning = or(&a.reasoning, ASK_REASONING);
            decision(
                ctx,
                "ask",
                Some(reasoning),
                &verdict,
                Some(("ask_details", details)),
            )
        }
        Action::Defer(d) => {
            let verdict = verdict(&d.reasoning, &d.reason_codes, &d.extra);
            let details = d
                .defer_details
                .clone()
                .unwrap_or_else(default_defer_details);
            let reasoning = or(&d.reasoning, DEFER_REASONING);
            decision(
                ctx,
                "defer",
                Some(reasoning),
                &verdict,
                Some(("defer_details", details)),
            )
        }
        Action::ChainMismatch(v) => {
            let mut codes = v.reason_codes.clone().unwrap_or_default();
            if !codes.iter().any(|code| code == "chain_mismatch") {
                codes.insert(0, "chain_mismatch".to_owned());
            }
            let verdict = Verdict {
                reason_codes: Some(codes),
                ..v.clone()
            };
            let reasoning = or(&v.reasoning, CHAIN_MISMATCH_REASONING);
            decision(ctx, "deny", Some(reasoning), &verdict, None)
        }
        Action::Late(late) => plan(&late.then, ctx).delayed(Duration::from_millis(late.delay_ms)),
        Action::Unsigned(w) => resign(w, ctx, Signing::Omit),
        Action::BadSignature(w) => resign(w, ctx, Signing::Corrupt),
        Action::WrongRequestId(w) => rewrite(w, ctx, |result| {
            result.insert("request_id".into(), json!(uuid::Uuid::new_v4().to_string()));
        }),
        Action::WrongType(w) => rewrite(w, ctx, |result| {
            result.insert("type".into(), json!("progress"));
        }),
        Action::Uppercase(w) => rewrite(w, ctx, |result| {
            if let Some(Value::String(decision)) = result.get_mut("decision") {
                *decision = decision.to_uppercase();
            }
        }),
        Action::Error(error) => {
            let message = error
                .message
                .as_deref()
                .unwrap_or("error from the acs-test-guardian script");
            Plan::signed(error_envelope(
                ctx.id,
                error.code,
                message,
                error.data.clone(),
            ))
        }
        Action::Drop(_) => Plan::bare(Body::Drop),
        Action::Malformed(m) => {
            let body = m.body.as_deref().unwrap_or(MALFORMED_BODY);
            Plan::bare(Body::Raw(body.as_bytes().to_vec()))
        }
        Action::Silent(_) => Plan::bare(Body::Silent),
    }
}

/// The `result` of a decision, wrapped in its envelope, to be signed.
fn decision(
    ctx: &Context<'_>,
    decision: &str,
    reasoning: Option<&str>,
    verdict: &Verdict,
    details: Option<(&str, Value)>,
) -> Plan {
    let mut result = Map::new();
    result.insert("type".into(), json!("final"));
    result.insert("acs_version".into(), json!(ACS_VERSION));
    result.insert("request_id".into(), json!(ctx.request_id));
    result.insert("decision".into(), json!(decision));
    if let Some(reasoning) = reasoning {
        result.insert("reasoning".into(), json!(reasoning));
    }
    if let Some(codes) = &verdict.reason_codes {
        result.insert("reason_codes".into(), json!(codes));
    }
    if let Some((name, value)) = details {
        result.insert(name.into(), value);
    }
    if let Some(payload) = ctx.payload {
        result.insert("payload".into(), payload.clone());
    }
    if let Some(head) = ctx.chain_hash {
        result.insert("chain_hash".into(), json!(head));
    }
    if let Some(extra) = &verdict.extra {
        for (name, value) in extra {
            result.insert(name.clone(), value.clone());
        }
    }
    Plan::signed(result_envelope(ctx.id, result))
}

/// The inner plan with its signing replaced.
fn resign(wrapped: &Wrapped, ctx: &Context<'_>, signing: Signing) -> Plan {
    let mut inner = plan(&wrapped.inner(), ctx);
    if let Body::Envelope { signing: s, .. } = &mut inner.body {
        *s = signing;
    }
    inner
}

/// The inner plan with `edit` applied to its `result` (signed afterwards, so
/// the only defect is the edited content).
fn rewrite(wrapped: &Wrapped, ctx: &Context<'_>, edit: impl Fn(&mut Map<String, Value>)) -> Plan {
    let mut inner = plan(&wrapped.inner(), ctx);
    if let Body::Envelope { value, .. } = &mut inner.body {
        if let Some(result) = value.get_mut("result").and_then(Value::as_object_mut) {
            edit(result);
        }
    }
    inner
}

fn verdict(
    reasoning: &Option<String>,
    reason_codes: &Option<Vec<String>>,
    extra: &Option<Map<String, Value>>,
) -> Verdict {
    Verdict {
        reasoning: reasoning.clone(),
        reason_codes: reason_codes.clone(),
        extra: extra.clone(),
    }
}

fn or<'a>(given: &'a Option<String>, fallback: &'a str) -> &'a str {
    given.as_deref().unwrap_or(fallback)
}

/// `ask_details` when the script gives none.
pub fn default_ask_details() -> Value {
    json!({
        "approver": {"type": "human", "id": "test-approver"},
        "question": "Allow this step?",
        "timeout_seconds": 30,
        "timeout_disposition": "deny"
    })
}

/// `defer_details` when the script gives none.
pub fn default_defer_details() -> Value {
    json!({
        "reason": "pending_dependency",
        "resolution_method": "timeout",
        "resolution_timeout_ms": 1000,
        "timeout_decision": "deny"
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::Script;

    fn result_of(action_json: &str) -> (Plan, Value) {
        let script = Script::parse(&format!("{{\"default\": {action_json}}}")).expect("valid");
        let id = json!("1");
        let ctx = Context {
            id: &id,
            request_id: "r-1",
            chain_hash: Some("ab"),
            payload: None,
        };
        let plan = plan(&script.default, &ctx);
        let value = match &plan.body {
            Body::Envelope { value, .. } => value.clone(),
            _ => Value::Null,
        };
        (plan, value)
    }

    #[test]
    fn deny_carries_reasoning_codes_and_chain_head() {
        let (_, reply) = result_of(r#"{"action": "deny", "reason_codes": ["x"]}"#);
        let result = &reply["result"];
        assert_eq!(result["type"], "final");
        assert_eq!(result["acs_version"], "0.1.0");
        assert_eq!(result["request_id"], "r-1");
        assert_eq!(result["decision"], "deny");
        assert_eq!(result["reasoning"], DENY_REASONING);
        assert_eq!(result["reason_codes"], json!(["x"]));
        assert_eq!(result["chain_hash"], "ab");
    }

    #[test]
    fn details_defaults_and_literals() {
        let (_, ask) = result_of(r#"{"action": "ask"}"#);
        assert_eq!(ask["result"]["ask_details"], default_ask_details());
        let (_, modify) = result_of(
            r#"{"action": "modify", "modifications": {"parameter_overrides": {"a": 1}}}"#,
        );
        assert_eq!(
            modify["result"]["modifications"]["parameter_overrides"]["a"],
            1
        );
        let (_, mismatch) = result_of(r#"{"action": "chain_mismatch"}"#);
        assert_eq!(
            mismatch["result"]["reason_codes"],
            json!(["chain_mismatch"])
        );
    }

    #[test]
    fn corruptions_compose_with_delay() {
        let (plan, reply) = result_of(
            r#"{"action": "late", "delay_ms": 40, "then": {"action": "uppercase", "then": {"action": "deny"}}}"#,
        );
        assert_eq!(plan.delay, Duration::from_millis(40));
        assert_eq!(reply["result"]["decision"], "DENY");

        let (plan, reply) = result_of(r#"{"action": "unsigned"}"#);
        assert!(matches!(
            plan.body,
            Body::Envelope {
                signing: Signing::Omit,
                ..
            }
        ));
        assert_eq!(reply["result"]["decision"], "allow");

        let (_, reply) = result_of(r#"{"action": "wrong_request_id"}"#);
        assert_ne!(reply["result"]["request_id"], "r-1");
        let (_, reply) = result_of(r#"{"action": "wrong_type"}"#);
        assert_eq!(reply["result"]["type"], "progress");
    }

    #[test]
    fn error_drop_and_malformed() {
        let (_, reply) = result_of(r#"{"action": "error", "code": -32007, "message": "m"}"#);
        assert_eq!(reply["error"], json!({"code": -32007, "message": "m"}));
        assert!(matches!(
            result_of(r#"{"action": "drop"}"#).0.body,
            Body::Drop
        ));
        assert!(matches!(
            result_of(r#"{"action": "malformed"}"#).0.body,
            Body::Raw(_)
        ));
    }
}
