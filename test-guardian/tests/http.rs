//! The binary over HTTP: handshake, hand-signed hooks, a scripted deny,
//! replay and signature rejections, ping, a dropped connection and the
//! record file.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{record_lines, secret_b64, spawn, wait_for_file, write_script, Client, KEY_ID};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// POSTs `body` to `/acs` on a fresh connection; `None` when the server
/// closed the connection without answering.
async fn post(addr: SocketAddr, body: &[u8]) -> Option<(u16, Vec<u8>)> {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "POST /acs HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.expect("write head");
    stream.write_all(body).await.expect("write body");
    let mut response = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response))
        .await
        .expect("the server answered or closed in time");
    if read.is_err() || response.is_empty() {
        return None;
    }
    let split = response
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .expect("HTTP head");
    let status_line = String::from_utf8_lossy(&response[..split]).to_string();
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("status code");
    Some((status, response[split + 4..].to_vec()))
}

/// POSTs a JSON request and parses the JSON reply (HTTP 200 required).
async fn call(addr: SocketAddr, request: &Value) -> Value {
    let (status, body) = post(addr, request.to_string().as_bytes())
        .await
        .expect("a response");
    assert_eq!(status, 200, "HTTP status");
    serde_json::from_slice(&body).expect("JSON reply")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_handshake_signed_hooks_scripted_deny_and_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = write_script(
        dir.path(),
        &json!({
            "rules": [
                {"method": "steps/toolCallRequest", "tool": "get-env",
                 "then": {"action": "deny", "reasoning": "secrets stay home", "reason_codes": ["no_env"]}},
                {"method": "steps/toolCall*", "tool": "crash", "times": 1, "then": {"action": "drop"}}
            ]
        }),
    );
    let addr_file = dir.path().join("addr");
    let record = dir.path().join("record.jsonl");
    let secret = secret_b64();
    let _guardian = spawn(&[
        "--http",
        "127.0.0.1:0",
        "--addr-file",
        addr_file.to_str().expect("utf8 path"),
        "--secret-b64",
        &secret,
        "--script",
        script.to_str().expect("utf8 path"),
        "--record",
        record.to_str().expect("utf8 path"),
    ]);
    let addr: SocketAddr = wait_for_file(&addr_file)
        .await
        .trim()
        .parse()
        .expect("address");
    let mut client = Client::new();

    // Handshake: the ServerHello is the bare result, signed with our key_id.
    let hello = client.hello("http");
    let reply = call(addr, &hello).await;
    assert_eq!(reply["id"], hello["id"]);
    let server = &reply["result"];
    assert_eq!(server["negotiated_version"], "0.1.0");
    assert_eq!(
        server["methods_evaluated"],
        hello["params"]["payload"]["methods_implemented"]
    );
    assert_eq!(server["selected_transport"], "http");
    assert_eq!(server["timeout_config"]["default_ms"], 2000);
    assert_eq!(server["on_decision_failure"], "proceed");
    assert_eq!(server["skew_window_ms"], 300_000);
    assert_eq!(server["signature"]["key_id"], KEY_ID);
    assert!(client.verifies(&reply), "ServerHello signature");

    // An allowed hook: echoes request_id, lowercase decision, chain head 1.
    let allowed = client.tool_call("echo");
    let reply = call(addr, &allowed).await;
    let result = &reply["result"];
    assert_eq!(result["type"], "final");
    assert_eq!(result["acs_version"], "0.1.0");
    assert_eq!(result["request_id"], allowed["params"]["request_id"]);
    assert_eq!(result["decision"], "allow");
    assert_eq!(result["chain_hash"], json!(client.expected_head(1)));
    assert!(client.verifies(&reply), "allow signature");

    // The scripted deny, chained onto the first entry.
    let denied = client.tool_call("get-env");
    let reply = call(addr, &denied).await;
    let result = &reply["result"];
    assert_eq!(result["decision"], "deny");
    assert_eq!(result["reasoning"], "secrets stay home");
    assert_eq!(result["reason_codes"], json!(["no_env"]));
    assert_eq!(result["chain_hash"], json!(client.expected_head(2)));
    assert!(client.verifies(&reply), "deny signature");

    // Replay of the same envelope: -32005, signed at error.signature.
    let replayed = call(addr, &denied).await;
    assert_eq!(replayed["error"]["code"], -32005);
    assert!(client.verifies(&replayed), "replay error signature");

    // A tampered request: -32004, unsigned.
    let mut forged = client.tool_call("echo");
    client.sent.pop(); // not chained
    forged["params"]["payload"]["tool"]["name"] = json!("get-env");
    let rejected = call(addr, &forged).await;
    assert_eq!(rejected["error"]["code"], -32004);
    assert!(rejected["error"].get("signature").is_none());

    // Ping: allow + liveness payload, no chain head.
    let ping = json!({"jsonrpc": "2.0", "id": 99, "method": "system/ping", "params": {
        "acs_version": "0.1.0", "request_id": uuid::Uuid::new_v4().to_string(),
        "timestamp": "2026-01-01T00:00:00Z",
        "metadata": {"agent_id": "integration-test", "session_id": client.session_id},
        "payload": {"echo": "are you there"}}});
    let pong = call(addr, &ping).await;
    assert_eq!(pong["result"]["decision"], "allow");
    assert_eq!(pong["result"]["payload"]["echo"], "are you there");
    assert!(pong["result"].get("chain_hash").is_none());

    // drop: the connection closes without a response (once), then normal.
    let crash = client.tool_call("crash");
    assert_eq!(post(addr, crash.to_string().as_bytes()).await, None);
    let after = client.tool_call("crash");
    let reply = call(addr, &after).await;
    assert_eq!(reply["result"]["decision"], "allow");
    assert_eq!(
        reply["result"]["chain_hash"],
        json!(client.expected_head(4))
    );

    // The record: one line per request, in order.
    let lines = record_lines(&record);
    let actions: Vec<&str> = lines
        .iter()
        .map(|line| line["action"].as_str().expect("action"))
        .collect();
    assert_eq!(
        actions,
        [
            "hello:ok",
            "allow",
            "deny",
            "reject:replay_detected",
            "reject:signature_invalid",
            "ping",
            "drop",
            "allow"
        ]
    );
    let validity: Vec<&Value> = lines.iter().map(|line| &line["signature_valid"]).collect();
    assert_eq!(
        validity,
        [
            &json!(true),
            &json!(true),
            &json!(true),
            &json!(true),
            &json!(false),
            &Value::Null,
            &json!(true),
            &json!(true)
        ]
    );
    assert_eq!(lines[2]["envelope"], denied);
    assert_eq!(lines[2]["chain_hash"], json!(client.expected_head(2)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_every_scripted_action() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rule = |tool: &str, then: Value| json!({"method": "steps/toolCallRequest", "tool": tool, "then": then});
    let script = write_script(
        dir.path(),
        &json!({
            "rules": [
                rule("modify", json!({"action": "modify", "modifications": {"parameter_overrides": {"path": "/safe"}}})),
                rule("ask", json!({"action": "ask"})),
                rule("defer", json!({"action": "defer", "defer_details": {"reason": "low_confidence", "timeout_decision": "deny"}})),
                rule("late", json!({"action": "late", "delay_ms": 250, "then": {"action": "deny"}})),
                rule("unsigned", json!({"action": "unsigned"})),
                rule("bad_signature", json!({"action": "bad_signature", "then": {"action": "deny"}})),
                rule("wrong_request_id", json!({"action": "wrong_request_id"})),
                rule("wrong_type", json!({"action": "wrong_type"})),
                rule("uppercase", json!({"action": "uppercase"})),
                rule("error", json!({"action": "error", "code": -32007, "message": "chain broken"})),
                rule("malformed", json!({"action": "malformed"})),
                rule("chain_mismatch", json!({"action": "chain_mismatch"}))
            ]
        }),
    );
    let addr_file = dir.path().join("addr");
    let secret = secret_b64();
    let _guardian = spawn(&[
        "--http",
        "127.0.0.1:0",
        "--addr-file",
        addr_file.to_str().expect("utf8 path"),
        "--secret-b64",
        &secret,
        "--script",
        script.to_str().expect("utf8 path"),
    ]);
    let addr: SocketAddr = wait_for_file(&addr_file)
        .await
        .trim()
        .parse()
        .expect("address");
    let mut client = Client::new();
    let mut ask = |tool: &str| client.tool_call(tool);

    let modify = call(addr, &ask("modify")).await;
    assert_eq!(modify["result"]["decision"], "modify");
    assert_eq!(
        modify["result"]["modifications"]["parameter_overrides"]["path"],
        "/safe"
    );
    assert!(modify["result"]["reasoning"].is_string());

    let asked = call(addr, &ask("ask")).await;
    assert_eq!(asked["result"]["decision"], "ask");
    assert_eq!(asked["result"]["ask_details"]["approver"]["type"], "human");

    let deferred = call(addr, &ask("defer")).await;
    assert_eq!(
        deferred["result"]["defer_details"]["reason"],
        "low_confidence"
    );

    let started = std::time::Instant::now();
    let late = call(addr, &ask("late")).await;
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert_eq!(late["result"]["decision"], "deny");

    let unsigned = call(addr, &ask("unsigned")).await;
    assert_eq!(unsigned["result"]["decision"], "allow");
    assert!(unsigned["result"].get("signature").is_none());

    let bad = call(addr, &ask("bad_signature")).await;
    assert_eq!(bad["result"]["decision"], "deny");
    assert!(bad["result"]["signature"]["value"].is_string());

    let wrong_id_request = ask("wrong_request_id");
    let wrong_id = call(addr, &wrong_id_request).await;
    assert_ne!(
        wrong_id["result"]["request_id"],
        wrong_id_request["params"]["request_id"]
    );
    assert_eq!(wrong_id["id"], wrong_id_request["id"]);

    let wrong_type = call(addr, &ask("wrong_type")).await;
    assert_eq!(wrong_type["result"]["type"], "progress");

    let upper = call(addr, &ask("uppercase")).await;
    assert_eq!(upper["result"]["decision"], "ALLOW");

    let error = call(addr, &ask("error")).await;
    assert_eq!(error["error"]["code"], -32007);
    assert_eq!(error["error"]["message"], "chain broken");

    let (status, body) = post(addr, ask("malformed").to_string().as_bytes())
        .await
        .expect("a response");
    assert_eq!(status, 200);
    assert!(serde_json::from_slice::<Value>(&body).is_err());

    let mismatch = call(addr, &ask("chain_mismatch")).await;
    assert_eq!(mismatch["result"]["decision"], "deny");
    assert_eq!(
        mismatch["result"]["reason_codes"],
        json!(["chain_mismatch"])
    );

    // Signature checks: everything is validly signed except the two
    // deliberate defects; content corruptions are signed after the edit.
    for reply in [
        &modify,
        &asked,
        &deferred,
        &late,
        &wrong_id,
        &wrong_type,
        &upper,
        &error,
        &mismatch,
    ] {
        assert!(client.verifies(reply), "signed: {reply}");
    }
    assert!(!client.verifies(&unsigned));
    assert!(!client.verifies(&bad));
    // Every request was chained, whatever the answer.
    assert_eq!(
        mismatch["result"]["chain_hash"],
        json!(client.expected_head(12))
    );
}

/// Starts an HTTP Guardian with `extra` arguments and returns it with its address.
async fn spawn_http(dir: &std::path::Path, extra: &[&str]) -> (tokio::process::Child, SocketAddr) {
    let addr_file = dir.join("addr");
    let secret = secret_b64();
    let mut args = vec![
        "--http",
        "127.0.0.1:0",
        "--addr-file",
        addr_file.to_str().expect("utf8 path"),
        "--secret-b64",
        &secret,
    ];
    args.extend_from_slice(extra);
    let guardian = spawn(&args);
    let addr = wait_for_file(&addr_file)
        .await
        .trim()
        .parse()
        .expect("address");
    (guardian, addr)
}

/// `n` pings, written back to back on one new keep-alive connection, and
/// everything the server sends until it closes the connection (or 10 s pass).
async fn pings_until_closed(addr: SocketAddr, n: usize) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    for id in 0..n {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "system/ping", "params": {
            "acs_version": "0.1.0", "request_id": uuid::Uuid::new_v4().to_string(),
            "timestamp": "2026-01-01T00:00:00Z",
            "metadata": {"agent_id": "integration-test"}, "payload": {}}})
        .to_string();
        let request = format!(
            "POST /acs HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.expect("write");
    }
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response))
        .await
        .expect("the server closed the connection")
        .expect("read");
    String::from_utf8(response).expect("UTF-8")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_connections_close_after_an_answer_or_when_idle_without_notice() {
    let dir = tempfile::tempdir().expect("tempdir");

    // --close-after-answer: the answer, then the close, though the client
    // asked for nothing of the sort.
    let (_guardian, addr) = spawn_http(dir.path(), &["--close-after-answer"]).await;
    let response = pings_until_closed(addr, 1).await;
    assert_eq!(response.matches("HTTP/1.1 200 OK").count(), 1, "{response}");
    assert!(response.contains("\"decision\":\"allow\""), "{response}");
    assert!(
        !response.to_ascii_lowercase().contains("connection:"),
        "the close is not announced: {response}"
    );

    // --keep-alive-ms: both requests answered on the connection, then it
    // closes once idle for the keep-alive time.
    let dir = tempfile::tempdir().expect("tempdir");
    let (_guardian, addr) = spawn_http(dir.path(), &["--keep-alive-ms", "100"]).await;
    let started = std::time::Instant::now();
    let response = pings_until_closed(addr, 2).await;
    assert_eq!(response.matches("HTTP/1.1 200 OK").count(), 2, "{response}");
    assert!(started.elapsed() >= Duration::from_millis(100));
    assert!(
        !response.to_ascii_lowercase().contains("connection:"),
        "the close is not announced: {response}"
    );
}
