//! `[guardian] mode = "remote"` end to end: acs-proxy in front of the demo
//! server, deciding every hook with the ACS test Guardian
//! (`acs-test-guardian`) over HTTP or Content-Length-framed stdio.
//!
//! Each test checks what the client got, what the server received (the
//! demo server's `--record`), what the audit log says (decision, its
//! source, action, detail, the Guardian's chain head) and what the
//! Guardian received: every request signed validly, and every hook echoing
//! the chain head of the last answer the proxy accepted.

mod support;

use support::free_port;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::guardian::TestGuardian;
use support::{entries_of, tool_call, Proxy, Scratch};

/// Decisions the proxy takes from the Guardian as they are: their
/// `chain_hash` becomes the head it sends back on the next hook.
const ACCEPTED: &[&str] = &["allow", "deny", "modify", "ask", "defer", "chain_mismatch"];

// ---------------------------------------------------------------- helpers

fn calls_to(scratch: &Scratch, tool: &str) -> Vec<Value> {
    scratch
        .server_received()
        .into_iter()
        .filter(|m| m["method"] == "tools/call" && m["params"]["name"] == tool)
        .collect()
}

fn text(reply: &Value) -> &str {
    reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content: {reply}"))
}

/// The proxy's explanation attached to a blocked `tools/call`.
fn block_data(reply: &Value) -> &Value {
    assert_eq!(reply["result"]["isError"], true, "not blocked: {reply}");
    &reply["result"]["_meta"]["io.acs-proxy/decision"]
}

/// The audit entry of hook `step_type` about the MCP message with `mcp_id`.
fn hook_entry<'a>(entries: &'a [Value], step_type: &str, mcp_id: &Value) -> &'a Value {
    let found: Vec<&Value> = entries
        .iter()
        .filter(|e| e["step_type"] == step_type && &e["mcp_id"] == mcp_id)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "expected one {step_type} entry for id {mcp_id}: {entries:#?}"
    );
    found[0]
}

/// The enforcement events recorded about the MCP message with `mcp_id`.
fn events_for<'a>(entries: &'a [Value], mcp_id: &Value) -> Vec<&'a Value> {
    entries_of(entries, "enforcement")
        .into_iter()
        .filter(|e| &e["mcp_id"] == mcp_id)
        .collect()
}

fn detail(entry: &Value) -> &str {
    entry["detail"]
        .as_str()
        .unwrap_or_else(|| panic!("no detail: {entry}"))
}

/// The Guardian's record of the request an audit entry is about.
fn record_of<'a>(records: &'a [Value], entry: &Value) -> &'a Value {
    records
        .iter()
        .find(|r| r["envelope"]["params"]["request_id"] == entry["step_id"])
        .unwrap_or_else(|| panic!("the Guardian never received the hook of {entry}"))
}

/// Every request the Guardian got was validly signed (pings are never
/// signed), and every hook carries, as `metadata.session_state.chain_hash`,
/// the `chain_hash` of the last answer the proxy accepted (none on the
/// first hook, and answers the proxy rejected do not move it).
fn assert_signed_and_chained(guardian: &TestGuardian) {
    for record in guardian.records() {
        if record["envelope"]["method"] == "system/ping" {
            continue;
        }
        assert_eq!(
            record["signature_valid"], true,
            "the Guardian could not verify a request: {record}"
        );
    }
    let mut head: Option<Value> = None;
    for record in guardian.hook_records() {
        let sent = record["envelope"]["params"]["metadata"]
            .get("session_state")
            .map(|state| state["chain_hash"].clone());
        assert_eq!(
            sent, head,
            "hook {} did not echo the last accepted chain head",
            record["envelope"]["method"]
        );
        let action = record["action"].as_str().unwrap_or_default();
        if ACCEPTED.contains(&action) {
            assert!(record["chain_hash"].is_string(), "{record}");
            head = Some(record["chain_hash"].clone());
        }
    }
}

/// Every decision taken from the Guardian names the Guardian's chain head
/// after that hook (the head its answer published).
fn assert_remote_entries_witness_heads(entries: &[Value], guardian: &TestGuardian) {
    let records = guardian.records();
    let remote: Vec<&Value> = entries
        .iter()
        .filter(|e| e["decision_source"] == "remote")
        .collect();
    assert!(!remote.is_empty(), "no remote decisions: {entries:#?}");
    for entry in remote {
        let record = record_of(&records, entry);
        assert_eq!(
            entry["guardian_chain_hash"], record["chain_hash"],
            "audit entry {} does not witness the Guardian's head",
            entry["entry_id"]
        );
    }
}

/// The Guardian's record of the hook `method` about tool `tool`'s call or result.
fn guardian_hooks_for(guardian: &TestGuardian, method: &str, tool: &str) -> Vec<Value> {
    guardian
        .hook_records()
        .into_iter()
        .filter(|r| {
            r["envelope"]["method"] == method
                && r["envelope"]["params"]["payload"]["tool"]["name"] == tool
        })
        .collect()
}

/// `GET /metrics` from the proxy's admin endpoint, retried until it answers.
fn metrics(port: u16) -> String {
    support::metrics_text(port)
}

/// The value of an unlabelled counter in Prometheus text.
fn counter(metrics: &str, name: &str) -> u64 {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in:\n{metrics}"))
}

/// A ServerHello script part with a short decision timeout for hooks.
fn quick_hello() -> Value {
    json!({"timeout_config": {"default_ms": 3000, "per_method_ms": {"steps/toolCallRequest": 400}}})
}

// ------------------------------------------------------------- over HTTP

#[test]
fn allow_is_forwarded_and_every_entry_witnesses_the_guardians_head() {
    let scratch = Scratch::new();
    let guardian = TestGuardian::http(&scratch, &json!({}));
    let config = guardian.proxy_config(&scratch, "", "");
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(1, "echo", json!({"text": "hello guardian"})));
    assert_eq!(text(&proxy.response(&json!(1))), "hello guardian");
    assert!(proxy.finish().success());

    let calls = calls_to(&scratch, "echo");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["params"]["arguments"]["text"], "hello guardian");

    let entries = scratch.audit_entries();
    for entry in &entries {
        assert_eq!(entry["decision_source"], "remote", "{entry}");
        assert_eq!(entry["decision"], "allow", "{entry}");
    }
    let step = hook_entry(&entries, "steps/toolCallRequest", &json!(1));
    assert_eq!(step["action"], "forwarded");
    let head = step["guardian_chain_hash"].as_str().expect("a chain head");
    assert_eq!(head.len(), 64);
    assert_remote_entries_witness_heads(&entries, &guardian);
    for step_type in [
        "steps/sessionStart",
        "agbom/snapshot",
        "steps/toolCallResult",
        "steps/sessionEnd",
    ] {
        assert_eq!(entries_of(&entries, step_type).len(), 1, "{step_type}");
    }

    let hellos = guardian.hello_records();
    assert_eq!(hellos.len(), 1);
    assert_eq!(hellos[0]["action"], "hello:ok");
    let hello = &hellos[0]["envelope"]["params"];
    assert_eq!(hello["signature"]["key_id"], support::guardian::KEY_ID);
    assert_eq!(
        hello["metadata"]["session_id"], entries[0]["session_id"],
        "the handshake and the audit chain name the same session"
    );
    let hooks = guardian.hook_records();
    assert_eq!(
        hooks.len(),
        entries.len(),
        "one Guardian request per audited hook"
    );
    assert_signed_and_chained(&guardian);
    scratch.assert_audit_verifies();
}

#[test]
fn deny_blocks_the_call_before_the_server() {
    let scratch = Scratch::new();
    let guardian = TestGuardian::http(
        &scratch,
        &json!({"rules": [{"method": "steps/toolCallRequest", "tool": "get-env", "then":
            {"action": "deny", "reasoning": "no environment dumps", "reason_codes": ["env_blocked"]}}]}),
    );
    let config = guardian.proxy_config(&scratch, "", "");
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(2, "get-env", json!({})));
    let reply = proxy.response(&json!(2));
    let data = block_data(&reply);
    assert!(text(&reply).contains("no environment dumps"), "{reply}");
    assert_eq!(data["reason_codes"], json!(["env_blocked"]));
    assert!(!reply.to_string().contains("sk-"), "the secret leaked");
    proxy.send(&tool_call(3, "echo", json!({"text": "still served"})));
    assert_eq!(text(&proxy.response(&json!(3))), "still served");
    assert!(proxy.finish().success());

    assert!(
        calls_to(&scratch, "get-env").is_empty(),
        "a denied call ran"
    );
    assert_eq!(calls_to(&scratch, "echo").len(), 1);
    let entries = scratch.audit_entries();
    let entry = hook_entry(&entries, "steps/toolCallRequest", &json!(2));
    assert_eq!(entry["decision"], "deny");
    assert_eq!(entry["decision_source"], "remote");
    assert_eq!(entry["action"], "blocked");
    assert_eq!(entry["reasoning"], "no environment dumps");
    assert_eq!(entry["reason_codes"], json!(["env_blocked"]));
    assert_eq!(data["audit_entry_id"], entry["entry_id"]);
    let records = guardian.records();
    assert_eq!(record_of(&records, entry)["action"], "deny");
    assert_remote_entries_witness_heads(&entries, &guardian);
    assert_signed_and_chained(&guardian);
    scratch.assert_audit_verifies();
}

