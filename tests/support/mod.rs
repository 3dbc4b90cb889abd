//! Test doubles and drivers for the integration tests, kept in one place:
//! the built `acs-proxy` binary with a throwaway config, the demo MCP
//! server, and readers for what each side saw.
//!
//! Everything here runs real processes over real pipes.

#![allow(dead_code)]

pub mod mcp_servers;

pub mod guardian;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long a test waits for one expected message.
pub const WAIT: Duration = Duration::from_secs(20);

/// The `acs-proxy` binary under test.
pub fn proxy_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_acs-proxy"))
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The demo MCP server, built on demand (it is another workspace package,
/// so cargo does not build it for this crate's tests by itself).
pub fn demo_server_bin() -> PathBuf {
    let target = proxy_bin()
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| repo_root().join("target/debug"));
    let path = target.join("acs-proxy-demo-server");
    if !path.exists() {
        let status = Command::new(env!("CARGO"))
            .args(["build", "-p", "acs-proxy-demo-server"])
            .current_dir(repo_root())
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the demo server failed");
    }
    path
}

/// `node` and server-everything from `tests/peers` (installed by `.ci/install-peers`).
pub fn server_everything() -> Vec<String> {
    let script = repo_root()
        .join("tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        script.exists(),
        "server-everything is not installed: run .ci/install-peers ({})",
        script.display()
    );
    vec!["node".into(), script.display().to_string(), "stdio".into()]
}

/// The Python interpreter of `tests/peers/.venv` with the `mcp` SDK.
pub fn peers_python() -> PathBuf {
    let python = repo_root().join("tests/peers/.venv/bin/python");
    assert!(
        python.exists(),
        "the Python test peers are not installed: run .ci/install-peers ({})",
        python.display()
    );
    python
}

