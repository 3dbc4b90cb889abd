//! Shared helpers for the integration tests: an ACS client built by hand
//! (requests signed with the crate's signing module, which the unit tests
//! pin to the reference vectors), an independent recomputation of the
//! Guardian's chain head from the README's formula, and process helpers.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use acs_test_guardian::signing::{self, SessionKey};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use tokio::process::{Child, Command};

/// The shared secret the tests start the Guardian with.
pub const SECRET: &[u8] = b"integration-test-secret-32-bytes";

/// The `key_id` the test client signs with.
pub const KEY_ID: &str = "k-test";

/// The base64 spelling of [`SECRET`] for `--secret-b64`.
pub fn secret_b64() -> String {
    STANDARD.encode(SECRET)
}

/// A hand-built Observed Agent for one session.
pub struct Client {
    pub session_id: String,
    pub key: SessionKey,
    /// (request_id, method, params) of every chained request, in order.
    pub sent: Vec<(String, String, Value)>,
}

impl Client {
    pub fn new() -> Client {
        let session_id = uuid::Uuid::new_v4().to_string();
        Client {
            key: SessionKey::derive(SECRET, &session_id),
            session_id,
            sent: Vec::new(),
        }
    }

    /// A signed request for `method` with `payload`, stamped now.
    pub fn request(&mut self, method: &str, payload: Value) -> Value {
        let request_id = uuid::Uuid::new_v4().to_string();
        let timestamp = OffsetDateTime::now_utc()
            .format(&Rfc3339)
            .expect("format now");
        let mut envelope = json!({
            "jsonrpc": "2.0",
            "id": request_id,
            "method": method,
            "params": {
                "acs_version": "0.1.0",
                "request_id": request_id,
                "timestamp": timestamp,
                "metadata": {"agent_id": "integration-test", "session_id": self.session_id},
                "payload": payload
            }
        });
        assert!(signing::sign_in_place(&self.key, &mut envelope, KEY_ID));
        if method != "handshake/hello" && method != "system/ping" {
            self.sent
                .push((request_id, method.to_owned(), envelope["params"].clone()));
        }
        envelope
    }

    /// The ClientHello handshake request.
    pub fn hello(&mut self, transport: &str) -> Value {
        self.request(
            "handshake/hello",
            json!({
                "acs_versions_supported": ["0.1.0"],
                "methods_implemented": ["steps/toolCallRequest", "steps/toolCallResult", "system/ping"],
                "transports_supported": [transport],
                "provenance_producer": "none",
                "wrapped_protocols": [{"protocol": "MCP", "version": "2025-06-18"}]
            }),
        )
    }

    /// A `steps/toolCallRequest` for `tool`.
    pub fn tool_call(&mut self, tool: &str) -> Value {
        self.request(
            "steps/toolCallRequest",
            json!({"tool": {"name": tool}, "arguments": {"path": {"value": "/tmp/x"}}}),
        )
    }

    /// Whether `reply` carries a valid signature under this session's key.
    pub fn verifies(&self, reply: &Value) -> bool {
        signing::verify(&self.key, reply).is_ok()
    }

    /// The chain head after the first `n` chained requests, recomputed here
    /// from the README's formula (not with the crate's chain module).
    pub fn expected_head(&self, n: usize) -> String {
        let mut previous: Option<[u8; 32]> = None;
        for (index, (request_id, method, params)) in self.sent.iter().take(n).enumerate() {
            let request_hash = hex::encode(Sha256::digest(jcs(params)));
            let entry = json!({
                "entry_id": (index + 1).to_string(),
                "step_id": request_id,
                "step_type": method,
                "request_hash": request_hash,
                "timestamp": params["timestamp"],
            });
            let mut hasher = Sha256::new();
            hasher.update(jcs(&entry));
            if let Some(previous) = previous {
                hasher.update(previous);
            }
            previous = Some(hasher.finalize().into());
        }
        hex::encode(previous.expect("at least one chained request"))
    }
}

fn jcs(value: &Value) -> Vec<u8> {
    serde_json_canonicalizer::to_vec(value).expect("canonical JSON")
}

/// The test-guardian binary with `args`, stdin/stdout piped, stderr inherited.
pub fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_acs-test-guardian"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn acs-test-guardian")
}

/// Writes `script` to `dir/script.json` and returns its path.
pub fn write_script(dir: &Path, script: &Value) -> PathBuf {
    let path = dir.join("script.json");
    std::fs::write(&path, script.to_string()).expect("write script");
    path
}

/// The `--record` file's lines.
pub fn record_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("read record")
        .lines()
        .map(|line| serde_json::from_str(line).expect("record line is JSON"))
        .collect()
}

/// Waits for `path` to exist and returns its contents.
pub async fn wait_for_file(path: &Path) -> String {
    for _ in 0..500 {
        if let Ok(text) = std::fs::read_to_string(path) {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{} never appeared", path.display());
}