#[test]
fn modify_redacts_tool_output_before_the_client_sees_it() {
    let scratch = Scratch::new();
    let guardian = TestGuardian::http(
        &scratch,
        &json!({"rules": [{"method": "steps/toolCallResult", "tool": "lookup-user", "then":
            {"action": "modify", "reasoning": "no SSNs in tool output",
             "modifications": {"redactions": [{"path": "/outputs/0/value", "replacement": "[RECORD WITHHELD]"}]}}}]}),
    );
    let config = guardian.proxy_config(&scratch, "", "");
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(4, "lookup-user", json!({"name": "Ada"})));
    let reply = proxy.response(&json!(4));
    assert_eq!(text(&reply), "[RECORD WITHHELD]");
    assert!(!reply.to_string().contains("ssn"), "{reply}");
    assert!(proxy.finish().success());

    let calls = calls_to(&scratch, "lookup-user");
    assert_eq!(calls.len(), 1, "the call itself was allowed");
    assert_eq!(calls[0]["params"]["arguments"], json!({"name": "Ada"}));
    let entries = scratch.audit_entries();
    let entry = hook_entry(&entries, "steps/toolCallResult", &json!(4));
    assert_eq!(entry["decision"], "modify");
    assert_eq!(entry["decision_source"], "remote");
    assert_eq!(entry["action"], "rewritten");
    assert_eq!(entry["direction"], "server_to_client");
    assert!(entry["guardian_chain_hash"].is_string());
    let records = guardian.records();
    let record = record_of(&records, entry);
    assert_eq!(record["action"], "modify");
    let outputs = &record["envelope"]["params"]["payload"]["outputs"];
    assert!(
        outputs[0]["value"].as_str().unwrap().contains("ssn"),
        "the Guardian saw the unredacted output: {outputs}"
    );
    assert_remote_entries_witness_heads(&entries, &guardian);
    assert_signed_and_chained(&guardian);
    scratch.assert_audit_verifies();
}

#[test]
fn modify_parameter_overrides_reach_the_server() {
    let scratch = Scratch::new();
    let guardian = TestGuardian::http(
        &scratch,
        &json!({"rules": [{"method": "steps/toolCallRequest", "tool": "add", "then":
            {"action": "modify", "reasoning": "b is pinned",
             "modifications": {"parameter_overrides": {"b": 1000}}}}]}),
    );
    let config = guardian.proxy_config(&scratch, "", "");
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&json!({"jsonrpc":"2.0","id":5,"method":"tools/call",
        "params":{"name":"add","arguments":{"a":1,"b":2},"extra":"kept"}}));
    assert_eq!(text(&proxy.response(&json!(5))), "1001");
    assert!(proxy.finish().success());

    let calls = calls_to(&scratch, "add");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["params"]["arguments"], json!({"a": 1, "b": 1000}));
    assert_eq!(calls[0]["params"]["extra"], "kept");
    let entries = scratch.audit_entries();
    let entry = hook_entry(&entries, "steps/toolCallRequest", &json!(5));
    assert_eq!(entry["decision"], "modify");
    assert_eq!(entry["decision_source"], "remote");
    assert_eq!(entry["action"], "rewritten");
    assert_eq!(entry["reasoning"], "b is pinned");
    // The result hook describes what the server really computed.
    let results = guardian_hooks_for(&guardian, "steps/toolCallResult", "add");
    assert_eq!(
        results[0]["envelope"]["params"]["payload"]["outputs"][0]["value"],
        "1001"
    );
    assert_remote_entries_witness_heads(&entries, &guardian);
    assert_signed_and_chained(&guardian);
    scratch.assert_audit_verifies();
}

#[test]
fn modified_content_replaces_the_tool_arguments() {
    let scratch = Scratch::new();
    let guardian = TestGuardian::http(
        &scratch,
        &json!({"rules": [{"method": "steps/toolCallRequest", "tool": "echo", "then":
            {"action": "modify", "reasoning": "rewritten by the Guardian",
             "modifications": {"modified_content": "{\"text\":\"replaced by the Guardian\"}"}}}]}),
    );
    let config = guardian.proxy_config(&scratch, "", "");
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(6, "echo", json!({"text": "original", "n": 1})));
    assert_eq!(text(&proxy.response(&json!(6))), "replaced by the Guardian");
    assert!(proxy.finish().success());

    let calls = calls_to(&scratch, "echo");
    assert_eq!(calls.len(), 1);
    assert_eq!(
        calls[0]["params"]["arguments"],
        json!({"text": "replaced by the Guardian"})
    );
    assert!(!scratch
        .server_lines()
        .iter()
        .any(|l| l.contains("original")));
    let entries = scratch.audit_entries();
    let entry = hook_entry(&entries, "steps/toolCallRequest", &json!(6));
    assert_eq!(entry["decision"], "modify");
    assert_eq!(entry["decision_source"], "remote");
    assert_eq!(entry["action"], "rewritten");
    assert_remote_entries_witness_heads(&entries, &guardian);
    assert_signed_and_chained(&guardian);
    scratch.assert_audit_verifies();
}

#[test]
fn ask_without_elicitation_is_denied_as_approver_unavailable() {
    let scratch = Scratch::new();
    let guardian = TestGuardian::http(
        &scratch,
        &json!({"rules": [{"method": "steps/toolCallRequest", "tool": "add", "then":
            {"action": "ask", "reasoning": "additions need a human"}}]}),
    );
    let config = guardian.proxy_config(&scratch, "", "");
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(7, "add", json!({"a": 1, "b": 2})));
    let reply = proxy.response(&json!(7));
    assert_eq!(
        block_data(&reply)["reason_codes"],
        json!(["approver_unavailable"])
    );
    assert!(proxy.finish().success());

    assert!(calls_to(&scratch, "add").is_empty());
    let entries = scratch.audit_entries();
    let hold = hook_entry(&entries, "steps/toolCallRequest", &json!(7));
    assert_eq!(hold["decision"], "ask");
    assert_eq!(hold["decision_source"], "remote");
    assert_eq!(hold["action"], "held");
    let events = events_for(&entries, &json!(7));
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["decision"], "deny");
    assert_eq!(events[0]["action"], "blocked");
    assert_eq!(events[0]["reason_codes"], json!(["approver_unavailable"]));
    assert_eq!(detail(events[0]), "ask: approver_unavailable");
    assert_remote_entries_witness_heads(&entries, &guardian);
    assert_signed_and_chained(&guardian);
    scratch.assert_audit_verifies();
}

#[test]
fn ask_with_elicitation_goes_through_once_approved() {
    let scratch = Scratch::new();
    let guardian = TestGuardian::http(
        &scratch,
        &json!({"rules": [{"method": "steps/toolCallRequest", "tool": "add", "then":
            {"action": "ask", "reasoning": "additions need a human",
             "ask_details": {"approver": {"type": "human", "id": "ops"},
                             "question": "May the agent add these numbers?",
                             "timeout_seconds": 10, "timeout_disposition": "deny"}}}]}),
    );
    let config = guardian.proxy_config(&scratch, "", "");
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({"elicitation": {}}));
    proxy.send(&tool_call(8, "add", json!({"a": 40, "b": 2})));
    let (ask, _) = proxy.recv_until(|m| m["method"] == "elicitation/create");
    let message = ask["params"]["message"].as_str().unwrap();
    assert!(
        message.contains("May the agent add these numbers?") && message.contains("add"),
        "{message}"
    );
    assert!(
        calls_to(&scratch, "add").is_empty(),
        "nothing runs before approval"
    );
    proxy.send(&json!({"jsonrpc":"2.0","id":ask["id"],
        "result":{"action":"accept","content":{"approve":true}}}));
    assert_eq!(text(&proxy.response(&json!(8))), "42");
    assert!(proxy.finish().success());

    assert_eq!(calls_to(&scratch, "add").len(), 1);
    let entries = scratch.audit_entries();
    let hold = hook_entry(&entries, "steps/toolCallRequest", &json!(8));
    assert_eq!(hold["decision"], "ask");
    assert_eq!(hold["decision_source"], "remote");
    assert_eq!(hold["action"], "held");
    let events = events_for(&entries, &json!(8));
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["decision"], "allow");
    assert_eq!(events[0]["action"], "forwarded");
    assert!(detail(events[0]).contains("approved"), "{}", events[0]);
    assert_remote_entries_witness_heads(&entries, &guardian);
    assert_signed_and_chained(&guardian);
    scratch.assert_audit_verifies();
}

#[test]
fn defer_holds_until_its_timeout_decision() {
    let scratch = Scratch::new();
    let defer = |timeout_decision: &str| {
        json!({"action": "defer", "reasoning": "waiting on a dependency",
               "defer_details": {"reason": "pending_dependency", "resolution_method": "timeout",
                                 "resolution_timeout_ms": 300, "timeout_decision": timeout_decision}})
    };
    let guardian = TestGuardian::http(
        &scratch,
        &json!({"rules": [
            {"method": "steps/toolCallRequest", "tool": "echo", "then": defer("deny")},
            {"method": "steps/toolCallRequest", "tool": "add", "then": defer("allow")}]}),
    );
    let config = guardian.proxy_config(&scratch, "", "");
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    let started = Instant::now();
    proxy.send(&tool_call(9, "echo", json!({"text": "later"})));
    block_data(&proxy.response(&json!(9)));
    assert!(started.elapsed() >= Duration::from_millis(250));
    let started = Instant::now();
    proxy.send(&tool_call(10, "add", json!({"a": 2, "b": 2})));
    assert_eq!(text(&proxy.response(&json!(10))), "4");
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert!(proxy.finish().success());

    assert!(calls_to(&scratch, "echo").is_empty());
    assert_eq!(calls_to(&scratch, "add").len(), 1);
    let entries = scratch.audit_entries();
    for (id, outcome, action) in [(9, "deny", "blocked"), (10, "allow", "forwarded")] {
        let hold = hook_entry(&entries, "steps/toolCallRequest", &json!(id));
        assert_eq!(hold["decision"], "defer");
        assert_eq!(hold["decision_source"], "remote");
        assert_eq!(hold["action"], "held");
        let events = events_for(&entries, &json!(id));
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0]["decision"], outcome);
        assert_eq!(events[0]["action"], action);
        assert_eq!(detail(events[0]), "defer: resolution timeout elapsed");
    }
    assert_remote_entries_witness_heads(&entries, &guardian);
    assert_signed_and_chained(&guardian);
    scratch.assert_audit_verifies();
}