/// A scratch directory holding one test's config, audit log and recordings.
pub struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    /// A fresh directory.
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    /// A path inside it.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The audit log path every config written here uses.
    pub fn audit_log(&self) -> PathBuf {
        self.path("audit.jsonl")
    }

    /// What the demo server received, one raw line each.
    pub fn server_record(&self) -> PathBuf {
        self.path("server-received.jsonl")
    }

    /// Writes a `proxy.toml` in front of the demo server (recording what it
    /// receives) with the given extra TOML (sections, `[[policy.rule]]`s).
    pub fn demo_config(&self, extra: &str) -> PathBuf {
        let command = vec![
            demo_server_bin().display().to_string(),
            "--record".into(),
            self.server_record().display().to_string(),
        ];
        self.config(&command, extra)
    }

    /// Like [`Scratch::demo_config`], with `record_content = true` added to
    /// the `[audit]` section the config always has: every audit entry then
    /// carries `hook_params`, the exact `params` the proxy built for its hook.
    pub fn demo_config_recording_content(&self, extra: &str) -> PathBuf {
        let path = self.demo_config(extra);
        let text = std::fs::read_to_string(&path).expect("read config");
        assert!(
            text.starts_with("[[upstream]]") && text.contains("\n[audit]\n"),
            "unexpected config layout:\n{text}"
        );
        let text = text.replacen("\n[audit]\n", "\n[audit]\nrecord_content = true\n", 1);
        std::fs::write(&path, text).expect("write config");
        path
    }

    /// Like [`Scratch::demo_config`], with a remote Guardian: `guardian`
    /// holds the `[guardian]` keys besides `mode = "remote"` (the endpoint,
    /// the secret, timeouts, postures; see [`guardian::TestGuardian`]), and
    /// `extra` any other sections.
    pub fn remote_demo_config(&self, guardian: &str, extra: &str) -> PathBuf {
        self.demo_config(&format!(
            "[guardian]\nmode = \"remote\"\n{guardian}\n{extra}"
        ))
    }

    /// Writes a `proxy.toml` in front of `command`.
    pub fn config(&self, command: &[String], extra: &str) -> PathBuf {
        let command = command
            .iter()
            .map(|arg| format!("{arg:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        let audit = self.audit_log();
        let text = format!(
            "[[upstream]]\nname = \"demo\"\ncommand = [{command}]\nshutdown_grace_ms = 500\n\n[audit]\npath = {:?}\nfsync = \"always\"\n\n{extra}\n",
            audit.display().to_string()
        );
        let path = self.path("proxy.toml");
        std::fs::write(&path, text).expect("write config");
        path
    }

    /// Every line the demo server received, parsed.
    pub fn server_received(&self) -> Vec<Value> {
        self.server_lines().iter().map(|line| parse(line)).collect()
    }

    /// Every line the demo server received, as raw text.
    pub fn server_lines(&self) -> Vec<String> {
        std::fs::read_to_string(self.server_record())
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Every audit entry, parsed.
    pub fn audit_entries(&self) -> Vec<Value> {
        std::fs::read_to_string(self.audit_log())
            .unwrap_or_default()
            .lines()
            .map(parse)
            .collect()
    }

    /// Runs `acs-proxy audit verify` on the log and asserts it passes.
    pub fn assert_audit_verifies(&self) {
        let output = Command::new(proxy_bin())
            .args(["audit", "verify"])
            .arg(self.audit_log())
            .output()
            .expect("run audit verify");
        assert!(
            output.status.success(),
            "audit verify failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

impl Default for Scratch {
    fn default() -> Self {
        Self::new()
    }
}

/// Parses one JSON line, failing the test with the line when it is not JSON.
pub fn parse(line: &str) -> Value {
    serde_json::from_str(line).unwrap_or_else(|err| panic!("not JSON ({err}): {line}"))
}

/// A running `acs-proxy` driven over its stdin/stdout like an agent would.
pub struct Proxy {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Proxy {
    /// Starts `acs-proxy --config CONFIG`.
    pub fn start(config: &Path) -> Self {
        Self::start_with(&["--config".into(), config.display().to_string()])
    }

    /// Starts `acs-proxy` with these arguments.
    pub fn start_with(args: &[String]) -> Self {
        let mut child = Command::new(proxy_bin())
            .args(args)
            .env("ACS_PROXY_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn acs-proxy");
        let stdout = child.stdout.take().expect("stdout");
        let stdin = child.stdin.take();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            stdin,
            lines,
        }
    }

    /// Writes raw text followed by a newline.
    pub fn send_raw(&mut self, text: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(text.as_bytes()).expect("write");
        stdin.write_all(b"\n").expect("write");
        stdin.flush().expect("flush");
    }

    /// Writes raw bytes as they are (for invalid UTF-8).
    pub fn send_bytes(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write");
        stdin.flush().expect("flush");
    }

    /// Writes one JSON message.
    pub fn send(&mut self, message: &Value) {
        self.send_raw(&message.to_string());
    }

    /// The next line the proxy writes, raw.
    pub fn recv_raw(&mut self) -> String {
        match self.lines.recv_timeout(WAIT) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => panic!("no message from the proxy within {WAIT:?}"),
            Err(RecvTimeoutError::Disconnected) => panic!("the proxy closed its stdout"),
        }
    }

    /// The next message the proxy writes.
    pub fn recv(&mut self) -> Value {
        parse(&self.recv_raw())
    }

    /// Reads until a message matches `wanted`, returning it and what came before.
    pub fn recv_until(&mut self, wanted: impl Fn(&Value) -> bool) -> (Value, Vec<Value>) {
        let mut before = Vec::new();
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            let message = self.recv();
            if wanted(&message) {
                return (message, before);
            }
            before.push(message);
        }
        panic!("no matching message within {WAIT:?}; saw {before:?}");
    }

    /// The response with this id, skipping anything else.
    pub fn response(&mut self, id: &Value) -> Value {
        self.recv_until(|m| m.get("id") == Some(id) && m.get("method").is_none())
            .0
    }

    /// Asserts nothing more arrives within `quiet`.
    pub fn assert_silent(&mut self, quiet: Duration) {
        if let Ok(line) = self.lines.recv_timeout(quiet) {
            panic!("unexpected message: {line}");
        }
    }

    /// `initialize` + `notifications/initialized`, returning the result.
    pub fn initialize(&mut self, capabilities: Value) -> Value {
        self.send(
            &serde_json::json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":capabilities,
            "clientInfo":{"name":"integration-test","version":"1"}}}),
        );
        let result = self.response(&Value::from("init"));
        self.send(&serde_json::json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        result
    }

    /// Closes the proxy's stdin (the agent went away).
    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Waits for the proxy to exit.
    pub fn wait(&mut self) -> ExitStatus {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "acs-proxy did not exit within {WAIT:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Closes stdin and waits for a clean exit.
    pub fn finish(&mut self) -> ExitStatus {
        self.close_stdin();
        self.wait()
    }

    /// The proxy's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `tools/call` request.
pub fn tool_call(id: i64, name: &str, arguments: Value) -> Value {
    serde_json::json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":name,"arguments":arguments}})
}

/// Entries of the audit log with this `step_type`.
pub fn entries_of<'a>(entries: &'a [Value], step_type: &str) -> Vec<&'a Value> {
    entries
        .iter()
        .filter(|e| e["step_type"] == step_type)
        .collect()
}
