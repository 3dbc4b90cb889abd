//! Fault injection on the Guardian side: a remote Guardian that goes away
//! in the middle of a session and comes back as a new process on the same
//! port, knowing nothing of the session.

mod support;

use serde_json::{json, Value};
use support::faults::scrape;
use support::free_port;
use support::guardian::TestGuardian;
use support::{tool_call, Proxy, Scratch};

fn text(reply: &Value) -> &str {
    reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content: {reply}"))
}

/// The `steps/toolCallRequest` audit entry about the request `id`.
fn request_entry(entries: &[Value], id: i64) -> &Value {
    entries
        .iter()
        .find(|e| e["step_type"] == "steps/toolCallRequest" && e["mcp_id"] == id)
        .unwrap_or_else(|| panic!("no steps/toolCallRequest entry for {id}"))
}

#[test]
fn a_guardian_restart_mid_session_applies_the_posture_then_re_handshakes() {
    let scratch = Scratch::new();
    // The restarted Guardian checks the chain head the proxy witnesses: one
    // carried over from the old process would be a chain_mismatch.
    let script = json!({"check_chain_hash": true, "rules": [
        {"method": "steps/toolCallRequest", "tool": "get-env",
         "then": {"action": "deny", "reasoning": "no env dumps"}}]});
    let mut guardian = TestGuardian::http(&scratch, &script);
    let metrics = free_port();
    let config = guardian.proxy_config(
        &scratch,
        "on_decision_failure = \"deny\"\n",
        &format!("[metrics]\naddress = \"127.0.0.1:{metrics}\"\n"),
    );
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(1, "echo", json!({"text": "before"})));
    assert_eq!(text(&proxy.response(&json!(1))), "before");
    assert_eq!(guardian.hello_records().len(), 1);

    guardian.stop();
    proxy.send(&tool_call(2, "echo", json!({"text": "while down"})));
    let down = proxy.response(&json!(2));
    assert_eq!(down["result"]["isError"], true, "{down}");
    assert!(text(&down).contains("failure posture is deny"), "{down}");
    let failures = scrape(metrics);
    assert!(
        failures.contains("acs_proxy_decision_failures_total{"),
        "no decision failure counted:\n{failures}"
    );

    guardian.restart();
    proxy.send(&tool_call(3, "echo", json!({"text": "after"})));
    assert_eq!(text(&proxy.response(&json!(3))), "after");
    proxy.send(&tool_call(4, "get-env", json!({})));
    let denied = proxy.response(&json!(4));
    assert_eq!(denied["result"]["isError"], true, "{denied}");
    assert!(text(&denied).contains("no env dumps"), "{denied}");
    assert!(proxy.finish().success());

    assert_eq!(guardian.hello_records().len(), 2, "no re-handshake");
    let mismatches = guardian
        .hook_records()
        .into_iter()
        .filter(|r| r["action"] == "chain_mismatch")
        .count();
    assert_eq!(mismatches, 0);
    let entries = scratch.audit_entries();
    assert_eq!(request_entry(&entries, 1)["decision_source"], "remote");
    let posture: Vec<&Value> = entries
        .iter()
        .filter(|e| e["mcp_id"] == 2 && e["decision_source"] == "posture")
        .collect();
    assert_eq!(posture.len(), 1, "{entries:#?}");
    assert_eq!(posture[0]["action"], "blocked");
    assert_eq!(request_entry(&entries, 3)["decision_source"], "remote");
    let guarded = request_entry(&entries, 4);
    assert_eq!(guarded["decision_source"], "remote");
    assert_eq!(guarded["decision"], "deny");
    scratch.assert_audit_verifies();
}