/// A decision that arrives after the negotiated timeout (400 ms for
/// `steps/toolCallRequest`, not the 3 s default nor the proxy's 5 s
/// `timeout_ms`) is not waited for: the failure posture decides.
fn late_answer(local_posture: Option<&str>) -> (Scratch, TestGuardian, Value) {
    let scratch = Scratch::new();
    let mut script = json!({"hello": quick_hello(), "rules": [
        {"method": "steps/toolCallRequest", "tool": "echo", "then":
            {"action": "late", "delay_ms": 1500, "then": {"action": "allow"}}}]});
    script["hello"]["on_decision_failure"] = json!("proceed");
    let guardian = TestGuardian::http(&scratch, &script);
    let keys = local_posture
        .map(|posture| format!("on_decision_failure = {posture:?}\n"))
        .unwrap_or_default();
    let config = guardian.proxy_config(&scratch, &keys, "");
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    let started = Instant::now();
    proxy.send(&tool_call(11, "echo", json!({"text": "in time?"})));
    let reply = proxy.response(&json!(11));
    assert!(
        started.elapsed() < Duration::from_millis(1400),
        "the proxy waited for the late answer ({:?})",
        started.elapsed()
    );
    proxy.send(&tool_call(12, "add", json!({"a": 1, "b": 1})));
    assert_eq!(text(&proxy.response(&json!(12))), "2");
    assert!(proxy.finish().success());
    (scratch, guardian, reply)
}

fn assert_late_entry(entries: &[Value], decision: &str, action: &str) {
    let entry = hook_entry(entries, "steps/toolCallRequest", &json!(11));
    assert_eq!(entry["decision"], decision);
    assert_eq!(entry["decision_source"], "posture");
    assert_eq!(entry["action"], action);
    assert!(
        detail(entry).contains("did not answer within 400 ms"),
        "{entry}"
    );
    assert!(entry.get("guardian_chain_hash").is_none(), "{entry}");
    let next = hook_entry(entries, "steps/toolCallRequest", &json!(12));
    assert_eq!(next["decision_source"], "remote");
}

#[test]
fn late_answer_with_posture_proceed_is_allowed_and_audited_as_a_bypass() {
    let (scratch, guardian, reply) = late_answer(None);
    assert_eq!(text(&reply), "in time?");
    assert_eq!(calls_to(&scratch, "echo").len(), 1);
    let entries = scratch.audit_entries();
    assert_late_entry(&entries, "allow", "forwarded");
    let late = guardian_hooks_for(&guardian, "steps/toolCallRequest", "echo");
    assert_eq!(late[0]["action"], "late:allow");
    assert_remote_entries_witness_heads(&entries, &guardian);
    assert_signed_and_chained(&guardian);
    scratch.assert_audit_verifies();
}

#[test]
fn late_answer_with_local_posture_deny_is_denied() {
    let (scratch, guardian, reply) = late_answer(Some("deny"));
    let data = block_data(&reply);
    assert_eq!(data["decision"], "deny");
    assert!(text(&reply).contains("failure posture is deny"), "{reply}");
    assert!(calls_to(&scratch, "echo").is_empty(), "a denied call ran");
    assert_eq!(calls_to(&scratch, "add").len(), 1);
    let entries = scratch.audit_entries();
    assert_late_entry(&entries, "deny", "blocked");
    assert_remote_entries_witness_heads(&entries, &guardian);
    assert_signed_and_chained(&guardian);
    scratch.assert_audit_verifies();
}

#[test]
fn unverifiable_answers_fail_closed_even_with_posture_proceed() {
    let scratch = Scratch::new();
    let rule = |tool: &str, action: &str| json!({"method": "steps/toolCallRequest", "tool": tool, "times": 1, "then": {"action": action}});
    let guardian = TestGuardian::http(
        &scratch,
        &json!({"hello": {"on_decision_failure": "proceed"}, "rules": [
            rule("echo", "unsigned"),
            rule("add", "bad_signature"),
            rule("lookup-user", "wrong_request_id")]}),
    );
    let config = guardian.proxy_config(&scratch, "on_decision_failure = \"proceed\"\n", "");
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    let cases = [
        (
            13,
            "echo",
            json!({"text": "x"}),
            "unsigned:allow",
            "not authenticated",
        ),
        (
            14,
            "add",
            json!({"a": 1, "b": 2}),
            "bad_signature:allow",
            "not authenticated",
        ),
        (
            15,
            "lookup-user",
            json!({"name": "Ada"}),
            "wrong_request_id:allow",
            "does not match the request",
        ),
    ];
    let mut replies = Vec::new();
    for (id, tool, arguments, _, _) in &cases {
        proxy.send(&tool_call(*id, tool, arguments.clone()));
        replies.push(proxy.response(&json!(id)));
    }
    proxy.send(&tool_call(16, "echo", json!({"text": "plain allow"})));
    assert_eq!(text(&proxy.response(&json!(16))), "plain allow");
    assert!(proxy.finish().success());

    let entries = scratch.audit_entries();
    let records = guardian.records();
    for ((id, tool, _, label, why), reply) in cases.iter().zip(&replies) {
        let data = block_data(reply);
        assert_eq!(data["decision"], "deny", "{tool}: {reply}");
        let ran = calls_to(&scratch, tool)
            .into_iter()
            .filter(|call| call["params"]["arguments"]["text"] != "plain allow")
            .count();
        assert_eq!(ran, 0, "{tool} reached the server");
        let entry = hook_entry(&entries, "steps/toolCallRequest", &json!(id));
        assert_eq!(entry["decision"], "deny", "{tool}");
        assert_eq!(entry["decision_source"], "posture", "{tool}");
        assert_eq!(entry["action"], "blocked", "{tool}");
        assert!(detail(entry).contains(why), "{tool}: {entry}");
        assert!(
            entry.get("guardian_chain_hash").is_none(),
            "{tool}: {entry}"
        );
        assert_eq!(data["audit_entry_id"], entry["entry_id"]);
        assert_eq!(record_of(&records, entry)["action"], *label);
    }
    assert_remote_entries_witness_heads(&entries, &guardian);
    assert_signed_and_chained(&guardian);
    scratch.assert_audit_verifies();
}

#[test]
fn acs_error_codes_on_a_hook() {
    let scratch = Scratch::new();
    // (code, allowed, decision_source); each rule answers one call.
    let cases = [
        (-32003, true, "not_evaluated"),
        (-32004, false, "posture"),
        (-32005, false, "posture"),
        (-32006, false, "posture"),
        (-32007, false, "posture"),
        (-32000, true, "posture"),
    ];
    let rules: Vec<Value> = cases
        .iter()
        .map(|(code, _, _)| {
            json!({"method": "steps/toolCallRequest", "tool": "echo", "times": 1,
                   "then": {"action": "error", "code": code, "message": format!("scripted {code}")}})
        })
        .collect();
    let guardian = TestGuardian::http(
        &scratch,
        &json!({"hello": {"on_decision_failure": "proceed"}, "rules": rules}),
    );
    let port = free_port();
    let config = guardian.proxy_config(
        &scratch,
        "",
        &format!("[metrics]\naddress = \"127.0.0.1:{port}\"\n"),
    );
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    let mut replies = Vec::new();
    for (index, (code, _, _)) in cases.iter().enumerate() {
        let id = 20 + index as i64;
        proxy.send(&tool_call(
            id,
            "echo",
            json!({"text": format!("code {code}")}),
        ));
        replies.push(proxy.response(&json!(id)));
    }
    let metrics = metrics(port);
    assert!(proxy.finish().success());

    assert_eq!(
        counter(
            &metrics,
            "acs_proxy_integrity_events_total{kind=\"chain_mismatch\"}"
        ),
        1,
        "-32007 is an integrity event"
    );
    let entries = scratch.audit_entries();
    let records = guardian.records();
    let echoed: Vec<Value> = calls_to(&scratch, "echo")
        .into_iter()
        .map(|call| call["params"]["arguments"]["text"].clone())
        .collect();
    for (index, ((code, allowed, source), reply)) in cases.iter().zip(&replies).enumerate() {
        let id = json!(20 + index as i64);
        let sent = format!("code {code}");
        let entry = hook_entry(&entries, "steps/toolCallRequest", &id);
        assert_eq!(entry["decision_source"], *source, "{code}: {entry}");
        assert!(
            detail(entry).contains(&format!("Guardian error {code}")),
            "{code}: {entry}"
        );
        assert_eq!(
            record_of(&records, entry)["action"],
            format!("error:{code}")
        );
        if *allowed {
            assert_eq!(text(reply), sent, "{code}: {reply}");
            assert_eq!(entry["decision"], "allow", "{code}");
            assert_eq!(entry["action"], "forwarded", "{code}");
            assert!(echoed.contains(&json!(sent)), "{code}: the call never ran");
        } else {
            assert_eq!(block_data(reply)["decision"], "deny", "{code}: {reply}");
            assert_eq!(entry["decision"], "deny", "{code}");
            assert_eq!(entry["action"], "blocked", "{code}");
            assert!(!echoed.contains(&json!(sent)), "{code}: the call ran");
        }
    }
    assert_remote_entries_witness_heads(&entries, &guardian);
    assert_signed_and_chained(&guardian);
    scratch.assert_audit_verifies();
}

