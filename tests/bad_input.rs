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
    let reply = proxy.recv();
    assert_eq!(reply["error"]["code"], -32700);
    assert_eq!(reply["id"], Value::Null);
    assert_eq!(
        reply["error"]["message"],
        "parse error: the message is not valid UTF-8 (first invalid byte at offset 45)"
    );
    proxy.send(&json!({"jsonrpc":"2.0","id":6,"method":"ping"}));
    proxy.response(&json!(6));
    assert!(proxy.finish().success());
    assert!(!scratch
        .server_lines()
        .iter()
        .any(|l| l.contains("\"id\":5")));
    assert_refusal_audited(&scratch, "not valid UTF-8");
}

/// `depth` nested arrays inside `params`, as one request line.
fn nested_request(id: i64, depth: usize) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"deep","nest":{}{}}}}}}}"#,
        "[".repeat(depth),
        "]".repeat(depth)
    )
}

#[test]
fn nesting_beyond_max_json_depth_is_refused_before_any_parse() {
    let scratch = Scratch::new();
    let mut proxy = Proxy::start(&scratch.demo_config("[limits]\nmax_json_depth = 16"));
    proxy.initialize(json!({}));
    // 3 levels of envelope + 13 arrays = 16: allowed, and forwarded intact.
    let fits = nested_request(1, 13);
    proxy.send_raw(&fits);
    assert_eq!(
        proxy.response(&json!(1))["result"]["content"][0]["text"],
        "deep"
    );
    let too_deep =
        "invalid request: JSON nesting exceeds the limit of 16 levels ([limits] max_json_depth)";
    for depth in [14, 100_000] {
        proxy.send_raw(&nested_request(2, depth));
        let reply = proxy.recv();
        assert_eq!(reply["error"]["code"], -32600, "{reply}");
        assert_eq!(reply["error"]["message"], too_deep);
    }
    proxy.send(&tool_call(3, "echo", json!({"text": "alive"})));
    assert_eq!(
        proxy.response(&json!(3))["result"]["content"][0]["text"],
        "alive"
    );
    assert!(proxy.finish().success());
    let server = scratch.server_lines();
    assert!(
        server.contains(&fits),
        "allowed messages go on byte for byte"
    );
    assert!(!server.iter().any(|l| l.contains("\"id\":2")));
    assert_refusal_audited(&scratch, "max_json_depth");
}

#[test]
fn the_default_depth_limit_is_128() {
    let scratch = Scratch::new();
    let mut proxy = Proxy::start(&scratch.demo_config(""));
    proxy.initialize(json!({}));
    // 127 levels: through the proxy, and within what the demo server parses.
    proxy.send_raw(&nested_request(1, 124));
    proxy.response(&json!(1));
    proxy.send_raw(&nested_request(2, 126));
    let reply = proxy.recv();
    assert_eq!(
        reply["error"]["message"],
        "invalid request: JSON nesting exceeds the limit of 128 levels ([limits] max_json_depth)"
    );
    assert!(proxy.finish().success());
}

#[test]
fn huge_strings_and_arrays_pass_within_the_limit_and_are_refused_beyond_it() {
    let scratch = Scratch::new();
    let limit = 1 << 20;
    let mut proxy =
        Proxy::start(&scratch.demo_config(&format!("[limits]\nmax_message_bytes = {limit}")));
    proxy.initialize(json!({}));
    let string = "s".repeat(limit - 200);
    let within = tool_call(1, "echo", json!({"text": string})).to_string();
    assert!(within.len() <= limit);
    proxy.send_raw(&within);
    let reply = proxy.response(&json!(1));
    assert_eq!(
        reply["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .len(),
        string.len()
    );
    let array: Vec<u8> = vec![0; (limit - 200) / 2];
    let numbers = tool_call(2, "echo", json!({"text": "array", "items": array})).to_string();
    assert!(numbers.len() <= limit);
    proxy.send_raw(&numbers);
    assert_eq!(
        proxy.response(&json!(2))["result"]["content"][0]["text"],
        "array"
    );
    let beyond = "invalid request: message exceeds the 1048576-byte limit and was discarded";
    for big in [
        tool_call(3, "echo", json!({"text": "s".repeat(limit + 1)})),
        tool_call(4, "echo", json!({"text": "a", "items": vec![0; limit]})),
    ] {
        proxy.send(&big);
        let reply = proxy.recv();
        assert_eq!(reply["error"]["code"], -32600);
        assert_eq!(reply["id"], Value::Null);
        assert_eq!(
            reply["error"]["message"],
            beyond.trim_start_matches("invalid request: ")
        );
    }
    proxy.send(&tool_call(5, "echo", json!({"text": "alive"})));
    proxy.response(&json!(5));
    assert!(proxy.finish().success());
    let server = scratch.server_lines();
    assert!(server.contains(&within) && server.contains(&numbers));
    assert!(!server
        .iter()
        .any(|l| l.contains("\"id\":3") || l.contains("\"id\":4")));
}

#[test]
fn numbers_beyond_f64_are_forwarded_byte_for_byte() {
    let scratch = Scratch::new();
    let mut proxy = Proxy::start(&scratch.demo_config(""));
    proxy.initialize(json!({}));
    let digits = "9".repeat(100);
    let line = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"n","big":{digits},"huge":1e400,"tiny":-1E-400,"exact":0.10000000000000000000000000001}}}}}}"#
    );
    proxy.send_raw(&line);
    assert_eq!(
        proxy.response(&json!(1))["result"]["content"][0]["text"],
        "n"
    );
    assert!(proxy.finish().success());
    assert!(scratch.server_lines().contains(&line));
    // Each hook was decided and recorded; its request_hash is a digest of
    // the digits as sent (JCS has no spelling for 1e400, see README).
    let entries = scratch.audit_entries();
    assert!(entries
        .iter()
        .any(|e| e["step_type"] == "steps/toolCallRequest" && e["decision"] == "allow"));
    scratch.assert_audit_verifies();

    // Kept in full in the audit entry, such a number has no JCS form: the
    // message fails closed instead of being recorded with a changed value.
    let scratch = Scratch::new();
    let mut proxy = Proxy::start(&scratch.demo_config_recording_content(""));
    proxy.initialize(json!({}));
    proxy.send_raw(&line);
    let reply = proxy.response(&json!(1));
    assert_eq!(reply["error"]["code"], -32013, "{reply}");
    assert_eq!(
        reply["error"]["data"]["reason_codes"],
        json!(["audit_unavailable"])
    );
    proxy.send(&tool_call(2, "echo", json!({"text": "alive"})));
    assert_eq!(
        proxy.response(&json!(2))["result"]["content"][0]["text"],
        "alive"
    );
    assert!(proxy.finish().success());
    assert!(!scratch.server_lines().contains(&line));
    scratch.assert_audit_verifies();
}

