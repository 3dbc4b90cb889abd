//! `[policy] engine = "rego"` end to end: the built binary over stdio in
//! front of the demo server, the caller's roles from `[hooks]`, and the
//! `policy test` / `config check` tooling on real files.

mod support;

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};
use support::mcp_http::{client, McpHttp};
use support::{proxy_bin, repo_root, tool_call, Proxy, Scratch};

fn calls_to(scratch: &Scratch, tool: &str) -> usize {
    scratch
        .server_received()
        .into_iter()
        .filter(|m| m["method"] == "tools/call" && m["params"]["name"] == tool)
        .count()
}

/// The audit entry of the `steps/toolCallRequest` hook for `tool`'s `n`th call.
fn request_entries(scratch: &Scratch) -> Vec<Value> {
    scratch
        .audit_entries()
        .into_iter()
        .filter(|e| e["step_type"] == "steps/toolCallRequest")
        .collect()
}

/// A demo config whose caller has `roles` and whose policy is the example
/// library, with `extra` sections appended.
fn example_library_config(scratch: &Scratch, roles: &str, extra: &str) -> std::path::PathBuf {
    let policies = repo_root().join("examples/policies");
    scratch.demo_config(&format!(
        "[hooks]\nuser_id = \"alice\"\nroles = {roles}\n\n[policy]\nengine = \"rego\"\nrego = [{:?}]\ndata = {:?}\n{extra}",
        policies.join("*.rego").display().to_string(),
        policies.join("data.json").display().to_string(),
    ))
}

/// A demo config with the Rego module `rego` written beside it.
fn inline_config(scratch: &Scratch, hooks: &str, guardian: &str, rego: &str) -> std::path::PathBuf {
    std::fs::write(scratch.path("policy.rego"), rego).unwrap();
    scratch.demo_config(&format!(
        "[guardian]\nmode = \"embedded\"\n{guardian}\n\n[hooks]\nuser_id = \"alice\"\n{hooks}\n\n[policy]\nengine = \"rego\"\nrego = [\"policy.rego\"]\n"
    ))
}

fn text_of(reply: &Value) -> &str {
    reply["result"]["content"][0]["text"].as_str().unwrap_or("")
}

#[test]
fn the_example_library_allows_denies_and_redacts_by_role() {
    let scratch = Scratch::new();
    let config = example_library_config(&scratch, "[\"viewer\"]", "");
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(1, "echo", json!({"text": "hi"})));
    assert_eq!(text_of(&proxy.response(&json!(1))), "hi");
    proxy.send(&tool_call(2, "get-env", json!({})));
    let denied = proxy.response(&json!(2));
    assert_eq!(denied["result"]["isError"], true, "{denied}");
    assert!(text_of(&denied).contains("may call get-env"), "{denied}");
    proxy.send(&tool_call(3, "lookup-user", json!({"name": "Ada"})));
    let redacted = proxy.response(&json!(3));
    assert_eq!(
        text_of(&redacted),
        "name: Ada, email: ada@example.com, ssn: [REDACTED]"
    );
    assert!(proxy.finish().success());
    assert_eq!(calls_to(&scratch, "get-env"), 0, "a denied call ran");
    let entries = request_entries(&scratch);
    let deny = entries.iter().find(|e| e["decision"] == "deny").unwrap();
    assert_eq!(deny["rule"], "role-tool-allow-list");
    assert_eq!(deny["decision_source"], "embedded");
    assert_eq!(deny["reason_codes"], json!(["tool_not_allowed"]));
    scratch.assert_audit_verifies();

    // The same call from a developer goes through.
    let scratch = Scratch::new();
    let config = example_library_config(&scratch, "[\"developer\"]", "");
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(4, "get-env", json!({})));
    let reply = proxy.response(&json!(4));
    assert_ne!(reply["result"]["isError"], true, "{reply}");
    assert!(proxy.finish().success());
    assert_eq!(calls_to(&scratch, "get-env"), 1);
}

const BY_ARGUMENT_AND_ROLE: &str = r#"
package acs

import rego.v1

tool := input.params.payload.tool.name
roles := input.params.metadata.user_context.roles
call if input.method == "steps/toolCallRequest"

decision := {"decision": "deny", "reasoning": "no shouting", "reason_codes": ["shouting"]} if {
    call
    tool == "echo"
    text := input.params.payload.arguments.text.value
    upper(text) == text
}