/// Answers that are no usable decision but not forged either (an error
/// reply, non-JSON, a wrong `type`, an upper-case decision, a dropped
/// connection) resolve to the failure posture: the Guardian's, unless the
/// proxy's own is stricter. The Guardian is asked again for the next hook.
fn posture_failures(hello_posture: &str, local_posture: &str) -> bool {
    let scratch = Scratch::new();
    let failures = [
        ("error:-32000", json!({"action": "error", "code": -32000})),
        ("malformed", json!({"action": "malformed"})),
        ("wrong_type:allow", json!({"action": "wrong_type"})),
        ("uppercase:allow", json!({"action": "uppercase"})),
        ("drop", json!({"action": "drop"})),
    ];
    let rules: Vec<Value> = failures
        .iter()
        .map(|(_, then)| {
            json!({"method": "steps/toolCallRequest", "tool": "echo", "times": 1, "then": then})
        })
        .collect();
    let guardian = TestGuardian::http(
        &scratch,
        &json!({"hello": {"on_decision_failure": hello_posture}, "rules": rules}),
    );
    let config = guardian.proxy_config(
        &scratch,
        &format!("on_decision_failure = {local_posture:?}\n"),
        "",
    );
    let allowed = hello_posture == "proceed" && local_posture == "proceed";
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    for (index, _) in failures.iter().enumerate() {
        let id = 30 + index as i64;
        proxy.send(&tool_call(
            id,
            "echo",
            json!({"text": format!("failure {index}")}),
        ));
        let reply = proxy.response(&json!(id));
        if allowed {
            assert_eq!(text(&reply), format!("failure {index}"));
        } else {
            assert_eq!(block_data(&reply)["decision"], "deny", "{reply}");
        }
    }
    proxy.send(&tool_call(39, "echo", json!({"text": "decided again"})));
    assert_eq!(text(&proxy.response(&json!(39))), "decided again");
    assert!(proxy.finish().success());

    let ran: Vec<Value> = calls_to(&scratch, "echo")
        .into_iter()
        .map(|call| call["params"]["arguments"]["text"].clone())
        .collect();
    let entries = scratch.audit_entries();
    let records = guardian.records();
    for (index, (label, _)) in failures.iter().enumerate() {
        let entry = hook_entry(&entries, "steps/toolCallRequest", &json!(30 + index as i64));
        assert_eq!(entry["decision_source"], "posture", "{label}: {entry}");
        assert_eq!(record_of(&records, entry)["action"], *label);
        let sent = json!(format!("failure {index}"));
        if allowed {
            assert_eq!(entry["decision"], "allow", "{label}");
            assert_eq!(entry["action"], "forwarded", "{label}");
            assert!(ran.contains(&sent), "{label}: the call never ran");
        } else {
            assert_eq!(entry["decision"], "deny", "{label}");
            assert_eq!(entry["action"], "blocked", "{label}");
            assert!(!ran.contains(&sent), "{label}: a denied call ran");
        }
    }
    let last = hook_entry(&entries, "steps/toolCallRequest", &json!(39));
    assert_eq!(last["decision_source"], "remote");
    assert_remote_entries_witness_heads(&entries, &guardian);
    assert_signed_and_chained(&guardian);
    scratch.assert_audit_verifies();
    allowed
}

#[test]
fn failures_with_posture_proceed_are_allowed_and_audited() {
    assert!(posture_failures("proceed", "proceed"));
}

#[test]
fn failures_with_local_posture_deny_are_denied() {
    assert!(!posture_failures("proceed", "deny"));
}

#[test]
fn failures_with_negotiated_posture_deny_are_denied_whatever_the_local_one() {
    assert!(!posture_failures("deny", "proceed"));
}

/// A session the Guardian refused (or that could not start) serves nothing.
fn assert_refused_session(scratch: &Scratch, guardian: &TestGuardian, why: &str) {
    let entries = scratch.audit_entries();
    assert!(
        scratch.server_received().is_empty(),
        "a refused session reached the server: {:?}",
        scratch.server_lines()
    );
    let first = &entries[0];
    assert_eq!(first["step_type"], "enforcement");
    assert_eq!(first["decision"], "deny");
    assert_eq!(first["decision_source"], "proxy");
    assert_eq!(first["action"], "blocked");
    assert!(detail(first).contains(why), "{first}");
    for method in ["initialize", "tools/call", "ping"] {
        assert!(
            entries.iter().any(|e| e["step_type"] == "enforcement"
                && e["mcp_method"] == method
                && e["action"] == "blocked"
                && e["detail"] == "session refused"),
            "no refusal of {method} in {entries:#?}"
        );
    }
    assert!(
        !entries.iter().any(|e| e["action"] == "forwarded"),
        "{entries:#?}"
    );
    assert_eq!(guardian.hello_records().len(), 1);
    assert_signed_and_chained(guardian);
    scratch.assert_audit_verifies();
    let sent: Vec<Value> = guardian
        .hook_records()
        .iter()
        .map(|r| r["envelope"]["method"].clone())
        .collect();
    assert!(
        sent.is_empty(),
        "hooks were sent to the Guardian of a refused session: {sent:?}"
    );
}

/// Drives a session that must be refused: every request gets an error.
fn drive_refused_session(config: &std::path::Path, why: &str) {
    let mut proxy = Proxy::start(config);
    let init = proxy.initialize(json!({}));
    assert_eq!(init["error"]["code"], -32010, "{init}");
    let message = init["error"]["message"].as_str().unwrap();
    assert!(message.contains(why), "{message}");
    proxy.send(&tool_call(40, "echo", json!({"text": "x"})));
    let reply = proxy.response(&json!(40));
    assert!(text(&reply).contains("the session was refused"), "{reply}");
    block_data(&reply);
    proxy.send(&json!({"jsonrpc":"2.0","id":41,"method":"ping"}));
    assert_eq!(proxy.response(&json!(41))["error"]["code"], -32010);
    assert!(proxy.finish().success());
}

#[test]
fn handshake_refusals_refuse_the_session() {
    for code in [-32000, -32001, -32002] {
        let scratch = Scratch::new();
        let guardian = TestGuardian::http(
            &scratch,
            &json!({"hello": {"action": "refuse", "code": code, "message": format!("no session ({code})")}}),
        );
        let config = guardian.proxy_config(&scratch, "", "");
        let why = format!("the Guardian refused the session ({code}:");
        drive_refused_session(&config, &why);
        assert_eq!(guardian.hello_records()[0]["action"], "hello:refuse");
        assert_refused_session(&scratch, &guardian, &why);
    }
}

#[test]
fn a_refused_session_does_not_wait_on_the_guardian() {
    // The Guardian refuses the handshake, then never answers anything: the
    // refused session must still answer the client at once and end.
    let scratch = Scratch::new();
    let guardian = TestGuardian::http(
        &scratch,
        &json!({"hello": {"action": "refuse", "code": -32000}, "default": {"action": "silent"}}),
    );
    let config = guardian.proxy_config(&scratch, "", "");
    drive_refused_session(&config, "the Guardian refused the session (-32000:");
    assert_refused_session(&scratch, &guardian, "(-32000:");
}

#[test]
fn silent_handshake_with_startup_posture_proceed_runs_unguarded() {
    let scratch = Scratch::new();
    let guardian = TestGuardian::http(&scratch, &json!({"hello": {"action": "silent"}}));
    let config = guardian.proxy_config(&scratch, "timeout_ms = 400\n", "");
    let mut proxy = Proxy::start(&config);
    let started = Instant::now();
    let init = proxy.initialize(json!({}));
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    assert!(started.elapsed() >= Duration::from_millis(350));
    proxy.send(&tool_call(50, "echo", json!({"text": "unguarded"})));
    assert_eq!(text(&proxy.response(&json!(50))), "unguarded");
    assert!(proxy.finish().success());

    assert_eq!(calls_to(&scratch, "echo").len(), 1);
    let entries = scratch.audit_entries();
    for entry in &entries {
        assert_eq!(entry["decision"], "allow", "{entry}");
        assert_eq!(entry["decision_source"], "posture", "{entry}");
        assert!(
            detail(entry).starts_with("unguarded session: the Guardian handshake failed"),
            "{entry}"
        );
        assert!(detail(entry).contains("400 ms"), "{entry}");
    }
    for step_type in [
        "steps/sessionStart",
        "protocols/MCP/tools/call",
        "steps/toolCallRequest",
        "steps/toolCallResult",
        "steps/sessionEnd",
    ] {
        assert!(
            !entries_of(&entries, step_type).is_empty(),
            "no bypass recorded for {step_type}"
        );
    }
    assert_eq!(guardian.hello_records()[0]["action"], "hello:silent");
    assert!(
        guardian.hook_records().is_empty(),
        "an unguarded session sent hooks"
    );
    assert_signed_and_chained(&guardian);
    scratch.assert_audit_verifies();
}

