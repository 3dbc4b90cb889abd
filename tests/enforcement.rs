//! Every disposition enforced end to end: what the server actually received,
//! what the client actually got, and what the audit log says.

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use support::{entries_of, tool_call, Proxy, Scratch};

fn calls_to(scratch: &Scratch, tool: &str) -> Vec<Value> {
    scratch
        .server_received()
        .into_iter()
        .filter(|m| m["method"] == "tools/call" && m["params"]["name"] == tool)
        .collect()
}

fn entry_for_rule<'a>(entries: &'a [Value], rule: &str) -> &'a Value {
    entries
        .iter()
        .find(|e| e["rule"] == rule)
        .unwrap_or_else(|| panic!("no audit entry for rule {rule}: {entries:?}"))
}

#[test]
fn denied_tool_call_is_answered_and_never_reaches_the_server() {
    let scratch = Scratch::new();
    let config = scratch.demo_config(
        r#"
[[policy.rule]]
name = "no-env"
hook = "steps/toolCallRequest"
tool = "get-env"
decision = "deny"
reasoning = "environment dumps leak credentials"
"#,
    );
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(5, "get-env", json!({})));
    let reply = proxy.response(&json!(5));
    assert_eq!(reply["result"]["isError"], true);
    let text = reply["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("environment dumps leak credentials"),
        "{text}"
    );
    assert!(!reply.to_string().contains("sk-demo"), "the secret leaked");
    proxy.send(&tool_call(6, "echo", json!({"text": "still works"})));
    assert_eq!(
        proxy.response(&json!(6))["result"]["content"][0]["text"],
        "still works"
    );
    assert!(proxy.finish().success());

    assert!(
        calls_to(&scratch, "get-env").is_empty(),
        "a denied call reached the server"
    );
    let entries = scratch.audit_entries();
    let entry = entry_for_rule(&entries, "no-env");
    assert_eq!(entry["decision"], "deny");
    assert_eq!(entry["action"], "blocked");
    assert_eq!(entry["step_type"], "steps/toolCallRequest");
    assert_eq!(
        reply["result"]["_meta"]["io.acs-proxy/decision"]["audit_entry_id"], entry["entry_id"],
        "the reply must point at its audit entry"
    );
    scratch.assert_audit_verifies();
}

#[test]
fn denied_request_of_another_method_gets_a_json_rpc_error() {
    let scratch = Scratch::new();
    let config = scratch.demo_config(
        r#"
[[policy.rule]]
name = "no-resources"
hook = "protocols/MCP/resources/read"
match = { pointer = "/method", regex = "resources/read" }
decision = "deny"
reasoning = "resources are off limits"
reason_codes = ["resource_blocked"]
"#,
    );
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&json!({"jsonrpc":"2.0","id":"r1","method":"resources/read","params":{"uri":"demo://readme"}}));
    let reply = proxy.response(&json!("r1"));
    assert_eq!(reply["error"]["code"], -32010);
    assert_eq!(reply["error"]["data"]["decision"], "deny");
    assert_eq!(
        reply["error"]["data"]["reason_codes"][0],
        "resource_blocked"
    );
    assert!(proxy.finish().success());
    assert!(!scratch
        .server_received()
        .iter()
        .any(|m| m["method"] == "resources/read"));
}

#[test]
fn denied_notification_is_dropped() {
    let scratch = Scratch::new();
    let config = scratch.demo_config(
        r#"
[[policy.rule]]
name = "no-roots-updates"
hook = "protocols/MCP/notifications/roots/list_changed"
decision = "deny"
reasoning = "roots are fixed"
"#,
    );
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&json!({"jsonrpc":"2.0","method":"notifications/roots/list_changed"}));
    proxy.send(&json!({"jsonrpc":"2.0","id":2,"method":"ping"}));
    proxy.response(&json!(2));
    assert!(proxy.finish().success());
    assert!(!scratch
        .server_received()
        .iter()
        .any(|m| m["method"] == "notifications/roots/list_changed"));
    let entries = scratch.audit_entries();
    assert_eq!(
        entry_for_rule(&entries, "no-roots-updates")["action"],
        "dropped"
    );
}

