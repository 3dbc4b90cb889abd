//! An OTLP trace collector for the tests: `tests/peers/otlp_receiver.py`
//! decodes what the proxy exports (OTLP/HTTP protobuf, and gRPC) with the
//! official `opentelemetry-proto` definitions and writes each span as a
//! JSON line, read back here.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{parse, peers_python, repo_root, Scratch};

/// A running receiver; stopped when dropped.
pub struct OtlpReceiver {
    child: Child,
    _stdin: ChildStdin,
    out: PathBuf,
    /// The OTLP/HTTP port.
    pub http_port: u16,
    /// The OTLP gRPC port (0 when not served).
    pub grpc_port: u16,
}

impl OtlpReceiver {
    /// Starts a receiver serving OTLP/HTTP, and gRPC when `grpc`.
    pub fn start(scratch: &Scratch, grpc: bool) -> Self {
        let out = scratch.path("spans.jsonl");
        let mut command = Command::new(peers_python());
        command
            .arg(repo_root().join("tests/peers/otlp_receiver.py"))
            .arg("--out")
            .arg(&out)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if grpc {
            command.arg("--grpc");
        }
        let mut child = command.spawn().expect("spawn otlp_receiver.py");
        let stdin = child.stdin.take().expect("stdin");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the receiver's ports");
        let port = |key: &str| -> u16 {
            line.split_whitespace()
                .find_map(|pair| pair.strip_prefix(key))
                .and_then(|port| port.parse().ok())
                .unwrap_or_else(|| panic!("no {key} in {line:?}"))
        };
        Self {
            http_port: port("http="),
            grpc_port: port("grpc="),
            child,
            _stdin: stdin,
            out,
        }
    }

    /// The OTLP/HTTP base URL (`[telemetry] endpoint`).
    pub fn http_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.http_port)
    }

    /// The OTLP gRPC URL.
    pub fn grpc_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.grpc_port)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .map(parse)
            .collect()
    }

    /// The spans once `done` holds of them (waiting up to 20 s).
    pub fn spans_when(&self, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + super::WAIT;
        loop {
            let spans = self.spans();
            if done(&spans) || Instant::now() > deadline {
                return spans;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The spans named `name`.
pub fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|span| span["name"] == name).collect()
}

/// The one span named `name`.
pub fn one<'a>(spans: &'a [Value], name: &str) -> &'a Value {
    let found = named(spans, name);
    assert_eq!(found.len(), 1, "one {name} span expected in {spans:#?}");
    found[0]
}

/// The span whose id is `id`.
pub fn by_id<'a>(spans: &'a [Value], id: &Value) -> Option<&'a Value> {
    spans.iter().find(|span| &span["span_id"] == id)
}

/// Whether `child`'s parent is `parent` (same trace, parent span id).
pub fn is_child_of(child: &Value, parent: &Value) -> bool {
    child["trace_id"] == parent["trace_id"] && child["parent_span_id"] == parent["span_id"]
}