#[test]
fn silent_handshake_with_startup_posture_refuse_refuses_the_session() {
    let scratch = Scratch::new();
    let guardian = TestGuardian::http(&scratch, &json!({"hello": {"action": "silent"}}));
    let config = guardian.proxy_config(
        &scratch,
        "timeout_ms = 400\nstartup_posture = \"refuse\"\n",
        "",
    );
    drive_refused_session(&config, "the startup posture is refuse");
    assert_eq!(guardian.hello_records()[0]["action"], "hello:silent");
    assert_refused_session(&scratch, &guardian, "the startup posture is refuse");
}

#[test]
fn hooks_outside_methods_evaluated_are_not_sent() {
    let scratch = Scratch::new();
    let guardian = TestGuardian::http(
        &scratch,
        &json!({"hello": {"methods_evaluated": ["steps/toolCallRequest"]},
                "default": {"action": "deny", "reasoning": "only tool requests may be judged"},
                "rules": [{"method": "steps/toolCallRequest", "tool": "echo", "then": {"action": "allow"}}]}),
    );
    let config = guardian.proxy_config(&scratch, "", "");
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(60, "echo", json!({"text": "evaluated"})));
    assert_eq!(text(&proxy.response(&json!(60))), "evaluated");
    proxy.send(&tool_call(61, "add", json!({"a": 1, "b": 2})));
    block_data(&proxy.response(&json!(61)));
    assert!(proxy.finish().success());

    assert_eq!(calls_to(&scratch, "echo").len(), 1);
    assert!(calls_to(&scratch, "add").is_empty());
    let entries = scratch.audit_entries();
    for entry in &entries {
        if entry["step_type"] == "steps/toolCallRequest" {
            assert_eq!(entry["decision_source"], "remote", "{entry}");
        } else {
            assert_eq!(entry["decision_source"], "not_evaluated", "{entry}");
            assert_eq!(entry["decision"], "allow", "{entry}");
            assert!(entry.get("guardian_chain_hash").is_none(), "{entry}");
        }
    }
    for step_type in [
        "steps/sessionStart",
        "agbom/snapshot",
        "protocols/MCP/tools/call",
        "steps/toolCallResult",
        "steps/sessionEnd",
    ] {
        assert!(
            !entries_of(&entries, step_type).is_empty(),
            "{step_type} not audited"
        );
    }
    let sent: Vec<Value> = guardian
        .hook_records()
        .iter()
        .map(|r| r["envelope"]["method"].clone())
        .collect();
    assert_eq!(
        sent,
        vec![
            json!("steps/toolCallRequest"),
            json!("steps/toolCallRequest")
        ]
    );
    assert_eq!(
        hook_entry(&entries, "steps/toolCallRequest", &json!(61))["decision"],
        "deny"
    );
    assert_remote_entries_witness_heads(&entries, &guardian);
    assert_signed_and_chained(&guardian);
    scratch.assert_audit_verifies();
}

// ------------------------------------------------------------ over stdio

#[test]
fn stdio_allow_deny_and_modify() {
    let scratch = Scratch::new();
    let guardian = TestGuardian::stdio(
        &scratch,
        &json!({"rules": [
            {"method": "steps/toolCallRequest", "tool": "get-env", "then":
                {"action": "deny", "reasoning": "no environment dumps"}},
            {"method": "steps/toolCallRequest", "tool": "add", "then":
                {"action": "modify", "reasoning": "b is pinned",
                 "modifications": {"parameter_overrides": {"b": 100}}}},
            {"method": "steps/toolCallResult", "tool": "lookup-user", "then":
                {"action": "modify", "reasoning": "no SSNs",
                 "modifications": {"redactions": [{"path": "/outputs/0/value"}]}}}]}),
    );
    let config = guardian.proxy_config(&scratch, "", "");
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(70, "echo", json!({"text": "over stdio"})));
    assert_eq!(text(&proxy.response(&json!(70))), "over stdio");
    proxy.send(&tool_call(71, "get-env", json!({})));
    let denied = proxy.response(&json!(71));
    assert!(text(&denied).contains("no environment dumps"), "{denied}");
    block_data(&denied);
    proxy.send(&tool_call(72, "add", json!({"a": 1, "b": 2})));
    assert_eq!(text(&proxy.response(&json!(72))), "101");
    proxy.send(&tool_call(73, "lookup-user", json!({"name": "Ada"})));
    assert_eq!(text(&proxy.response(&json!(73))), "[REDACTED]");
    assert!(proxy.finish().success());

    assert_eq!(calls_to(&scratch, "echo").len(), 1);
    assert!(calls_to(&scratch, "get-env").is_empty());
    assert_eq!(
        calls_to(&scratch, "add")[0]["params"]["arguments"],
        json!({"a": 1, "b": 100})
    );
    let entries = scratch.audit_entries();
    for (step_type, id, decision, action) in [
        ("steps/toolCallRequest", 70, "allow", "forwarded"),
        ("steps/toolCallRequest", 71, "deny", "blocked"),
        ("steps/toolCallRequest", 72, "modify", "rewritten"),
        ("steps/toolCallResult", 73, "modify", "rewritten"),
    ] {
        let entry = hook_entry(&entries, step_type, &json!(id));
        assert_eq!(entry["decision"], decision, "{entry}");
        assert_eq!(entry["decision_source"], "remote", "{entry}");
        assert_eq!(entry["action"], action, "{entry}");
    }
    assert!(entries.iter().all(|e| e["decision_source"] == "remote"));
    let hellos = guardian.hello_records();
    assert_eq!(hellos.len(), 1);
    assert_eq!(
        hellos[0]["envelope"]["params"]["payload"]["transports_supported"],
        json!(["stdio"])
    );
    assert_remote_entries_witness_heads(&entries, &guardian);
    assert_signed_and_chained(&guardian);
    scratch.assert_audit_verifies();
}

#[test]
fn stdio_late_answer_falls_back_to_the_posture_and_is_then_ignored() {
    let scratch = Scratch::new();
    let guardian = TestGuardian::stdio(
        &scratch,
        &json!({"hello": quick_hello(), "rules": [
            {"method": "steps/toolCallRequest", "tool": "echo", "then":
                {"action": "late", "delay_ms": 900, "then":
                    {"action": "deny", "reasoning": "too late to matter"}}}]}),
    );
    let config = guardian.proxy_config(&scratch, "", "");
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    let started = Instant::now();
    proxy.send(&tool_call(80, "echo", json!({"text": "not waited for"})));
    assert_eq!(text(&proxy.response(&json!(80))), "not waited for");
    assert!(started.elapsed() < Duration::from_millis(850));
    // The late deny arrives while the next calls are decided; it must not
    // be taken as their answer.
    for id in 81..=83 {
        proxy.send(&tool_call(id, "add", json!({"a": id, "b": 0})));
        assert_eq!(text(&proxy.response(&json!(id))), id.to_string());
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(proxy.finish().success());

    assert_eq!(calls_to(&scratch, "echo").len(), 1);
    assert_eq!(calls_to(&scratch, "add").len(), 3);
    let entries = scratch.audit_entries();
    let late = hook_entry(&entries, "steps/toolCallRequest", &json!(80));
    assert_eq!(late["decision"], "allow");
    assert_eq!(late["decision_source"], "posture");
    assert_eq!(late["action"], "forwarded");
    assert!(
        detail(late).contains("did not answer within 400 ms"),
        "{late}"
    );
    for id in 81..=83 {
        let entry = hook_entry(&entries, "steps/toolCallRequest", &json!(id));
        assert_eq!(entry["decision"], "allow");
        assert_eq!(entry["decision_source"], "remote");
    }
    let records = guardian.records();
    assert_eq!(record_of(&records, late)["action"], "late:deny");
    assert_remote_entries_witness_heads(&entries, &guardian);
    assert_signed_and_chained(&guardian);
    scratch.assert_audit_verifies();
}

#[test]
fn stdio_bad_signature_fails_closed() {
    let scratch = Scratch::new();
    let guardian = TestGuardian::stdio(
        &scratch,
        &json!({"hello": {"on_decision_failure": "proceed"}, "rules": [
            {"method": "steps/toolCallRequest", "tool": "echo", "then": {"action": "bad_signature"}}]}),
    );
    let config = guardian.proxy_config(&scratch, "on_decision_failure = \"proceed\"\n", "");
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(90, "echo", json!({"text": "forged allow"})));
    let reply = proxy.response(&json!(90));
    assert_eq!(block_data(&reply)["decision"], "deny");
    proxy.send(&tool_call(91, "add", json!({"a": 1, "b": 1})));
    assert_eq!(text(&proxy.response(&json!(91))), "2");
    assert!(proxy.finish().success());

    assert!(calls_to(&scratch, "echo").is_empty(), "a forged allow ran");
    let entries = scratch.audit_entries();
    let entry = hook_entry(&entries, "steps/toolCallRequest", &json!(90));
    assert_eq!(entry["decision"], "deny");
    assert_eq!(entry["decision_source"], "posture");
    assert_eq!(entry["action"], "blocked");
    assert!(detail(entry).contains("not authenticated"), "{entry}");
    let records = guardian.records();
    assert_eq!(record_of(&records, entry)["action"], "bad_signature:allow");
    assert_remote_entries_witness_heads(&entries, &guardian);
    assert_signed_and_chained(&guardian);
    scratch.assert_audit_verifies();
}