#[test]
fn denied_response_is_replaced_after_the_server_ran() {
    let scratch = Scratch::new();
    let config = scratch.demo_config(
        r#"
[[policy.rule]]
name = "no-greeting-output"
hook = "protocols/MCP/prompts/get"
match = { pointer = "/result", regex = "Ada" }
decision = "deny"
reasoning = "this prompt may not be shown"
"#,
    );
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&json!({"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"greeting","arguments":{"name":"Ada"}}}));
    let reply = proxy.response(&json!(3));
    assert_eq!(reply["error"]["code"], -32010, "{reply}");
    assert!(
        !reply.to_string().contains("Ada"),
        "the denied content leaked: {reply}"
    );
    assert!(proxy.finish().success());
    assert!(scratch
        .server_received()
        .iter()
        .any(|m| m["method"] == "prompts/get"));
    let entries = scratch.audit_entries();
    let entry = entry_for_rule(&entries, "no-greeting-output");
    assert_eq!(entry["direction"], "server_to_client");
    assert_eq!(entry["action"], "blocked");
}

#[test]
fn overrides_and_redactions_rewrite_what_the_server_receives() {
    let scratch = Scratch::new();
    let config = scratch.demo_config(
        r#"
[[policy.rule]]
name = "force-b"
hook = "steps/toolCallRequest"
tool = "add"
decision = "modify"
reasoning = "b is pinned"
set = { b = 1000 }

[[policy.rule]]
name = "scrub-keys"
hook = "protocols/MCP/tools/call"
tool = "echo"
match = { pointer = "/params", regex = "sk-" }
decision = "modify"
reasoning = "API keys never leave the agent"
redact = { pointer = "/params/arguments", regex = 'sk-[A-Za-z0-9]+', replacement = "[KEY]" }
"#,
    );
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&json!({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2},"extra":"kept"}}));
    assert_eq!(
        proxy.response(&json!(4))["result"]["content"][0]["text"],
        "1001"
    );
    proxy.send(&tool_call(
        5,
        "echo",
        json!({"text": "token sk-abc123 here"}),
    ));
    assert_eq!(
        proxy.response(&json!(5))["result"]["content"][0]["text"],
        "token [KEY] here"
    );
    assert!(proxy.finish().success());

    let add = &calls_to(&scratch, "add")[0];
    assert_eq!(add["params"]["arguments"], json!({"a":1,"b":1000}));
    assert_eq!(
        add["params"]["extra"], "kept",
        "unknown members survive a rewrite"
    );
    let echo = &calls_to(&scratch, "echo")[0];
    assert_eq!(echo["params"]["arguments"]["text"], "token [KEY] here");
    assert!(!scratch
        .server_lines()
        .iter()
        .any(|l| l.contains("sk-abc123")));
    let entries = scratch.audit_entries();
    assert_eq!(entry_for_rule(&entries, "force-b")["action"], "rewritten");
    assert_eq!(
        entry_for_rule(&entries, "scrub-keys")["action"],
        "rewritten"
    );
    scratch.assert_audit_verifies();
}

#[test]
fn tool_output_is_redacted_before_the_client_sees_it() {
    let scratch = Scratch::new();
    let config = scratch.demo_config(
        r#"
[[policy.rule]]
name = "redact-ssn"
hook = "steps/toolCallResult"
decision = "modify"
reasoning = "no SSNs in tool output"
redact = { pointer = "/outputs", regex = '\b\d{3}-\d{2}-\d{4}\b', replacement = "[SSN]" }
"#,
    );
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(6, "lookup-user", json!({"name": "Ada"})));
    let reply = proxy.response(&json!(6));
    let text = reply["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(text, "name: Ada, email: ada@example.com, ssn: [SSN]");
    assert!(proxy.finish().success());
    scratch.assert_audit_verifies();
}

#[test]
fn an_unappliable_modification_is_a_deny_with_an_audit_event() {
    let scratch = Scratch::new();
    // Parameter overrides cannot apply to a response: §6.3 says deny.
    let config = scratch.demo_config(
        r#"
[[policy.rule]]
name = "bad-modify"
hook = "protocols/MCP/resources/list"
match = { pointer = "/result", regex = "demo" }
decision = "modify"
reasoning = "tries to override a response"
set = { uri = "x" }
"#,
    );
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&json!({"jsonrpc":"2.0","id":7,"method":"resources/list"}));
    let reply = proxy.response(&json!(7));
    assert_eq!(reply["error"]["code"], -32010);
    assert_eq!(
        reply["error"]["data"]["reason_codes"][0],
        "modify_unsupported"
    );
    assert!(proxy.finish().success());
    let entries = scratch.audit_entries();
    let events = entries_of(&entries, "enforcement");
    assert!(
        events
            .iter()
            .any(|e| e["reason_codes"][0] == "modify_unsupported" && e["decision"] == "deny"),
        "{events:?}"
    );
    scratch.assert_audit_verifies();
}

