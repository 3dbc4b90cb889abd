//! Test doubles and drivers for the integration tests, kept in one place:
//! the built `acs-proxy` binary with a throwaway config, the demo MCP
//! server, and readers for what each side saw.
//!
//! Everything here runs real processes over real pipes.

#![allow(dead_code)]

pub mod mcp_servers;

pub mod otlp;

pub mod guardian;

pub mod faults;

pub mod pairs;

pub mod oauth;

pub mod prometheus;

pub mod policies;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long a test waits for one expected message.
pub const WAIT: Duration = Duration::from_secs(20);

/// The `acs-proxy` binary under test: `$ACS_PROXY_BIN` when set, so the
/// suite can run against another build of the same tree (the profile-guided
/// one of `.ci/build-release --pgo`), else the one cargo built for the tests.
pub fn proxy_bin() -> PathBuf {
    match std::env::var_os("ACS_PROXY_BIN") {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => PathBuf::from(env!("CARGO_BIN_EXE_acs-proxy")),
    }
}

/// Where cargo put the binaries of this test build; the other workspace
/// binaries the tests run are built there, whichever gateway is under test.
fn cargo_bin_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_acs-proxy"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| repo_root().join("target/debug"))
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `GET /metrics` from a proxy's `[metrics] address` on 127.0.0.1:`port`,
/// retried until it answers.
pub fn metrics_text(port: u16) -> String {
    use std::io::Read;
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            let request = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
            if stream.write_all(request.as_bytes()).is_ok() {
                let mut body = String::new();
                if stream.read_to_string(&mut body).is_ok() && body.contains("acs_proxy_") {
                    return body;
                }
            }
        }
        assert!(Instant::now() < deadline, "no /metrics on port {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A free TCP port on 127.0.0.1 (bound, then released: a server started
/// on it may still lose a race).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind 127.0.0.1:0")
        .local_addr()
        .expect("local addr")
        .port()
}

/// A process's resident set size in KiB (`VmRSS` of `/proc/<pid>/status`).
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// `bin` of workspace package `package`, built in the same target profile
/// as `acs-proxy` (cargo does not build another package's binaries for this
/// crate's tests; rebuilding an up-to-date binary is a no-op).
pub fn workspace_bin(package: &str, bin: &str) -> PathBuf {
    let target = cargo_bin_dir();
    let mut build = Command::new(env!("CARGO"));
    build
        .args(["build", "-p", package, "--bin", bin])
        .current_dir(repo_root());
    if target.file_name().is_some_and(|name| name == "release") {
        build.arg("--release");
    }
    let status = build.status().expect("cargo runs");
    assert!(status.success(), "building {bin} failed");
    let path = target.join(format!("{bin}{}", std::env::consts::EXE_SUFFIX));
    assert!(path.exists(), "no {bin} at {}", path.display());
    path
}

