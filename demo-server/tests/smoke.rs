//! Smoke test: drives the built demo server over real pipes.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::Duration;

use serde_json::{json, Value};

/// How long to wait for any one line from the server.
const TIMEOUT: Duration = Duration::from_secs(10);

/// A running demo server with line-oriented access to its pipes.
struct Peer {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Peer {
    /// Starts the server with extra arguments.
    fn start(args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_acs-proxy-demo-server"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn demo server");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Self {
            child,
            stdin,
            lines,
        }
    }

    /// Sends one raw line (a newline is appended).
    fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).expect("write");
        stdin.write_all(b"\n").expect("write");
        stdin.flush().expect("flush");
    }

    /// Sends one message.
    fn send(&mut self, message: Value) {
        self.send_raw(&message.to_string());
    }

    /// The next line, parsed.
    fn recv(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(TIMEOUT)
            .expect("a line from the server in time");
        serde_json::from_str(&line).expect("the server writes JSON lines")
    }

    /// Whether nothing arrives within `wait`.
    fn quiet_for(&self, wait: Duration) -> Option<String> {
        self.lines.recv_timeout(wait).ok()
    }

    /// Sends a request and returns the next line (which must be its response).
    fn call(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let reply = self.recv();
        assert_eq!(reply["id"], json!(id), "reply {reply}");
        reply
    }

    /// Closes stdin and waits for a clean exit.
    fn finish(mut self) {
        drop(self.stdin.take());
        let status = self.child.wait().expect("wait");
        assert!(status.success(), "exit status {status}");
    }
}

fn tool_text(reply: &Value) -> &str {
    reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

#[test]
fn lifecycle_tools_resources_prompts() {
    let mut peer = Peer::start(&[]);
    let init = peer.call(1, "initialize", json!({"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}));
    assert_eq!(init["result"]["protocolVersion"], "2025-03-26");
    assert_eq!(
        init["result"]["serverInfo"]["name"],
        "acs-proxy-demo-server"
    );
    assert_eq!(init["result"]["capabilities"]["tools"]["listChanged"], true);
    peer.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    let old = peer.call(2, "initialize", json!({"protocolVersion": "2099-01-01"}));
    assert_eq!(old["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(peer.call(3, "ping", json!({}))["result"], json!({}));

    let tools = peer.call(4, "tools/list", json!({}));
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "echo",
            "add",
            "get-env",
            "lookup-user",
            "slow",
            "sample",
            "change-tools"
        ]
    );

    let echo = peer.call(
        5,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "a \"quoted\" ü\n line"}}),
    );
    assert_eq!(tool_text(&echo), "a \"quoted\" ü\n line");
    assert_eq!(
        tool_text(&peer.call(
            6,
            "tools/call",
            json!({"name": "add", "arguments": {"a": 2, "b": 3}})
        )),
        "5"
    );
    assert!(
        tool_text(&peer.call(7, "tools/call", json!({"name": "get-env"})))
            .contains("API_KEY=sk-demo0123456789abcdef")
    );
    let user = peer.call(
        8,
        "tools/call",
        json!({"name": "lookup-user", "arguments": {"name": "Ada"}}),
    );
    assert_eq!(
        tool_text(&user),
        "name: Ada, email: ada@example.com, ssn: 123-45-6789"
    );
    let unknown = peer.call(9, "tools/call", json!({"name": "nope"}));
    assert_eq!(unknown["error"]["code"], -32602);

    let read = peer.call(10, "resources/read", json!({"uri": "demo://readme"}));
    assert_eq!(read["result"]["contents"][0]["uri"], "demo://readme");
    assert_eq!(
        peer.call(11, "resources/read", json!({"uri": "demo://nope"}))["error"]["code"],
        -32002
    );
    let prompt = peer.call(
        12,
        "prompts/get",
        json!({"name": "greeting", "arguments": {"name": "Ada"}}),
    );
    assert_eq!(
        prompt["result"]["messages"][0]["content"]["text"],
        "Please greet Ada warmly."
    );
    assert_eq!(
        peer.call(13, "logging/setLevel", json!({"level": "info"}))["result"],
        json!({})
    );
    assert_eq!(peer.call(14, "no/such", json!({}))["error"]["code"], -32601);
    peer.finish();
}

#[test]
fn parse_errors_and_batches() {
    let mut peer = Peer::start(&[]);
    peer.send_raw("{not json");
    let err = peer.recv();
    assert_eq!(
        err,
        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}})
    );
    peer.send_raw(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":2,"method":"x"}]"#);
    let batch = peer.recv();
    assert_eq!(batch.as_array().map(Vec::len), Some(2), "{batch}");
    assert_eq!(batch[0]["id"], 1);
    assert_eq!(batch[1]["error"]["code"], -32601);
    peer.send_raw(r#"[{"jsonrpc":"2.0","method":"notifications/initialized"}]"#);
    peer.send_raw(r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#);
    assert_eq!(
        peer.recv()["id"],
        3,
        "an all-notification batch gets no reply"
    );
    peer.finish();
}

#[test]
fn slow_progress_and_cancellation() {
    let mut peer = Peer::start(&[]);
    peer.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "slow", "arguments": {"ms": 60, "steps": 3}, "_meta": {"progressToken": "tok"}}}));
    for step in 1..=3 {
        let progress = peer.recv();
        assert_eq!(progress["method"], "notifications/progress");
        assert_eq!(
            progress["params"],
            json!({"progressToken": "tok", "progress": step, "total": 3})
        );
    }
    assert_eq!(tool_text(&peer.recv()), "slept 60 ms");

    peer.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "slow", "arguments": {"ms": 5000}}}));
    peer.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2, "reason": "test"}}));
    assert_eq!(peer.call(3, "ping", json!({}))["result"], json!({}));
    assert_eq!(
        peer.quiet_for(Duration::from_millis(300)),
        None,
        "a cancelled call gets no response"
    );
    peer.finish();
}