#[test]
fn ask_without_elicitation_is_denied_as_approver_unavailable() {
    let scratch = Scratch::new();
    let config = scratch.demo_config(
        r#"
[[policy.rule]]
name = "confirm-add"
hook = "steps/toolCallRequest"
tool = "add"
decision = "ask"
reasoning = "additions need a human"
"#,
    );
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(8, "add", json!({"a": 1, "b": 2})));
    let reply = proxy.response(&json!(8));
    assert_eq!(reply["result"]["isError"], true);
    let data = &reply["result"]["_meta"]["io.acs-proxy/decision"];
    assert_eq!(data["reason_codes"][0], "approver_unavailable", "{reply}");
    assert!(proxy.finish().success());
    assert!(calls_to(&scratch, "add").is_empty());
}

#[test]
fn ask_with_elicitation_goes_through_only_when_approved() {
    let scratch = Scratch::new();
    let config = scratch.demo_config(
        r#"
[[policy.rule]]
name = "confirm-add"
hook = "steps/toolCallRequest"
tool = "add"
decision = "ask"
reasoning = "additions need a human"
ask = { question = "Allow this addition?", timeout_seconds = 10 }
"#,
    );
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({"elicitation": {}}));
    for (id, approve) in [(9, true), (10, false)] {
        proxy.send(&tool_call(id, "add", json!({"a": id, "b": 1})));
        let (ask, _) = proxy.recv_until(|m| m["method"] == "elicitation/create");
        let message = ask["params"]["message"].as_str().unwrap();
        assert!(
            message.contains("Allow this addition?") && message.contains("add"),
            "{message}"
        );
        // Other traffic flows while the approval is pending.
        proxy.send(&json!({"jsonrpc":"2.0","id":100 + id,"method":"ping"}));
        proxy.response(&json!(100 + id));
        proxy.send(&json!({"jsonrpc":"2.0","id":ask["id"],"result":{"action":"accept","content":{"approve":approve}}}));
        let reply = proxy.response(&json!(id));
        if approve {
            assert_eq!(reply["result"]["content"][0]["text"], "10");
        } else {
            assert_eq!(reply["result"]["isError"], true, "{reply}");
        }
    }
    assert!(proxy.finish().success());
    let calls = calls_to(&scratch, "add");
    assert_eq!(
        calls.len(),
        1,
        "only the approved call may reach the server"
    );
    let entries = scratch.audit_entries();
    let holds: Vec<&Value> = entries.iter().filter(|e| e["action"] == "held").collect();
    assert_eq!(holds.len(), 2);
    assert!(entries
        .iter()
        .any(|e| e["detail"].as_str().is_some_and(|d| d.contains("approved"))));
    scratch.assert_audit_verifies();
}

#[test]
fn defer_holds_then_applies_the_timeout_decision() {
    let scratch = Scratch::new();
    let config = scratch.demo_config(
        r#"
[[policy.rule]]
name = "later"
hook = "steps/toolCallRequest"
tool = "echo"
decision = "defer"
reasoning = "waiting on a dependency"
defer = { timeout_ms = 300, timeout_decision = "deny" }

[[policy.rule]]
name = "later-ok"
hook = "steps/toolCallRequest"
tool = "add"
decision = "defer"
reasoning = "waiting on a dependency"
defer = { timeout_ms = 300, timeout_decision = "allow" }
"#,
    );
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(11, "echo", json!({"text": "x"})));
    proxy.send(&tool_call(12, "add", json!({"a": 2, "b": 2})));
    let started = std::time::Instant::now();
    assert_eq!(proxy.response(&json!(11))["result"]["isError"], true);
    assert_eq!(
        proxy.response(&json!(12))["result"]["content"][0]["text"],
        "4"
    );
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert!(proxy.finish().success());
    assert!(calls_to(&scratch, "echo").is_empty());
    assert_eq!(calls_to(&scratch, "add").len(), 1);
}
