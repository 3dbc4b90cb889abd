//! The binary over stdio (Content-Length frames): handshake, hand-signed
//! hooks, a scripted deny, a late reply overtaken by a later one, and
//! `drop` exiting the process.

mod common;

use std::time::Duration;

use common::{secret_b64, spawn, write_script, Client, KEY_ID};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};

/// Writes one frame (lower-case header name, to exercise case-insensitivity).
async fn send(stdin: &mut ChildStdin, message: &Value) {
    let body = message.to_string();
    let frame = format!("content-length: {}\r\n\r\n{body}", body.len());
    stdin
        .write_all(frame.as_bytes())
        .await
        .expect("write frame");
    stdin.flush().await.expect("flush");
}

/// Reads one frame and parses it as JSON.
async fn receive(stdout: &mut BufReader<ChildStdout>) -> Value {
    let read = async {
        let mut length = None;
        loop {
            let mut line = String::new();
            assert_ne!(
                stdout.read_line(&mut line).await.expect("read header"),
                0,
                "EOF"
            );
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').expect("header line");
            assert!(
                name.eq_ignore_ascii_case("content-length"),
                "unexpected header {name}"
            );
            length = Some(value.trim().parse::<usize>().expect("length"));
        }
        let mut body = vec![0; length.expect("Content-Length")];
        stdout.read_exact(&mut body).await.expect("body");
        serde_json::from_slice(&body).expect("JSON reply")
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("a reply in time")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_handshake_signed_hooks_scripted_deny_late_and_drop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = write_script(
        dir.path(),
        &json!({
            "hello": {"timeout_config": {"default_ms": 500, "per_method_ms": {"steps/toolCallRequest": 800}}},
            "rules": [
                {"method": "steps/toolCallRequest", "tool": "get-env",
                 "then": {"action": "deny", "reasoning": "secrets stay home", "reason_codes": ["no_env"]}},
                {"method": "steps/toolCallRequest", "tool": "slow",
                 "then": {"action": "late", "delay_ms": 300, "then": {"action": "allow"}}},
                {"method": "steps/toolCallRequest", "tool": "crash", "then": {"action": "drop"}}
            ]
        }),
    );
    let secret = secret_b64();
    let mut guardian = spawn(&[
        "--stdio",
        "--secret-b64",
        &secret,
        "--script",
        script.to_str().expect("utf8 path"),
    ]);
    let mut stdin = guardian.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(guardian.stdout.take().expect("stdout"));
    let mut client = Client::new();

    let hello = client.hello("stdio");
    send(&mut stdin, &hello).await;
    let reply = receive(&mut stdout).await;
    assert_eq!(reply["id"], hello["id"]);
    assert_eq!(reply["result"]["selected_transport"], "stdio");
    assert_eq!(
        reply["result"]["timeout_config"]["per_method_ms"]["steps/toolCallRequest"],
        800
    );
    assert_eq!(reply["result"]["signature"]["key_id"], KEY_ID);
    assert!(client.verifies(&reply), "ServerHello signature");

    let allowed = client.tool_call("echo");
    send(&mut stdin, &allowed).await;
    let reply = receive(&mut stdout).await;
    assert_eq!(reply["result"]["decision"], "allow");
    assert_eq!(
        reply["result"]["request_id"],
        allowed["params"]["request_id"]
    );
    assert_eq!(
        reply["result"]["chain_hash"],
        json!(client.expected_head(1))
    );
    assert!(client.verifies(&reply), "allow signature");

    let denied = client.tool_call("get-env");
    send(&mut stdin, &denied).await;
    let reply = receive(&mut stdout).await;
    assert_eq!(reply["result"]["decision"], "deny");
    assert_eq!(reply["result"]["reasoning"], "secrets stay home");
    assert_eq!(reply["result"]["reason_codes"], json!(["no_env"]));
    assert_eq!(
        reply["result"]["chain_hash"],
        json!(client.expected_head(2))
    );
    assert!(client.verifies(&reply), "deny signature");

    // A late reply is overtaken by the reply to the next request; both
    // requests were chained in arrival order.
    let slow = client.tool_call("slow");
    let quick = client.tool_call("echo");
    send(&mut stdin, &slow).await;
    send(&mut stdin, &quick).await;
    let first = receive(&mut stdout).await;
    let second = receive(&mut stdout).await;
    assert_eq!(first["id"], quick["id"]);
    assert_eq!(
        first["result"]["chain_hash"],
        json!(client.expected_head(4))
    );
    assert_eq!(second["id"], slow["id"]);
    assert_eq!(
        second["result"]["chain_hash"],
        json!(client.expected_head(3))
    );
    assert!(client.verifies(&first) && client.verifies(&second));

    // drop on stdio: the process exits without answering.
    send(&mut stdin, &client.tool_call("crash")).await;
    let status = tokio::time::timeout(Duration::from_secs(10), guardian.wait())
        .await
        .expect("exited in time")
        .expect("wait");
    assert!(status.success(), "exit status {status}");
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).await.expect("read rest");
    assert!(rest.is_empty(), "no reply after drop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_batches_only_when_the_script_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let record = dir.path().join("record.jsonl");
    let run = |script: Value| {
        let path = write_script(dir.path(), &script);
        spawn(&[
            "--stdio",
            "--secret-b64",
            &secret_b64(),
            "--script",
            path.to_str().expect("utf8 path"),
            "--record",
            record.to_str().expect("utf8 path"),
        ])
    };

    // Default: one -32600 for the whole array, nothing chained.
    let mut guardian = run(json!({}));
    let mut stdin = guardian.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(guardian.stdout.take().expect("stdout"));
    let mut client = Client::new();
    let batch = json!([client.tool_call("echo"), client.tool_call("get-env")]);
    send(&mut stdin, &batch).await;
    let refused = receive(&mut stdout).await;
    assert_eq!(refused["error"]["code"], -32600);
    assert_eq!(refused["id"], Value::Null);
    drop(stdin);
    guardian.wait().await.expect("exit");

    // "batch": true: one array back, each element signed and chained in order.
    let mut guardian = run(json!({"batch": true, "rules": [
        {"method": "steps/toolCallRequest", "tool": "get-env", "then": {"action": "deny"}}]}));
    let mut stdin = guardian.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(guardian.stdout.take().expect("stdout"));
    let mut client = Client::new();
    let batch = json!([client.tool_call("echo"), client.tool_call("get-env")]);
    send(&mut stdin, &batch).await;
    let answers = receive(&mut stdout).await;
    let answers = answers.as_array().expect("an array reply");
    assert_eq!(answers.len(), 2);
    for (index, (answer, decision)) in answers.iter().zip(["allow", "deny"]).enumerate() {
        assert_eq!(answer["id"], batch[index]["id"]);
        assert_eq!(answer["result"]["decision"], decision);
        assert_eq!(
            answer["result"]["chain_hash"],
            json!(client.expected_head(index + 1))
        );
        assert!(client.verifies(answer), "element {index} signature");
    }
    drop(stdin);
    guardian.wait().await.expect("exit");

    let lines = common::record_lines(&record);
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["action"], "reject:batch_not_supported");
    assert!(lines[0].get("batch").is_none());
    assert_eq!(lines[1]["batch"], 1);
    assert_eq!(lines[1]["batch_index"], 0);
    assert_eq!(lines[2]["batch"], 1);
    assert_eq!(lines[2]["batch_index"], 1);
    assert_eq!(lines[2]["action"], "deny");
}
