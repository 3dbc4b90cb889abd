//! The policy rule parser and engine. Input: TOML text, NUL, a payload,
//! NUL, a hook method, NUL, a tool name. A policy either compiles or is
//! refused with a `file:line` inside the text; a compiled one decides any
//! hook, and a `modify` it decides is one the enforcer accepts: valid for
//! the hook's target, and its redactions land on the payload it was made
//! for. A tool step read in place from its message decides as its tree
//! does.
#![no_main]

use std::sync::Arc;

use acs_proxy::enforce::modify::{self, Target};
use acs_proxy::guardian::decision::{Decision, Modifications};
use acs_proxy::guardian::Disposition;
use acs_proxy::hooks::tool_call::ToolCallRequest;
use acs_proxy::hooks::HookPayload;
use acs_proxy::jsonrpc::MessageTree;
use acs_proxy::policy::{HookView, Policy, PolicyError};
use acs_proxy_fuzz::fields;
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

fuzz_target!(|data: &[u8]| {
    let [text, payload, method, tool] = fields::<4>(data);
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    let policy = match Policy::from_toml_str("fuzz.toml", text) {
        Ok(policy) => policy,
        Err(err) => {
            let line = match err {
                PolicyError::Toml { line, .. }
                | PolicyError::Rule { line, .. }
                | PolicyError::Limit { line, .. } => line,
                PolicyError::Rego(err) => panic!("a TOML rule policy failed as Rego: {err}"),
            };
            assert!(
                line >= 1 && line <= text.lines().count() + 1,
                "line {line} of {text:?}"
            );
            return;
        }
    };
    let payload = serde_json::from_slice(payload).unwrap_or(Value::Null);
    let method = String::from_utf8_lossy(method);
    let tool = String::from_utf8_lossy(tool);
    decide(&policy, &method, Some(&tool), &HookPayload::from(payload));
    let message = Arc::new(MessageTree::from_value(json!({"jsonrpc": "2.0", "id": 1,
        "method": "tools/call",
        "params": {"name": "send", "arguments": {"to": "a@b.c", "body": "ssn 123-45-6789"}}})));
    decide(
        &policy,
        "protocols/MCP/tools/call",
        Some("send"),
        &HookPayload::from(Arc::clone(&message)),
    );
    let step = json!({"tool": {"name": "send", "provider": "fuzz"},
        "arguments": {"to": {"value": "a@b.c"}, "body": {"value": "ssn 123-45-6789"}}});
    let read = ToolCallRequest::read(&message, &Arc::from("fuzz")).expect("the call names a tool");
    let in_place = HookPayload::from(read);
    assert_eq!(in_place.tree(), &step);
    let as_tree = decide(
        &policy,
        "steps/toolCallRequest",
        Some("send"),
        &HookPayload::from(step),
    );
    let as_read = decide(&policy, "steps/toolCallRequest", Some("send"), &in_place);
    assert_eq!(as_tree, as_read, "a step read in place decides as its tree");
});

fn decide(
    policy: &Policy,
    method: &str,
    tool: Option<&str>,
    hook_payload: &HookPayload,
) -> Decision {
    let decision = policy.evaluate(&HookView::new(method, tool, hook_payload));
    check(&decision, method, hook_payload.tree());
    decision
}

/// A modify decision is one the enforcer accepts for `method`'s target,
/// and its redactions apply to `payload`.
fn check(decision: &Decision, method: &str, payload: &Value) {
    if decision.decision != Disposition::Modify {
        return;
    }
    let m = decision
        .modifications
        .as_ref()
        .expect("a modify decision carries modifications");
    if !payload.is_object() {
        return;
    }
    let target = match method {
        "steps/toolCallRequest" => Some(Target::ToolCallRequest),
        _ if method.starts_with("protocols/")
            && payload.get("method").is_some()
            && payload.get("id").is_some() =>
        {
            Some(Target::WrappedMcpRequest)
        }
        _ => None,
    };
    if let Some(target) = target {
        if let Err(err) = modify::validate(m, target) {
            panic!("policy made a modify the enforcer refuses for {target}: {err}\n{m:?}");
        }
    }
    if m.redactions.is_empty() {
        return;
    }
    let redactions_only = Modifications {
        redactions: m.redactions.clone(),
        ..Modifications::default()
    };
    let mut value = payload.clone();
    if let Err(err) = modify::apply(&mut value, &redactions_only, Target::WrappedMcpResponse) {
        panic!("policy redactions do not apply to their own payload: {err}\n{m:?}");
    }
}