decision := {
    "decision": "ask",
    "reasoning": "interns need approval for additions",
    "ask_details": {"question": "Allow this addition?", "timeout_seconds": 10, "timeout_disposition": "deny"},
} if {
    call
    tool == "add"
    "intern" in roles
}

decision := {"decision": "deny", "reasoning": "the tool describes secrets"} if {
    call
    input.context.route == "demo"
    contains(input.context.tool.description, "API key")
}
"#;

#[test]
fn rego_denies_by_argument_asks_by_role_and_reads_the_tool_definition() {
    let scratch = Scratch::new();
    let config = inline_config(&scratch, "roles = [\"intern\"]", "", BY_ARGUMENT_AND_ROLE);
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({"elicitation": {}}));
    proxy.send(&tool_call(1, "echo", json!({"text": "quiet"})));
    assert_eq!(text_of(&proxy.response(&json!(1))), "quiet");
    proxy.send(&tool_call(2, "echo", json!({"text": "LOUD"})));
    let shouted = proxy.response(&json!(2));
    assert!(text_of(&shouted).contains("no shouting"), "{shouted}");
    proxy.send(&tool_call(3, "get-env", json!({})));
    let secret = proxy.response(&json!(3));
    assert!(
        text_of(&secret).contains("the tool describes secrets"),
        "{secret}"
    );
    proxy.send(&tool_call(4, "add", json!({"a": 2, "b": 1})));
    let (ask, _) = proxy.recv_until(|m| m["method"] == "elicitation/create");
    let message = ask["params"]["message"].as_str().unwrap();
    assert!(message.contains("Allow this addition?"), "{message}");
    proxy.send(&json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"approve": true}}}));
    assert_eq!(text_of(&proxy.response(&json!(4))), "3");
    assert!(proxy.finish().success());
    assert_eq!(calls_to(&scratch, "echo"), 1);
    assert_eq!(calls_to(&scratch, "get-env"), 0);
    assert_eq!(calls_to(&scratch, "add"), 1);
    scratch.assert_audit_verifies();
}

const FAILING: &str = r#"
package acs

import rego.v1

tool := input.params.payload.tool.name
call if input.method == "steps/toolCallRequest"

# Two different values for one complete rule: a runtime error.
decision := {"decision": "allow"} if { call; tool == "echo" }
decision := {"decision": "deny", "reasoning": "conflict"} if { call; tool == "echo" }

# Not a valid ACS decision: deny needs a reasoning.
decision := {"decision": "deny"} if { call; tool == "lookup-user" }

decision := {"decision": "allow"} if { call; tool == "add" }
"#;

#[test]
fn an_evaluation_error_or_malformed_answer_applies_the_posture_and_the_session_goes_on() {
    let scratch = Scratch::new();
    let config = inline_config(&scratch, "", "on_decision_failure = \"deny\"", FAILING);
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(1, "echo", json!({"text": "x"})));
    let failed = proxy.response(&json!(1));
    assert_eq!(failed["result"]["isError"], true, "{failed}");
    assert!(
        text_of(&failed).contains("failure posture is deny"),
        "{failed}"
    );
    proxy.send(&tool_call(2, "lookup-user", json!({"name": "Ada"})));
    let malformed = proxy.response(&json!(2));
    assert_eq!(malformed["result"]["isError"], true, "{malformed}");
    proxy.send(&tool_call(3, "add", json!({"a": 1, "b": 1})));
    assert_eq!(text_of(&proxy.response(&json!(3))), "2");
    assert!(proxy.finish().success());
    assert_eq!(
        calls_to(&scratch, "echo") + calls_to(&scratch, "lookup-user"),
        0
    );
    let entries = request_entries(&scratch);
    let posture: Vec<&Value> = entries
        .iter()
        .filter(|e| e["decision_source"] == "posture")
        .collect();
    assert_eq!(posture.len(), 2, "{entries:#?}");
    let details: Vec<&str> = posture
        .iter()
        .map(|e| e["detail"].as_str().unwrap())
        .collect();
    assert!(
        details
            .iter()
            .any(|d| d.contains("policy evaluation failed")),
        "{details:?}"
    );
    assert!(
        details.iter().any(|d| d.contains("malformed")),
        "{details:?}"
    );
    scratch.assert_audit_verifies();
}