/// The Guardian child exits while deciding a hook: that hook and every
/// later one get the failure posture.
fn stdio_drop(local_posture: &str) {
    let scratch = Scratch::new();
    let guardian = TestGuardian::stdio(
        &scratch,
        &json!({"rules": [
            {"method": "steps/toolCallRequest", "tool": "echo", "then": {"action": "drop"}}]}),
    );
    let config = guardian.proxy_config(
        &scratch,
        &format!("on_decision_failure = {local_posture:?}\n"),
        "",
    );
    let allowed = local_posture == "proceed";
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(100, "echo", json!({"text": "guardian gone"})));
    let first = proxy.response(&json!(100));
    proxy.send(&tool_call(101, "add", json!({"a": 2, "b": 3})));
    let later = proxy.response(&json!(101));
    if allowed {
        assert_eq!(text(&first), "guardian gone");
        assert_eq!(text(&later), "5");
    } else {
        assert_eq!(block_data(&first)["decision"], "deny");
        assert_eq!(block_data(&later)["decision"], "deny");
    }
    assert!(proxy.finish().success());

    let expected_calls = usize::from(allowed);
    assert_eq!(calls_to(&scratch, "echo").len(), expected_calls);
    assert_eq!(calls_to(&scratch, "add").len(), expected_calls);
    let entries = scratch.audit_entries();
    let (decision, action) = if allowed {
        ("allow", "forwarded")
    } else {
        ("deny", "blocked")
    };
    for id in [100, 101] {
        // With posture deny the first stage (the wrapped hook) already blocks.
        let step_type = if id == 100 || allowed {
            "steps/toolCallRequest"
        } else {
            "protocols/MCP/tools/call"
        };
        let entry = hook_entry(&entries, step_type, &json!(id));
        assert_eq!(entry["decision"], decision, "{entry}");
        assert_eq!(entry["decision_source"], "posture", "{entry}");
        assert_eq!(entry["action"], action, "{entry}");
        assert!(detail(entry).contains("transport failure"), "{entry}");
    }
    // Nothing after the drop reached the Guardian.
    let hooks = guardian.hook_records();
    assert_eq!(hooks.last().unwrap()["action"], "drop");
    assert_eq!(
        hooks.last().unwrap()["envelope"]["method"],
        "steps/toolCallRequest"
    );
    let end = entries_of(&entries, "steps/sessionEnd");
    assert_eq!(end.len(), 1);
    assert_eq!(end[0]["decision_source"], "posture");
    assert_remote_entries_witness_heads(&entries, &guardian);
    assert_signed_and_chained(&guardian);
    scratch.assert_audit_verifies();
}

#[test]
fn stdio_guardian_exit_with_posture_proceed_allows_later_hooks() {
    stdio_drop("proceed");
}

#[test]
fn stdio_guardian_exit_with_posture_deny_denies_later_hooks() {
    stdio_drop("deny");
}

// ------------------------------------------------------- dead Guardian

fn dead_guardian(local_posture: &str) -> (Scratch, Vec<Value>) {
    let scratch = Scratch::new();
    let guardian = TestGuardian::unreachable(&scratch);
    let config = guardian.proxy_config(
        &scratch,
        &format!("on_decision_failure = {local_posture:?}\ntimeout_ms = 500\n"),
        "",
    );
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    let mut replies = Vec::new();
    for (id, tool, arguments) in [
        (110, "echo", json!({"text": "anyone there?"})),
        (111, "add", json!({"a": 20, "b": 22})),
        (112, "get-env", json!({})),
    ] {
        proxy.send(&tool_call(id, tool, arguments));
        replies.push(proxy.response(&json!(id)));
    }
    assert!(proxy.finish().success());
    scratch.assert_audit_verifies();
    (scratch, replies)
}

#[test]
fn dead_guardian_with_posture_deny_blocks_every_tool_call() {
    let (scratch, replies) = dead_guardian("deny");
    for reply in &replies {
        assert_eq!(
            block_data(reply)["decision"],
            "deny",
            "a tool call went through with no Guardian and posture deny: {reply}"
        );
    }
    let calls: Vec<Value> = scratch
        .server_received()
        .into_iter()
        .filter(|m| m["method"] == "tools/call")
        .collect();
    assert!(calls.is_empty(), "tool calls reached the server: {calls:?}");
    let entries = scratch.audit_entries();
    for id in 110..=112 {
        assert!(
            entries.iter().any(|e| e["mcp_id"] == json!(id)
                && e["decision"] == "deny"
                && e["action"] == "blocked"),
            "no audited block of call {id}: {entries:#?}"
        );
    }
}

#[test]
fn dead_guardian_with_posture_proceed_lets_everything_through_and_audits_each_bypass() {
    let (scratch, replies) = dead_guardian("proceed");
    assert_eq!(text(&replies[0]), "anyone there?");
    assert_eq!(text(&replies[1]), "42");
    assert_ne!(replies[2]["result"]["isError"], true, "{}", replies[2]);
    for tool in ["echo", "add", "get-env"] {
        assert_eq!(calls_to(&scratch, tool).len(), 1, "{tool}");
    }
    let entries = scratch.audit_entries();
    assert!(!entries.is_empty());
    for entry in &entries {
        assert_eq!(entry["decision_source"], "posture", "{entry}");
        assert_eq!(entry["decision"], "allow", "{entry}");
        assert!(
            detail(entry).contains("Guardian transport failure"),
            "{entry}"
        );
    }
    for id in 110..=112 {
        let id = json!(id);
        hook_entry(&entries, "steps/toolCallRequest", &id);
        hook_entry(&entries, "steps/toolCallResult", &id);
        let wrapped = entries_of(&entries, "protocols/MCP/tools/call")
            .into_iter()
            .filter(|e| e["mcp_id"] == id)
            .count();
        assert_eq!(wrapped, 2, "request and response of call {id}");
    }
    assert_eq!(entries_of(&entries, "steps/sessionEnd").len(), 1);
}

// ------------------------------------------------- batches and nonces

/// `[guardian]` keys turning batching on.
const BATCH: &str = "batch = true\n";

/// The Guardian's hook records, each batch's records grouped (by the
/// record's `batch` number), single requests alone, in processing order.
/// Arrays the Guardian refused are left out.
fn hook_groups(guardian: &TestGuardian) -> Vec<Vec<Value>> {
    let mut groups: Vec<Vec<Value>> = Vec::new();
    for record in guardian.hook_records() {
        if record["envelope"].is_array() {
            continue;
        }
        let batch = record.get("batch").cloned();
        match groups.last_mut() {
            Some(group) if batch.is_some() && group[0].get("batch") == batch.as_ref() => {
                group.push(record)
            }
            _ => groups.push(vec![record]),
        }
    }
    groups
}

/// The methods of each batch the Guardian accepted, in order.
fn batched_methods(guardian: &TestGuardian) -> Vec<Vec<Value>> {
    hook_groups(guardian)
        .into_iter()
        .filter(|group| group[0].get("batch").is_some())
        .map(|group| {
            for (index, record) in group.iter().enumerate() {
                assert_eq!(record["batch_index"], index, "{record}");
            }
            group
                .iter()
                .map(|record| record["envelope"]["method"].clone())
                .collect()
        })
        .collect()
}

/// [`assert_signed_and_chained`] for a proxy that batches: every request
/// validly signed (arrays the Guardian refused are only the refusal), and
/// every element of one batch carries the head the proxy knew when it sent
/// the batch; after it, the newest head the proxy accepted from the batch.
/// A batch with a `late` element is one reply that came too late (as in
/// these tests), so none of its heads were accepted.
fn assert_signed_and_chained_in_batches(guardian: &TestGuardian) {
    for record in guardian.records() {
        if record["envelope"]["method"] == "system/ping" {
            continue;
        }
        if record["envelope"].is_array() {
            assert_eq!(record["action"], "reject:batch_not_supported", "{record}");
            continue;
        }
        assert_eq!(
            record["signature_valid"], true,
            "the Guardian could not verify a request: {record}"
        );
    }
    let mut head: Option<Value> = None;
    for group in hook_groups(guardian) {
        let mut next = head.clone();
        let lost = group.len() > 1
            && group.iter().any(|r| {
                r["action"]
                    .as_str()
                    .unwrap_or_default()
                    .starts_with("late:")
            });
        for record in &group {
            let sent = record["envelope"]["params"]["metadata"]
                .get("session_state")
                .map(|state| state["chain_hash"].clone());
            assert_eq!(
                sent, head,
                "hook {} did not carry the head known when it was sent",
                record["envelope"]["method"]
            );
            if !lost && ACCEPTED.contains(&record["action"].as_str().unwrap_or_default()) {
                next = Some(record["chain_hash"].clone());
            }
        }
        head = next;
    }
}

/// The audit entry of the wrapped `tools/call` hook about the message with
/// `mcp_id` travelling in `direction`.
fn wrapped_entry<'a>(entries: &'a [Value], mcp_id: &Value, direction: &str) -> &'a Value {
    let found: Vec<&Value> = entries_of(entries, "protocols/MCP/tools/call")
        .into_iter()
        .filter(|e| &e["mcp_id"] == mcp_id && e["direction"] == direction)
        .collect();
    assert_eq!(found.len(), 1, "{direction} {mcp_id}: {entries:#?}");
    found[0]
}