/// The demo MCP server, built on demand (it is another workspace package,
/// so cargo does not build it for this crate's tests by itself).
pub fn demo_server_bin() -> PathBuf {
    let target = cargo_bin_dir();
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

/// `node` and server-filesystem from `tests/peers`, serving `root`.
pub fn server_filesystem(root: &Path) -> Vec<String> {
    let script = repo_root()
        .join("tests/peers/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    assert!(
        script.exists(),
        "server-filesystem is not installed: run .ci/install-peers ({})",
        script.display()
    );
    vec![
        "node".into(),
        script.display().to_string(),
        root.display().to_string(),
    ]
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
        let mut proxy = Self::start_logging_to(args, Stdio::piped());
        // Relayed rather than inherited, so that a file size limit a test
        // sets on the proxy applies to its audit log alone, whatever the
        // test's own stderr is.
        let stderr = proxy.child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                eprintln!("{line}");
            }
        });
        proxy
    }

    /// Starts `acs-proxy` with these arguments, its log lines going to `stderr`.
    pub fn start_logging_to(args: &[String], stderr: Stdio) -> Self {
        let mut child = Command::new(proxy_bin())
            .args(args)
            .env("ACS_PROXY_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
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

    /// The next message the proxy has written, if one is there already.
    pub fn try_recv(&mut self) -> Option<Value> {
        self.lines.try_recv().ok().map(|line| parse(&line))
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
        let stdin = &mut self.stdin;
        end(&mut self.child, |_| drop(stdin.take()));
    }
}

/// How long a dropped handle waits for a gateway asked to stop.
const GRACEFUL_STOP: Duration = Duration::from_secs(2);

/// Ends the gateway of a dropped handle. Normally a kill: the test has
/// checked what it wanted. With `ACS_PROXY_TEST_STOP=graceful` the gateway
/// is first asked to stop as an operator would (`ask`: stdin closed, or
/// SIGTERM) and given [`GRACEFUL_STOP`] to exit, because an instrumented
/// build writes its profile only when it exits cleanly:
/// `.ci/build-release --pgo` trains on this suite that way.
pub fn end(child: &mut Child, ask: impl FnOnce(&mut Child)) {
    if std::env::var_os("ACS_PROXY_TEST_STOP").is_some_and(|mode| mode == "graceful") {
        ask(child);
        let deadline = Instant::now() + GRACEFUL_STOP;
        while Instant::now() < deadline {
            if !matches!(child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Sends SIGTERM to `child`, as a service manager stopping it would.
pub fn sigterm(child: &mut Child) {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
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

/// A `[listen]` section for a network transport on a free loopback port
/// (`127.0.0.1:0`; [`NetProxy`] reads the bound address), with extra keys.
pub fn listen_section(transport: &str, extra: &str) -> String {
    format!("[listen]\ntransport = {transport:?}\naddress = \"127.0.0.1:0\"\n{extra}\n")
}

/// A running `acs-proxy` serving a network transport (`[listen] transport =
/// "http"` or `"ws"`), started with `--config`. The bound address comes from
/// the `acs-proxy: listening on <scheme>://<addr> (...)` line on its stderr;
/// the rest of its stderr is kept for [`NetProxy::stderr`].
pub struct NetProxy {
    child: Child,
    /// The bound socket address.
    pub addr: std::net::SocketAddr,
    /// `http`, `https`, `ws` or `wss`.
    pub scheme: String,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

impl NetProxy {
    /// Starts `acs-proxy --config CONFIG` and waits until it listens.
    pub fn start(config: &Path) -> Self {
        Self::start_logging(config, "warn")
    }

    /// Like [`NetProxy::start`], logging at `level` (`ACS_PROXY_LOG`).
    pub fn start_logging(config: &Path, level: &str) -> Self {
        let mut child = Command::new(proxy_bin())
            .arg("--config")
            .arg(config)
            .env("ACS_PROXY_LOG", level)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn acs-proxy");
        let stderr = child.stderr.take().expect("stderr");
        let kept = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        let sink = kept.clone();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                eprintln!("[acs-proxy] {line}");
                if let Some(rest) = line.strip_prefix("acs-proxy: listening on ") {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(rest.to_owned());
                    }
                }
                let mut kept = sink.lock().unwrap_or_else(|e| e.into_inner());
                kept.push_str(&line);
                kept.push('\n');
            }
        });
        let listening = match rx.recv_timeout(WAIT) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                panic!("acs-proxy did not start listening within {WAIT:?}");
            }
        };
        let (scheme, rest) = listening.split_once("://").expect("scheme://addr");
        let addr = rest
            .split_whitespace()
            .next()
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in {listening:?}"));
        Self {
            child,
            addr,
            scheme: scheme.to_owned(),
            stderr: kept,
        }
    }

    /// The proxy's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `<scheme>://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("{}://{}{path}", self.scheme, self.addr)
    }

    /// Everything the proxy wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Sends SIGTERM and waits for the exit.
    pub fn terminate(&mut self) -> ExitStatus {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
        self.wait()
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
}

impl Drop for NetProxy {
    fn drop(&mut self) {
        end(&mut self.child, sigterm);
    }
}

/// The session chains `acs-proxy audit verify` reports, and whether each is
/// sealed; the listener's edge chain (requests refused before reaching a
/// session, see [`edge_entries`]) is left out.
pub fn audit_chains(scratch: &Scratch) -> Vec<(String, bool)> {
    let output = Command::new(proxy_bin())
        .args(["audit", "verify"])
        .arg(scratch.audit_log())
        .output()
        .expect("run audit verify");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "audit verify failed: {text}");
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("session "))
        .map(|rest| {
            let id = rest.split(':').next().unwrap_or("").to_owned();
            let rest = rest.trim_end();
            (id, rest.ends_with(", sealed"))
        })
        .filter(|(id, _)| !id.starts_with(EDGE_CHAIN_PREFIX))
        .collect()
}

/// [`audit_chains`] once `done` holds for them. With `fsync = "batch"`
/// an entry reaches the file within the writer's group-commit window, so
/// a test that reads the log while the proxy runs waits for it.
pub fn audit_chains_once(
    scratch: &Scratch,
    done: impl Fn(&[(String, bool)]) -> bool,
) -> Vec<(String, bool)> {
    read_until(|| audit_chains(scratch), |chains| done(chains))
}