fn run(args: &[&str], dir: &Path) -> (bool, String, String) {
    let output = Command::new(proxy_bin())
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run acs-proxy");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn policy_test_passes_the_example_library_and_fails_a_broken_fixture() {
    let (ok, stdout, stderr) = run(&["policy", "test", "examples/policies"], &repo_root());
    assert!(ok, "{stdout}{stderr}");
    assert!(
        stdout.contains("PASS data.acs_test.test_recursive_force_delete_is_denied"),
        "{stdout}"
    );
    assert!(
        stdout.contains("PASS examples/policies/rego.fixture.json: rm -rf is denied whoever asks"),
        "{stdout}"
    );
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");

    let scratch = Scratch::new();
    let dir = scratch.path("policies");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(
        dir.join("p.rego"),
        "package acs\nimport rego.v1\ndecision := {\"decision\": \"deny\", \"reasoning\": \"no\"} if input.method == \"steps/toolCallRequest\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("p_test.rego"),
        "package acs_test\nimport rego.v1\ntest_denies if data.acs.decision.decision == \"deny\" with input as {\"method\": \"steps/toolCallRequest\"}\n",
    )
    .unwrap();
    std::fs::write(
        scratch.path("proxy.toml"),
        "[policy]\nengine = \"rego\"\nrego = [\"policies/*.rego\"]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("wrong.fixture.json"),
        r#"{"config": "../proxy.toml", "cases": [
            {"name": "expects allow", "hook": {"method": "steps/toolCallRequest", "params": {"payload": {}}},
             "expect": {"decision": "allow"}}]}"#,
    )
    .unwrap();
    let (ok, stdout, _) = run(&["policy", "test", "policies"], scratch.path("").as_path());
    assert!(!ok, "a failing fixture must fail the run: {stdout}");
    assert!(
        stdout.contains("PASS data.acs_test.test_denies"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "FAIL policies/wrong.fixture.json: expects allow: decision deny (expected allow)"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("1 passed, 1 failed"), "{stdout}");
}

#[test]
fn config_check_names_the_file_and_line_of_a_broken_module() {
    let scratch = Scratch::new();
    std::fs::write(
        scratch.path("broken.rego"),
        "package acs\n\ndecision := x if { why == 1 }\n",
    )
    .unwrap();
    let config = scratch.path("proxy.toml");
    std::fs::write(
        &config,
        "[policy]\nengine = \"rego\"\nrego = [\"broken.rego\"]\n",
    )
    .unwrap();
    let (ok, _, stderr) = run(
        &["config", "check", &config.display().to_string()],
        &repo_root(),
    );
    assert!(!ok);
    let location = format!(
        "{}:3:20: use of undefined variable `why`",
        scratch.path("broken.rego").display()
    );
    assert!(stderr.contains(&location), "{stderr}");
    assert!(stderr.contains("`why`"), "{stderr}");
}

/// Names the agent's address in a deny, and allows where it has none.
const BY_CLIENT_ADDRESS: &str = r#"
package acs

import rego.v1

default decision := {"decision": "allow"}

decision := {"decision": "deny", "reasoning": sprintf("calls from %s are not allowed", [input.context.client_address])} if {
    input.method == "steps/toolCallRequest"
    startswith(input.context.client_address, "127.0.0.1:")
}
"#;

#[tokio::test]
async fn input_context_names_the_agents_address_on_http_and_none_on_stdio() {
    let scratch = Scratch::new();
    std::fs::write(scratch.path("policy.rego"), BY_CLIENT_ADDRESS).unwrap();
    let policy = "[policy]\nengine = \"rego\"\nrego = [\"policy.rego\"]\n";
    let listen = support::listen_section("http", "");
    let config = scratch.demo_config(&format!("{listen}\n{policy}"));
    let proxy = support::NetProxy::start(&config);
    let mut agent = McpHttp::new(client(None), proxy.url("/mcp"));
    agent.initialize("2025-06-18", json!({})).await;
    let (denied, _) = agent
        .request(&tool_call(2, "echo", json!({"text": "hi"})))
        .await;
    assert_eq!(denied["result"]["isError"], true, "{denied}");
    assert!(
        text_of(&denied).contains("calls from 127.0.0.1:"),
        "{denied}"
    );
    drop(proxy);

    let scratch = Scratch::new();
    std::fs::write(scratch.path("policy.rego"), BY_CLIENT_ADDRESS).unwrap();
    let mut proxy = Proxy::start(&scratch.demo_config(policy));
    proxy.initialize(json!({}));
    proxy.send(&tool_call(2, "echo", json!({"text": "hi"})));
    assert_eq!(text_of(&proxy.response(&json!(2))), "hi");
    assert!(proxy.finish().success());
}