#[test]
fn duplicate_keys_are_refused_so_policy_and_server_cannot_disagree() {
    let scratch = Scratch::new();
    let mut proxy = Proxy::start(&scratch.demo_config(
        "[[policy.rule]]\nname = \"no-env\"\nhook = \"steps/toolCallRequest\"\ntool = \"get-env\"\ndecision = \"deny\"\nreasoning = \"no\"\n",
    ));
    proxy.initialize(json!({}));
    for (id, line) in [
        (
            1,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","name":"get-env","arguments":{}}}"#,
        ),
        (
            2,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get-env","n\u0061me":"echo","arguments":{}}}"#,
        ),
    ] {
        proxy.send_raw(line);
        let reply = proxy.response(&json!(id));
        assert_eq!(reply["error"]["code"], -32600, "{reply}");
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("invalid request: duplicate key \"name\" in an object"),
            "{message}"
        );
    }
    proxy.send_raw(r#"{"jsonrpc":"2.0","id":3,"method":"ping","method":"tools/call"}"#);
    let reply = proxy.recv();
    assert_eq!(reply["error"]["code"], -32600);
    assert!(reply["error"]["message"]
        .as_str()
        .unwrap()
        .contains("duplicate field `method`"));
    proxy.send(&tool_call(4, "echo", json!({"text": "alive"})));
    proxy.response(&json!(4));
    assert!(proxy.finish().success());
    assert!(!scratch
        .server_lines()
        .iter()
        .any(|l| l.contains("get-env") || l.contains("\"id\":3")));
    assert_refusal_audited(&scratch, "duplicate key");
}

/// A stdio MCP server answering `initialize`, and `tools/call` id 7 with a
/// result holding `content` twice.
const DUPLICATE_KEY_SERVER: &str = r#"while IFS= read -r line; do case "$line" in
*'"initialize"'*) echo '{"jsonrpc":"2.0","id":"init","result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"dup","version":"1"}}}';;
*'"id":7'*) echo '{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"seen by policy"}],"content":[{"type":"text","text":"seen by the agent"}]}}';;
*'"id":8'*) echo '{"jsonrpc":"2.0","id":8,"result":{"content":[{"type":"text","text":"fine"}]}}';;
esac; done"#;

#[test]
fn a_server_response_with_duplicate_keys_becomes_an_error_to_the_requester() {
    let scratch = Scratch::new();
    let command = ["sh", "-c", DUPLICATE_KEY_SERVER].map(String::from);
    let mut proxy = Proxy::start(&scratch.config(&command, "[hooks]\ninventory = false\n"));
    proxy.initialize(json!({}));
    proxy.send(&tool_call(7, "anything", json!({})));
    let reply = proxy.response(&json!(7));
    assert_eq!(reply["error"]["code"], -32603, "{reply}");
    assert!(reply["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("the response was refused: duplicate key \"content\" in an object"));
    proxy.send(&tool_call(8, "anything", json!({})));
    assert_eq!(
        proxy.response(&json!(8))["result"]["content"][0]["text"],
        "fine"
    );
    assert!(proxy.finish().success());
    assert_refusal_audited(&scratch, "duplicate key \"content\"");
}

#[test]
fn a_batch_holding_initialize_is_refused_element_by_element() {
    let scratch = Scratch::new();
    let mut proxy = Proxy::start(&scratch.demo_config(""));
    proxy.initialize(json!({}));
    proxy.send(&json!([
        {"jsonrpc":"2.0","id":"again","method":"initialize","params":{
            "protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"x","version":"1"}}},
        {"jsonrpc":"2.0","id":2,"method":"ping"}
    ]));
    let replies = proxy.recv();
    let replies = replies.as_array().expect("a batch answer");
    let refusal = replies
        .iter()
        .find(|r| r["id"] == "again")
        .expect("initialize answered");
    assert_eq!(refusal["error"]["code"], -32600);
    assert_eq!(
        refusal["error"]["message"],
        "`initialize` must not be part of a JSON-RPC batch"
    );
    proxy.send(&tool_call(3, "echo", json!({"text": "alive"})));
    proxy.response(&json!(3));
    assert!(proxy.finish().success());
}

/// The audit log holds a proxy refusal whose detail mentions `needle`, and verifies.
fn assert_refusal_audited(scratch: &Scratch, needle: &str) {
    let entries = scratch.audit_entries();
    assert!(
        entries.iter().any(|e| e["step_type"] == "enforcement"
            && e["decision_source"] == "proxy"
            && e["detail"].as_str().is_some_and(|d| d.contains(needle))),
        "no audited refusal mentioning {needle:?}"
    );
    scratch.assert_audit_verifies();
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
