//! The transparent relay over stdio: what the server receives and what the
//! client gets, byte for byte, for every kind of message MCP carries.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
use support::{tool_call, Proxy, Scratch};

const INIT: &str = r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bytes-test","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
/// Odd spacing, an escaped slash, an unknown member, key order, and numbers
/// no f64 can hold: all must survive the proxy untouched.
const ODD_CALL: &str = r#"{ "id" : 41, "jsonrpc":"2.0", "method":"tools\/call", "params":{"name":"echo","arguments":{"text":"caf\u00e9 \/ 1E+2"},"_meta":{"big":12345678901234567890123,"exp":1E+2}}, "x-unknown":{"z":1,"a":2} }"#;

/// Sends `lines` straight to the demo server and returns its answers.
fn direct_answers(lines: &[&str], count: usize) -> Vec<String> {
    let mut child = Command::new(support::demo_server_bin())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn demo server");
    let mut stdin = child.stdin.take().expect("stdin");
    for line in lines {
        writeln!(stdin, "{line}").expect("write");
    }
    let mut answers = Vec::new();
    let mut reader = BufReader::new(child.stdout.take().expect("stdout"));
    while answers.len() < count {
        let mut line = String::new();
        if reader.read_line(&mut line).expect("read") == 0 {
            break;
        }
        answers.push(line.trim_end().to_owned());
    }
    drop(stdin);
    let _ = child.wait();
    answers
}

#[test]
fn allowed_messages_pass_byte_identical_both_ways() {
    let scratch = Scratch::new();
    let mut proxy = Proxy::start(&scratch.demo_config(""));
    proxy.send_raw(INIT);
    let init_reply = proxy.recv_raw();
    proxy.send_raw(INITIALIZED);
    proxy.send_raw(ODD_CALL);
    let (_, _) = proxy.recv_until(|m| m["id"] == 41);
    assert!(proxy.finish().success());

    let received = scratch.server_lines();
    assert!(
        received.iter().any(|line| line == INIT),
        "initialize altered: {received:?}"
    );
    assert!(received.iter().any(|line| line == INITIALIZED));
    assert!(
        received.iter().any(|line| line == ODD_CALL),
        "tools/call altered: {received:?}"
    );

    let direct = direct_answers(&[INIT, INITIALIZED, ODD_CALL], 2);
    assert_eq!(init_reply, direct[0], "the initialize result was altered");
    scratch.assert_audit_verifies();
}

#[test]
fn responses_reach_the_client_byte_identical() {
    let scratch = Scratch::new();
    let mut proxy = Proxy::start(&scratch.demo_config(""));
    proxy.send_raw(INIT);
    let _ = proxy.recv_raw();
    proxy.send_raw(INITIALIZED);
    proxy.send_raw(ODD_CALL);
    let mut proxied = proxy.recv_raw();
    while !proxied.contains("\"id\":41") {
        proxied = proxy.recv_raw();
    }
    assert!(proxy.finish().success());
    let direct = direct_answers(&[INIT, INITIALIZED, ODD_CALL], 2);
    assert_eq!(proxied, direct[1]);
}

#[test]
fn batches_are_relayed_as_one_frame() {
    let scratch = Scratch::new();
    let mut proxy = Proxy::start(&scratch.demo_config(""));
    proxy.initialize(json!({}));
    let batch = r#"[{"jsonrpc":"2.0","id":"b1","method":"tools/call","params":{"name":"echo","arguments":{"text":"one"}}},{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"none","progress":1}},{"jsonrpc":"2.0","id":"b2","method":"ping"}]"#;
    proxy.send_raw(batch);
    let reply = proxy.recv_until(|m| m.is_array()).0;
    let ids: Vec<&Value> = reply.as_array().unwrap().iter().map(|r| &r["id"]).collect();
    assert_eq!(ids, vec![&json!("b1"), &json!("b2")]);
    assert!(proxy.finish().success());
    assert!(
        scratch.server_lines().iter().any(|line| line == batch),
        "the batch was not forwarded intact"
    );
    scratch.assert_audit_verifies();
}

#[test]
fn initialize_inside_a_batch_is_refused() {
    let scratch = Scratch::new();
    let mut proxy = Proxy::start(&scratch.demo_config(""));
    proxy.send_raw(r#"[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}},{"jsonrpc":"2.0","id":2,"method":"ping"}]"#);
    let replies = proxy
        .recv_until(|m| m.is_array() && m.as_array().unwrap().iter().any(|r| r["id"] == 1))
        .0;
    let init_reply = replies
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == 1)
        .unwrap();
    assert_eq!(init_reply["error"]["code"], -32600);
    assert!(proxy.finish().success());
    assert!(!scratch
        .server_lines()
        .iter()
        .any(|l| l.contains("initialize")));
}