fn tools_call_pair(result: bool) -> Vec<Value> {
    let step = if result {
        "steps/toolCallResult"
    } else {
        "steps/toolCallRequest"
    };
    vec![json!("protocols/MCP/tools/call"), json!(step)]
}

#[test]
fn batch_sends_both_hooks_of_a_tools_call_in_one_request() {
    let scratch = Scratch::new();
    let guardian = TestGuardian::http(&scratch, &json!({"batch": true}));
    let config = guardian.proxy_config(&scratch, BATCH, "");
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(200, "echo", json!({"text": "batched"})));
    assert_eq!(text(&proxy.response(&json!(200))), "batched");
    assert!(proxy.finish().success());

    assert_eq!(calls_to(&scratch, "echo").len(), 1);
    // The request's two hooks in one HTTP request, then the response's.
    assert_eq!(
        batched_methods(&guardian),
        vec![tools_call_pair(false), tools_call_pair(true)]
    );
    let groups = hook_groups(&guardian);
    let request_batch = groups
        .iter()
        .find(|g| g.len() == 2 && g[1]["envelope"]["method"] == "steps/toolCallRequest")
        .expect("the request's batch");
    assert_eq!(request_batch[0]["envelope"]["params"]["payload"]["id"], 200);
    assert_eq!(
        request_batch[1]["envelope"]["params"]["payload"]["arguments"]["text"]["value"],
        "batched"
    );
    // The result hook refers to the batched toolCallRequest.
    let result = guardian_hooks_for(&guardian, "steps/toolCallResult", "echo");
    assert_eq!(
        result[0]["envelope"]["params"]["payload"]["request_id_ref"],
        request_batch[1]["envelope"]["params"]["request_id"]
    );

    let entries = scratch.audit_entries();
    let id = json!(200);
    for entry in [
        wrapped_entry(&entries, &id, "client_to_server"),
        hook_entry(&entries, "steps/toolCallRequest", &id),
        wrapped_entry(&entries, &id, "server_to_client"),
        hook_entry(&entries, "steps/toolCallResult", &id),
    ] {
        assert_eq!(entry["decision"], "allow", "{entry}");
        assert_eq!(entry["decision_source"], "remote", "{entry}");
        assert_eq!(entry["action"], "forwarded", "{entry}");
    }
    assert_eq!(
        guardian.hook_records().len(),
        entries.len(),
        "one Guardian element per audited hook"
    );
    assert_remote_entries_witness_heads(&entries, &guardian);
    assert_signed_and_chained_in_batches(&guardian);
    scratch.assert_audit_verifies();
}

#[test]
fn batch_deny_in_the_wrapped_stage_stops_the_message() {
    let scratch = Scratch::new();
    let guardian = TestGuardian::http(
        &scratch,
        &json!({"batch": true, "rules": [{"method": "protocols/MCP/tools/call", "tool": "get-env",
            "then": {"action": "deny", "reasoning": "no environment dumps"}}]}),
    );
    let config = guardian.proxy_config(&scratch, BATCH, "");
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(201, "get-env", json!({})));
    let reply = proxy.response(&json!(201));
    assert!(text(&reply).contains("no environment dumps"), "{reply}");
    block_data(&reply);
    proxy.send(&tool_call(202, "echo", json!({"text": "next"})));
    assert_eq!(text(&proxy.response(&json!(202))), "next");
    assert!(proxy.finish().success());

    assert!(
        calls_to(&scratch, "get-env").is_empty(),
        "a denied call ran"
    );
    // The step was asked along with the wrapped hook, and its allow dropped.
    let groups = hook_groups(&guardian);
    let denied = groups
        .iter()
        .find(|g| g[0]["action"] == "deny")
        .expect("the denied batch");
    assert_eq!(denied.len(), 2);
    assert_eq!(denied[1]["envelope"]["method"], "steps/toolCallRequest");
    assert_eq!(denied[1]["action"], "allow");

    let entries = scratch.audit_entries();
    let id = json!(201);
    let entry = wrapped_entry(&entries, &id, "client_to_server");
    assert_eq!(entry["decision"], "deny");
    assert_eq!(entry["decision_source"], "remote");
    assert_eq!(entry["action"], "blocked");
    assert_eq!(block_data(&reply)["audit_entry_id"], entry["entry_id"]);
    assert!(
        entries
            .iter()
            .filter(|e| e["mcp_id"] == id)
            .all(|e| e["step_type"] == "protocols/MCP/tools/call"),
        "a stage after the deny was audited: {entries:#?}"
    );
    assert_eq!(
        hook_entry(&entries, "steps/toolCallRequest", &json!(202))["decision_source"],
        "remote"
    );
    assert_remote_entries_witness_heads(&entries, &guardian);
    assert_signed_and_chained_in_batches(&guardian);
    scratch.assert_audit_verifies();
}

#[test]
fn batch_modify_in_the_wrapped_stage_asks_the_step_again_about_the_rewritten_call() {
    let scratch = Scratch::new();
    let guardian = TestGuardian::http(
        &scratch,
        &json!({"batch": true, "rules": [{"method": "protocols/MCP/tools/call", "tool": "add",
            "times": 1, "then": {"action": "modify", "reasoning": "b is pinned",
                     "modifications": {"parameter_overrides": {"b": 1000}}}}]}),
    );
    let config = guardian.proxy_config(&scratch, BATCH, "");
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(203, "add", json!({"a": 1, "b": 2})));
    assert_eq!(text(&proxy.response(&json!(203))), "1001");
    assert!(proxy.finish().success());

    assert_eq!(
        calls_to(&scratch, "add")[0]["params"]["arguments"],
        json!({"a": 1, "b": 1000})
    );
    let steps = guardian_hooks_for(&guardian, "steps/toolCallRequest", "add");
    assert_eq!(steps.len(), 2, "asked ahead, then again: {steps:#?}");
    let b =
        |record: &Value| record["envelope"]["params"]["payload"]["arguments"]["b"]["value"].clone();
    // Ahead, in the batch, about the call as read; again, alone, as rewritten.
    assert_eq!(steps[0]["batch_index"], 1);
    assert_eq!(b(&steps[0]), 2);
    assert!(steps[1].get("batch").is_none(), "{}", steps[1]);
    assert_eq!(b(&steps[1]), 1000);

    let entries = scratch.audit_entries();
    let id = json!(203);
    let wrapped = wrapped_entry(&entries, &id, "client_to_server");
    assert_eq!(wrapped["decision"], "modify");
    assert_eq!(wrapped["action"], "rewritten");
    let step = hook_entry(&entries, "steps/toolCallRequest", &id);
    assert_eq!(step["decision"], "allow");
    assert_eq!(step["decision_source"], "remote");
    assert_eq!(
        step["step_id"], steps[1]["envelope"]["params"]["request_id"],
        "the audited step is the one asked about the rewritten call"
    );
    // The response's pair still goes as one batch.
    assert_eq!(
        batched_methods(&guardian),
        vec![tools_call_pair(false), tools_call_pair(true)]
    );
    assert_remote_entries_witness_heads(&entries, &guardian);
    assert_signed_and_chained_in_batches(&guardian);
    scratch.assert_audit_verifies();
}

#[test]
fn batch_element_failures_resolve_like_single_hooks() {
    let scratch = Scratch::new();
    let rule = |tool: &str, then: Value| json!({"method": "steps/toolCallRequest", "tool": tool, "times": 1, "then": then});
    let guardian = TestGuardian::http(
        &scratch,
        &json!({"batch": true,
                "hello": {"on_decision_failure": "proceed",
                          "timeout_config": {"default_ms": 500, "per_method_ms": {}}},
                "rules": [
                    rule("echo", json!({"action": "bad_signature"})),
                    rule("add", json!({"action": "wrong_request_id"})),
                    rule("lookup-user", json!({"action": "late", "delay_ms": 900,
                                               "then": {"action": "allow"}}))]}),
    );
    let config = guardian.proxy_config(&scratch, BATCH, "");
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(204, "echo", json!({"text": "forged"})));
    assert_eq!(block_data(&proxy.response(&json!(204)))["decision"], "deny");
    proxy.send(&tool_call(205, "add", json!({"a": 1, "b": 2})));
    assert_eq!(block_data(&proxy.response(&json!(205)))["decision"], "deny");
    let started = Instant::now();
    proxy.send(&tool_call(206, "lookup-user", json!({"name": "Ada"})));
    let late = proxy.response(&json!(206));
    assert!(
        started.elapsed() < Duration::from_millis(850),
        "the proxy waited past the batch deadline ({:?})",
        started.elapsed()
    );
    assert!(text(&late).contains("Ada"), "posture proceed: {late}");
    assert!(proxy.finish().success());

    assert!(calls_to(&scratch, "echo").is_empty(), "a forged allow ran");
    assert!(calls_to(&scratch, "add").is_empty(), "a misbound allow ran");
    assert_eq!(calls_to(&scratch, "lookup-user").len(), 1);
    let entries = scratch.audit_entries();
    for (id, why) in [
        (204, "not authenticated"),
        (205, "does not match the request"),
    ] {
        let id = json!(id);
        // The wrapped element of the same batch was fine and applied.
        let wrapped = wrapped_entry(&entries, &id, "client_to_server");
        assert_eq!(wrapped["decision_source"], "remote", "{wrapped}");
        assert_eq!(wrapped["action"], "forwarded", "{wrapped}");
        let step = hook_entry(&entries, "steps/toolCallRequest", &id);
        assert_eq!(step["decision"], "deny", "{step}");
        assert_eq!(step["decision_source"], "posture", "{step}");
        assert_eq!(step["action"], "blocked", "{step}");
        assert!(detail(step).contains(why), "{step}");
    }
    // The whole batch missed its deadline: both of its hooks fell back.
    let id = json!(206);
    for entry in [
        wrapped_entry(&entries, &id, "client_to_server"),
        hook_entry(&entries, "steps/toolCallRequest", &id),
    ] {
        assert_eq!(entry["decision"], "allow", "{entry}");
        assert_eq!(entry["decision_source"], "posture", "{entry}");
        assert!(
            detail(entry).contains("did not answer within 500 ms"),
            "{entry}"
        );
    }
    let records = guardian.records();
    assert_eq!(
        record_of(&records, hook_entry(&entries, "steps/toolCallRequest", &id))["action"],
        "late:allow"
    );
    assert_remote_entries_witness_heads(&entries, &guardian);
    assert_signed_and_chained_in_batches(&guardian);
    scratch.assert_audit_verifies();
}

