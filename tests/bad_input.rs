//! Bad input and dead peers: a clear JSON-RPC error or the configured
//! posture, the session goes on, and the audit log still verifies.

mod support;

use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};
use support::{tool_call, Proxy, Scratch};

#[test]
fn malformed_and_invalid_lines_get_errors_and_the_session_goes_on() {
    let scratch = Scratch::new();
    let mut proxy = Proxy::start(&scratch.demo_config("[limits]\nmax_message_bytes = 2048"));
    proxy.initialize(json!({}));

    proxy.send_raw("this is not json");
    let reply = proxy.recv();
    assert_eq!(reply["error"]["code"], -32700);
    assert_eq!(reply["id"], Value::Null);

    proxy.send_raw(r#"{"jsonrpc":"2.0","id":1}"#);
    let reply = proxy.recv();
    assert_eq!(reply["error"]["code"], -32600);
    assert_eq!(reply["id"], 1);

    proxy.send_raw(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#);
    assert_eq!(proxy.recv()["error"]["code"], -32600);

    proxy.send_raw(&format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(10_000)
    ));
    let reply = proxy.recv();
    assert_eq!(reply["error"]["code"], -32600);
    assert!(reply["error"]["message"].as_str().unwrap().contains("2048"));

    proxy.send_raw("\u{0}\u{1}garbage\u{7f}");
    assert_eq!(proxy.recv()["error"]["code"], -32700);

    proxy.send(&tool_call(3, "echo", json!({"text": "alive"})));
    assert_eq!(
        proxy.response(&json!(3))["result"]["content"][0]["text"],
        "alive"
    );
    assert!(proxy.finish().success());

    let server = scratch.server_lines();
    assert!(!server
        .iter()
        .any(|l| l.contains("not json") || l.contains("xxxxxxxx")));
    let refusals = scratch
        .audit_entries()
        .into_iter()
        .filter(|e| e["step_type"] == "enforcement" && e["action"] == "dropped")
        .count();
    assert!(refusals >= 4, "every refused line is audited");
    scratch.assert_audit_verifies();
}

#[test]
fn invalid_utf8_is_a_parse_error() {
    let scratch = Scratch::new();
    let mut proxy = Proxy::start(&scratch.demo_config(""));
    proxy.initialize(json!({}));
    let mut bytes =
        b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\",\"x\":\"\xff\xfe\"}".to_vec();
    bytes.push(b'\n');
    proxy.send_bytes(&bytes);
    assert_eq!(proxy.recv()["error"]["code"], -32700);
    proxy.send(&json!({"jsonrpc":"2.0","id":6,"method":"ping"}));
    proxy.response(&json!(6));
    assert!(proxy.finish().success());
}

#[test]
fn a_duplicate_id_in_flight_is_refused_without_misrouting_the_first() {
    let scratch = Scratch::new();
    let mut proxy = Proxy::start(&scratch.demo_config(""));
    proxy.initialize(json!({}));
    proxy.send(&tool_call(7, "slow", json!({"ms": 400})));
    std::thread::sleep(Duration::from_millis(100));
    proxy.send(&tool_call(7, "echo", json!({"text": "second"})));
    let refusal = proxy.recv();
    assert_eq!(refusal["id"], 7);
    assert_eq!(refusal["error"]["code"], -32600);
    let first = proxy.response(&json!(7));
    assert!(first["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("slept"));
    assert!(proxy.finish().success());
    assert!(!scratch.server_lines().iter().any(|l| l.contains("second")));
}

/// Finds the upstream child of the proxy (the demo server).
fn child_of(pid: u32) -> u32 {
    let output = Command::new("pgrep")
        .args(["-P", &pid.to_string()])
        .output()
        .expect("pgrep");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .next()
        .and_then(|line| line.trim().parse().ok())
        .expect("the proxy has a child process")
}

#[test]
fn a_server_that_dies_fails_pending_requests_and_the_proxy_exits_non_zero() {
    let scratch = Scratch::new();
    let mut proxy = Proxy::start(&scratch.demo_config(""));
    proxy.initialize(json!({}));
    proxy.send(&tool_call(8, "slow", json!({"ms": 10_000})));
    std::thread::sleep(Duration::from_millis(200));
    let server = child_of(proxy.pid());
    Command::new("kill")
        .args(["-9", &server.to_string()])
        .status()
        .expect("kill");
    let reply = proxy.response(&json!(8));
    assert_eq!(reply["error"]["code"], -32011, "{reply}");
    assert!(reply["error"]["message"]
        .as_str()
        .unwrap()
        .contains("upstream"));
    let status = proxy.wait();
    assert_eq!(status.code(), Some(3));

    let entries = scratch.audit_entries();
    assert!(entries
        .iter()
        .any(|e| e["step_type"] == "enforcement" && e["mcp_id"] == 8 && e["action"] == "blocked"));
    let last = entries.last().unwrap();
    assert_eq!(last["step_type"], "steps/sessionEnd");
    scratch.assert_audit_verifies();
}

#[test]
fn closing_stdin_shuts_the_server_down_and_seals_the_chain() {
    let scratch = Scratch::new();
    let mut proxy = Proxy::start(&scratch.demo_config(""));
    proxy.initialize(json!({}));
    let server = child_of(proxy.pid());
    assert!(proxy.finish().success());
    let alive = Command::new("kill")
        .args(["-0", &server.to_string()])
        .status()
        .expect("kill -0");
    assert!(!alive.success(), "the upstream server outlived the proxy");
    let entries = scratch.audit_entries();
    assert_eq!(entries.last().unwrap()["step_type"], "steps/sessionEnd");
    scratch.assert_audit_verifies();
}

#[test]
fn an_upstream_that_cannot_start_is_a_clear_startup_error() {
    let scratch = Scratch::new();
    let config = scratch.config(&["/nonexistent/mcp-server".into()], "");
    let output = Command::new(support::proxy_bin())
        .args(["--config"])
        .arg(&config)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("/nonexistent/mcp-server"), "{stderr}");
}

#[test]
fn an_unwritable_audit_log_is_a_clear_startup_error() {
    let scratch = Scratch::new();
    let config = scratch.demo_config("");
    let output = Command::new(support::proxy_bin())
        .args(["--config"])
        .arg(&config)
        .args(["--audit", "/nonexistent-dir/audit.jsonl"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("/nonexistent-dir"));
}