#[test]
fn server_requests_progress_and_sampling_are_relayed() {
    let scratch = Scratch::new();
    let mut proxy = Proxy::start(&scratch.demo_config(""));
    proxy.initialize(json!({"sampling": {}}));

    let mut slow = tool_call(7, "slow", json!({"ms": 50, "steps": 3}));
    slow["params"]["_meta"] = json!({"progressToken": "p7"});
    proxy.send(&slow);
    let (result, before) = proxy.recv_until(|m| m["id"] == 7);
    let progress: Vec<&Value> = before
        .iter()
        .filter(|m| m["method"] == "notifications/progress" && m["params"]["progressToken"] == "p7")
        .collect();
    assert_eq!(progress.len(), 3, "progress notifications: {before:?}");
    assert!(result["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("slept"));

    proxy.send(&tool_call(8, "sample", json!({"prompt": "hi"})));
    let (request, _) = proxy.recv_until(|m| m["method"] == "sampling/createMessage");
    proxy.send(&json!({"jsonrpc":"2.0","id":request["id"],"result":{
        "role":"assistant","model":"test","content":{"type":"text","text":"sampled reply"}}}));
    let answer = proxy.response(&json!(8));
    assert!(answer.to_string().contains("sampled reply"), "{answer}");
    assert!(proxy.finish().success());

    let server = scratch.server_received();
    assert!(server
        .iter()
        .any(|m| m["id"] == request["id"] && m["result"]["content"]["text"] == "sampled reply"));
    let entries = scratch.audit_entries();
    assert!(!support::entries_of(&entries, "protocols/MCP/sampling/createMessage").is_empty());
    assert!(!support::entries_of(&entries, "protocols/MCP/notifications/progress").is_empty());
    scratch.assert_audit_verifies();
}

#[test]
fn cancellation_reaches_the_server_and_no_response_follows() {
    let scratch = Scratch::new();
    let mut proxy = Proxy::start(&scratch.demo_config(""));
    proxy.initialize(json!({}));
    proxy.send(&tool_call(9, "slow", json!({"ms": 3000})));
    std::thread::sleep(Duration::from_millis(300));
    proxy.send(&json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9,"reason":"user"}}));
    proxy.send(&json!({"jsonrpc":"2.0","id":10,"method":"ping"}));
    let (_, before) = proxy.recv_until(|m| m["id"] == 10);
    assert!(
        before.iter().all(|m| m["id"] != 9),
        "a cancelled request was answered: {before:?}"
    );
    proxy.assert_silent(Duration::from_millis(500));
    assert!(proxy.finish().success());
    let server = scratch.server_received();
    assert!(server
        .iter()
        .any(|m| m["method"] == "notifications/cancelled" && m["params"]["requestId"] == 9));
}

#[test]
fn inventory_is_snapshotted_before_the_agent_continues() {
    let scratch = Scratch::new();
    let mut proxy = Proxy::start(&scratch.demo_config(""));
    proxy.initialize(json!({}));
    proxy.send(&tool_call(2, "change-tools", json!({})));
    proxy.recv_until(|m| m["id"] == 2);
    proxy.send(&json!({"jsonrpc":"2.0","id":3,"method":"tools/list"}));
    let list = proxy.response(&json!(3));
    assert!(list.to_string().contains("extra-tool"));
    assert!(proxy.finish().success());

    let entries = scratch.audit_entries();
    let steps: Vec<&str> = entries
        .iter()
        .map(|e| e["step_type"].as_str().unwrap())
        .collect();
    let snapshot = steps
        .iter()
        .position(|s| *s == "agbom/snapshot")
        .expect("a snapshot");
    let first_call = steps
        .iter()
        .position(|s| *s == "protocols/MCP/tools/call")
        .expect("a call");
    assert!(
        snapshot < first_call,
        "the snapshot must precede the agent's first call: {steps:?}"
    );
    assert_eq!(steps[0], "steps/sessionStart");
    assert_eq!(*steps.last().unwrap(), "steps/sessionEnd");
    assert_eq!(
        support::entries_of(&entries, "agbom/changed").len(),
        1,
        "{steps:?}"
    );
    // The proxy's own inventory reads use ids no peer uses.
    assert!(scratch
        .server_received()
        .iter()
        .any(|m| m["method"] == "tools/list"
            && m["id"]
                .as_str()
                .is_some_and(|id| id.starts_with("acs-proxy-"))));
    scratch.assert_audit_verifies();
}