/// With `batch = true` and a Guardian that answers arrays with -32600 (the
/// test Guardian's default): one array tried, then one hook at a time.
fn without_batch_support(stdio: bool) {
    let scratch = Scratch::new();
    let script = json!({"rules": [{"method": "steps/toolCallRequest", "tool": "get-env",
        "then": {"action": "deny", "reasoning": "no environment dumps"}}]});
    let guardian = if stdio {
        TestGuardian::stdio(&scratch, &script)
    } else {
        TestGuardian::http(&scratch, &script)
    };
    let config = guardian.proxy_config(&scratch, BATCH, "");
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(210, "echo", json!({"text": "one at a time"})));
    assert_eq!(text(&proxy.response(&json!(210))), "one at a time");
    proxy.send(&tool_call(211, "get-env", json!({})));
    block_data(&proxy.response(&json!(211)));
    proxy.send(&tool_call(212, "add", json!({"a": 2, "b": 3})));
    assert_eq!(text(&proxy.response(&json!(212))), "5");
    assert!(proxy.finish().success());

    // One array was tried, refused, and never tried again.
    let arrays: Vec<Value> = guardian
        .records()
        .into_iter()
        .filter(|r| r["envelope"].is_array())
        .collect();
    assert_eq!(arrays.len(), 1, "{arrays:#?}");
    assert_eq!(arrays[0]["action"], "reject:batch_not_supported");
    assert_eq!(
        arrays[0]["envelope"][0]["method"],
        "protocols/MCP/tools/call"
    );
    assert_eq!(arrays[0]["envelope"][1]["method"], "steps/toolCallRequest");
    assert!(batched_methods(&guardian).is_empty());

    assert_eq!(calls_to(&scratch, "echo").len(), 1);
    assert!(calls_to(&scratch, "get-env").is_empty());
    assert_eq!(calls_to(&scratch, "add").len(), 1);
    let entries = scratch.audit_entries();
    for entry in &entries {
        assert_eq!(entry["decision_source"], "remote", "{entry}");
    }
    assert_eq!(
        hook_entry(&entries, "steps/toolCallRequest", &json!(211))["decision"],
        "deny"
    );
    // Sequential: a denied step's message has no result hooks, and every
    // hook the Guardian got is one audit entry.
    let singles: Vec<Value> = guardian
        .hook_records()
        .into_iter()
        .filter(|r| !r["envelope"].is_array())
        .collect();
    assert_eq!(singles.len(), entries.len());
    assert_remote_entries_witness_heads(&entries, &guardian);
    assert_signed_and_chained_in_batches(&guardian);
    scratch.assert_audit_verifies();
}

#[test]
fn batch_with_a_guardian_without_batches_goes_one_hook_at_a_time() {
    without_batch_support(false);
}

#[test]
fn stdio_batch_with_a_guardian_without_batches_goes_one_hook_at_a_time() {
    without_batch_support(true);
}

#[test]
fn nonce_is_fresh_random_hex_on_every_signed_request() {
    let scratch = Scratch::new();
    let guardian = TestGuardian::http(&scratch, &json!({"batch": true}));
    let config = guardian.proxy_config(&scratch, "nonce = true\nbatch = true\n", "");
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    for id in 220..223 {
        proxy.send(&tool_call(id, "echo", json!({"text": "nonce"})));
        assert_eq!(text(&proxy.response(&json!(id))), "nonce");
    }
    assert!(proxy.finish().success());

    let records = guardian.records();
    let mut nonces = std::collections::HashSet::new();
    let mut signed = 0;
    for record in &records {
        let params = &record["envelope"]["params"];
        if record["envelope"]["method"] == "system/ping" {
            assert!(params.get("nonce").is_none(), "{record}");
            continue;
        }
        signed += 1;
        assert_eq!(record["signature_valid"], true, "{record}");
        let nonce = params["nonce"]
            .as_str()
            .unwrap_or_else(|| panic!("no nonce: {record}"));
        assert_eq!(nonce.len(), 32, "{nonce}");
        assert!(
            nonce
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "{nonce}"
        );
        assert!(nonces.insert(nonce.to_owned()), "nonce reused: {nonce}");
    }
    // handshake, sessionStart, agbom/snapshot, initialize and
    // notifications/initialized wrapped, 3 × 4 tools/call hooks, sessionEnd.
    assert!(signed >= 14, "{signed} signed requests");
    assert!(guardian.hello_records()[0]["envelope"]["params"]["nonce"].is_string());
    assert_eq!(batched_methods(&guardian).len(), 6);
    let entries = scratch.audit_entries();
    assert!(entries.iter().all(|e| e["decision_source"] == "remote"));
    assert_signed_and_chained_in_batches(&guardian);
    scratch.assert_audit_verifies();
}

#[test]
fn stdio_batch_applies_each_stage_and_its_prefetched_step_decision() {
    let scratch = Scratch::new();
    let guardian = TestGuardian::stdio(
        &scratch,
        &json!({"batch": true, "rules": [
            {"method": "steps/toolCallRequest", "tool": "get-env", "then":
                {"action": "deny", "reasoning": "no environment dumps"}},
            {"method": "steps/toolCallRequest", "tool": "add", "then":
                {"action": "modify", "reasoning": "b is pinned",
                 "modifications": {"parameter_overrides": {"b": 100}}}},
            {"method": "steps/toolCallResult", "tool": "lookup-user", "then":
                {"action": "modify", "reasoning": "no SSNs",
                 "modifications": {"redactions": [{"path": "/outputs/0/value"}]}}}]}),
    );
    let config = guardian.proxy_config(&scratch, BATCH, "");
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(230, "echo", json!({"text": "over stdio"})));
    assert_eq!(text(&proxy.response(&json!(230))), "over stdio");
    proxy.send(&tool_call(231, "get-env", json!({})));
    let denied = proxy.response(&json!(231));
    assert!(text(&denied).contains("no environment dumps"), "{denied}");
    proxy.send(&tool_call(232, "add", json!({"a": 1, "b": 2})));
    assert_eq!(text(&proxy.response(&json!(232))), "101");
    proxy.send(&tool_call(233, "lookup-user", json!({"name": "Ada"})));
    assert_eq!(text(&proxy.response(&json!(233))), "[REDACTED]");
    assert!(proxy.finish().success());

    assert_eq!(calls_to(&scratch, "echo").len(), 1);
    assert!(calls_to(&scratch, "get-env").is_empty());
    assert_eq!(
        calls_to(&scratch, "add")[0]["params"]["arguments"],
        json!({"a": 1, "b": 100})
    );
    // Every tools/call message went as one frame of two hooks: the denied
    // call has no response, so 4 request batches and 3 response batches.
    let batches = batched_methods(&guardian);
    let requests = batches
        .iter()
        .filter(|b| **b == tools_call_pair(false))
        .count();
    let responses = batches
        .iter()
        .filter(|b| **b == tools_call_pair(true))
        .count();
    assert_eq!(
        (requests, responses, batches.len()),
        (4, 3, 7),
        "{batches:#?}"
    );
    assert!(
        hook_groups(&guardian)
            .iter()
            .filter(|g| g[0].get("batch").is_none())
            .all(|g| g[0]["envelope"]["method"] != "steps/toolCallRequest"),
        "no step was asked again: nothing before it changed the message"
    );

    let entries = scratch.audit_entries();
    for (step_type, id, decision, action) in [
        ("steps/toolCallRequest", 230, "allow", "forwarded"),
        ("steps/toolCallRequest", 231, "deny", "blocked"),
        ("steps/toolCallRequest", 232, "modify", "rewritten"),
        ("steps/toolCallResult", 233, "modify", "rewritten"),
    ] {
        let entry = hook_entry(&entries, step_type, &json!(id));
        assert_eq!(entry["decision"], decision, "{entry}");
        assert_eq!(entry["decision_source"], "remote", "{entry}");
        assert_eq!(entry["action"], action, "{entry}");
        let wrapped = wrapped_entry(&entries, &json!(id), "client_to_server");
        assert_eq!(wrapped["action"], "forwarded", "{wrapped}");
    }
    assert!(entries.iter().all(|e| e["decision_source"] == "remote"));
    assert_eq!(
        guardian.hook_records().len(),
        entries.len(),
        "every element answered was applied"
    );
    assert_remote_entries_witness_heads(&entries, &guardian);
    assert_signed_and_chained_in_batches(&guardian);
    scratch.assert_audit_verifies();
}