/// What `read` gives once `done` holds for it, or after [`WAIT`].
fn read_until<T>(read: impl Fn() -> T, done: impl Fn(&T) -> bool) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        let value = read();
        if done(&value) || Instant::now() >= deadline {
            return value;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `session_id` prefix of the listener's edge chain.
pub const EDGE_CHAIN_PREFIX: &str = "edge-";

/// The entries of the listener's edge chain: requests refused at the HTTP
/// layer.
pub fn edge_entries(scratch: &Scratch) -> Vec<Value> {
    scratch
        .audit_entries()
        .into_iter()
        .filter(|e| {
            e["session_id"]
                .as_str()
                .is_some_and(|id| id.starts_with(EDGE_CHAIN_PREFIX))
        })
        .collect()
}

/// [`edge_entries`] once `done` holds for them. A refusal is recorded
/// after its response is sent (recording never holds a response back), so
/// a test that reads the edge chain while the proxy runs waits for it.
pub fn edge_entries_once(scratch: &Scratch, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    read_until(|| edge_entries(scratch), |entries| done(entries))
}

/// An MCP client over Streamable HTTP for the downstream tests: raw
/// requests with the session headers, and an incremental SSE reader.
pub mod mcp_http {
    use std::time::Duration;

    use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
    use reqwest::{Client, RequestBuilder, Response, StatusCode};
    use serde_json::{json, Value};

    use super::WAIT;

    /// `application/json, text/event-stream`.
    pub const ACCEPT_BOTH: &str = "application/json, text/event-stream";

    /// A reqwest client that uses rustls with ring, trusting `roots` (PEM)
    /// besides nothing else; no proxy, no redirects.
    pub fn client(roots: Option<&[u8]>) -> Client {
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let mut store = rustls::RootCertStore::empty();
        if let Some(pem) = roots {
            use rustls::pki_types::pem::PemObject;
            for cert in rustls::pki_types::CertificateDer::pem_slice_iter(pem) {
                store.add(cert.expect("PEM certificate")).expect("root");
            }
        }
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(store)
            .with_no_client_auth();
        Client::builder()
            .tls_backend_preconfigured(tls)
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("HTTP client")
    }

    /// One SSE event.
    #[derive(Debug, Clone, Default)]
    pub struct SseEvent {
        pub id: Option<String>,
        pub event: Option<String>,
        pub data: String,
    }

    impl SseEvent {
        /// `data` as JSON.
        pub fn json(&self) -> Value {
            super::parse(&self.data)
        }
    }

    /// Reads SSE events from a response as they arrive.
    pub struct SseStream {
        pub response: Response,
        buf: String,
    }

    impl SseStream {
        pub fn new(response: Response) -> Self {
            Self {
                response,
                buf: String::new(),
            }
        }

        /// The next event, `None` at the end of the stream; fails the test
        /// after [`WAIT`].
        pub async fn next(&mut self) -> Option<SseEvent> {
            match self.next_within(WAIT).await {
                Ok(event) => event,
                Err(_) => panic!("no SSE event within {WAIT:?}"),
            }
        }

        /// The next event, or `Err` when none came within `limit`.
        pub async fn next_within(&mut self, limit: Duration) -> Result<Option<SseEvent>, ()> {
            let deadline = tokio::time::Instant::now() + limit;
            loop {
                if let Some(event) = self.take_event() {
                    return Ok(Some(event));
                }
                let chunk = tokio::time::timeout_at(deadline, self.response.chunk())
                    .await
                    .map_err(|_| ())?;
                match chunk {
                    Ok(Some(bytes)) => self.buf.push_str(&String::from_utf8_lossy(&bytes)),
                    Ok(None) | Err(_) => return Ok(None),
                }
            }
        }

        /// The next event carrying data (skips priming events).
        pub async fn next_message(&mut self) -> Option<SseEvent> {
            loop {
                let event = self.next().await?;
                if !event.data.is_empty() {
                    return Some(event);
                }
            }
        }

        fn take_event(&mut self) -> Option<SseEvent> {
            loop {
                let end = self.buf.find("\n\n")?;
                let block: String = self.buf.drain(..end + 2).collect();
                let mut event = SseEvent::default();
                let mut any_field = false;
                for line in block.lines() {
                    if line.starts_with(':') || line.is_empty() {
                        continue;
                    }
                    let (field, value) = line.split_once(':').unwrap_or((line, ""));
                    let value = value.strip_prefix(' ').unwrap_or(value);
                    any_field = true;
                    match field {
                        "id" => event.id = Some(value.to_owned()),
                        "event" => event.event = Some(value.to_owned()),
                        "data" => {
                            if !event.data.is_empty() {
                                event.data.push('\n');
                            }
                            event.data.push_str(value);
                        }
                        _ => {}
                    }
                }
                if any_field {
                    return Some(event);
                }
            }
        }
    }

    /// An MCP session over Streamable HTTP.
    pub struct McpHttp {
        pub client: Client,
        pub url: String,
        pub session: Option<String>,
        pub version: Option<String>,
        pub extra: HeaderMap,
    }

    impl McpHttp {
        pub fn new(client: Client, url: String) -> Self {
            Self {
                client,
                url,
                session: None,
                version: None,
                extra: HeaderMap::new(),
            }
        }

        /// Adds a header to every request.
        pub fn header(mut self, name: &str, value: &str) -> Self {
            self.extra.insert(
                HeaderName::from_bytes(name.as_bytes()).expect("header name"),
                HeaderValue::from_str(value).expect("header value"),
            );
            self
        }

        fn with_session(&self, builder: RequestBuilder) -> RequestBuilder {
            let mut builder = builder.headers(self.extra.clone());
            if let Some(id) = &self.session {
                builder = builder.header("mcp-session-id", id);
            }
            if let Some(version) = &self.version {
                builder = builder.header("mcp-protocol-version", version);
            }
            builder
        }

        /// POST raw text with this Accept.
        pub async fn post_text(&self, body: &str, accept: &str) -> Response {
            self.with_session(self.client.post(&self.url))
                .header("content-type", "application/json")
                .header("accept", accept)
                .body(body.to_owned())
                .send()
                .await
                .expect("POST")
        }

        /// POST one message (or batch), accepting JSON and SSE.
        pub async fn post(&self, message: &Value) -> Response {
            self.post_text(&message.to_string(), ACCEPT_BOTH).await
        }

        /// `initialize` (+ `notifications/initialized`): keeps the session id
        /// and the negotiated version; returns the result.
        pub async fn initialize(&mut self, version: &str, capabilities: Value) -> Value {
            let response = self
                .post(
                    &json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
                    "protocolVersion":version,"capabilities":capabilities,
                    "clientInfo":{"name":"downstream-test","version":"1"}}}),
                )
                .await;
            assert_eq!(response.status(), StatusCode::OK, "initialize");
            let session = response
                .headers()
                .get("mcp-session-id")
                .expect("Mcp-Session-Id on the initialize response")
                .to_str()
                .expect("visible ASCII")
                .to_owned();
            let reply = read_reply(response, &json!("init")).await.0;
            let result = reply["result"].clone();
            assert!(result.is_object(), "initialize failed: {reply}");
            self.session = Some(session);
            self.version = result["protocolVersion"].as_str().map(str::to_owned);
            let status = self
                .notify(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}))
                .await;
            assert_eq!(status, StatusCode::ACCEPTED);
            result
        }

        /// POST a notification or response; the status.
        pub async fn notify(&self, message: &Value) -> StatusCode {
            self.post(message).await.status()
        }

        /// POST a request and read its SSE stream to the response; returns
        /// the response and what came before it.
        pub async fn request(&self, message: &Value) -> (Value, Vec<Value>) {
            let response = self.post(message).await;
            assert_eq!(response.status(), StatusCode::OK, "POST {message}");
            read_reply(response, &message["id"]).await
        }

        /// GET the standalone stream (or resume one with `Last-Event-ID`).
        pub async fn get(&self, last_event_id: Option<&str>) -> Response {
            let mut builder = self
                .with_session(self.client.get(&self.url))
                .header("accept", "text/event-stream");
            if let Some(id) = last_event_id {
                builder = builder.header("last-event-id", id);
            }
            builder.send().await.expect("GET")
        }

        /// DELETE the session.
        pub async fn delete(&self) -> StatusCode {
            self.with_session(self.client.delete(&self.url))
                .send()
                .await
                .expect("DELETE")
                .status()
        }
    }

    /// A response body as JSON.
    pub async fn json_body(response: Response) -> Value {
        super::parse(&response.text().await.expect("body"))
    }

    /// The response to `id` from a POST answer (SSE or JSON), and the
    /// messages that came before it on the stream.
    pub async fn read_reply(response: Response, id: &Value) -> (Value, Vec<Value>) {
        let is_sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !is_sse {
            let text = response.text().await.expect("body");
            return (super::parse(&text), Vec::new());
        }
        let mut stream = SseStream::new(response);
        let mut before = Vec::new();
        while let Some(event) = stream.next().await {
            if event.data.is_empty() {
                continue;
            }
            let message = event.json();
            if message.get("method").is_none() && message.get("id") == Some(id) {
                return (message, before);
            }
            before.push(message);
        }
        panic!("the stream ended without a response to {id}; saw {before:?}");
    }
}