#[test]
fn sampling_round_trip_and_tool_list_changes() {
    let mut peer = Peer::start(&[]);
    peer.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "sample", "arguments": {"prompt": "say hi"}}}));
    let request = peer.recv();
    assert_eq!(request["method"], "sampling/createMessage");
    assert_eq!(request["id"], "srv-1");
    assert_eq!(
        request["params"]["messages"][0]["content"]["text"],
        "say hi"
    );
    peer.send(json!({"jsonrpc": "2.0", "id": "srv-1", "result": {"role": "assistant", "model": "m", "content": {"type": "text", "text": "hi!"}}}));
    let reply = peer.recv();
    assert_eq!(reply["id"], 1);
    assert_eq!(tool_text(&reply), "hi!");

    peer.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "change-tools"}}));
    assert_eq!(
        peer.recv(),
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    );
    assert_eq!(peer.recv()["id"], 2);
    let tools = peer.call(3, "tools/list", json!({}));
    assert_eq!(
        tools["result"]["tools"]
            .as_array()
            .and_then(|t| t.last())
            .map(|t| t["name"].clone()),
        Some(json!("extra-tool"))
    );
    assert_eq!(
        tool_text(&peer.call(4, "tools/call", json!({"name": "extra-tool"}))),
        "extra-tool called"
    );
    peer.finish();
}

#[test]
fn record_keeps_the_exact_bytes() {
    let dir = std::env::temp_dir().join(format!("demo-server-record-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("received.jsonl");
    let _ = std::fs::remove_file(&path);
    let mut peer = Peer::start(&["--record", path.to_str().expect("utf-8 path")]);
    let lines = [
        r#"{ "jsonrpc" : "2.0", "id" : 1.50, "method" : "ping" }"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"\u00fc"}}}"#,
    ];
    for line in lines {
        peer.send_raw(line);
        peer.recv();
    }
    peer.finish();
    let recorded = std::fs::read_to_string(&path).expect("record file");
    assert_eq!(recorded, format!("{}\n{}\n", lines[0], lines[1]));
    let _ = std::fs::remove_dir_all(&dir);
}
