//! Fault injection: the misbehaving MCP server (`acs-misbehaving-server`,
//! the `test-peers/` package), the proxy's `/metrics` as numbers, its
//! resident memory, and a stdio proxy whose output the test reads only
//! when it chooses to (a slow client).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{parse, proxy_bin, workspace_bin, Scratch, WAIT};

/// The misbehaving server, built the first time it is asked for.
pub fn misbehaving_server_bin() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| workspace_bin("acs-test-peers", "acs-misbehaving-server"))
        .clone()
}

/// What the misbehaving server received, one raw line each.
pub fn server_record(scratch: &Scratch) -> PathBuf {
    scratch.path("misbehaving-received.jsonl")
}

/// Every message the misbehaving server received, parsed.
pub fn server_received(scratch: &Scratch) -> Vec<Value> {
    std::fs::read_to_string(server_record(scratch))
        .unwrap_or_default()
        .lines()
        .map(parse)
        .collect()
}

/// Writes the scratch `proxy.toml` in front of the misbehaving server,
/// with `/metrics` on `metrics_port` and `extra` sections. Audit appends
/// are group-committed (`fsync = "batch"`): the flood tests write
/// thousands of entries.
pub fn misbehaving_config(scratch: &Scratch, metrics_port: u16, extra: &str) -> PathBuf {
    let command = vec![
        misbehaving_server_bin().display().to_string(),
        "--record".into(),
        server_record(scratch).display().to_string(),
    ];
    let extra = format!("[metrics]\naddress = \"127.0.0.1:{metrics_port}\"\n\n{extra}");
    let path = scratch.config(&command, &extra);
    let text = std::fs::read_to_string(&path).expect("read config");
    std::fs::write(
        &path,
        text.replace("fsync = \"always\"", "fsync = \"batch\""),
    )
    .expect("write");
    path
}

/// `GET /metrics` on `port`, retried until the endpoint answers.
pub fn scrape(port: u16) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(body) = http_get(port, "/metrics") {
            return body;
        }
        assert!(Instant::now() < deadline, "no /metrics on port {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn http_get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(WAIT)).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_owned())
}

/// The value of the series `name{labels}` (labels as Prometheus prints
/// them, e.g. `route="demo",kind="timeout"`, in any order), 0 when absent.
pub fn metric(text: &str, name: &str, labels: &str) -> f64 {
    let wanted: Vec<&str> = labels.split(',').filter(|l| !l.is_empty()).collect();
    let prefix = format!("{name}{{");
    text.lines()
        .filter_map(|line| line.strip_prefix(&prefix))
        .filter_map(|rest| rest.split_once("} "))
        .find(|(set, _)| {
            let have: Vec<&str> = set.split(',').collect();
            have.len() == wanted.len() && wanted.iter().all(|label| have.contains(label))
        })
        .map(|(_, value)| value.trim().parse().expect("a number"))
        .unwrap_or(0.0)
}

/// Waits until `/metrics` shows `name{labels}` equal to `wanted`.
pub fn wait_for_metric(port: u16, name: &str, labels: &str, wanted: f64) {
    let deadline = Instant::now() + WAIT;
    loop {
        let value = metric(&scrape(port), name, labels);
        if value == wanted {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name}{{{labels}}} stayed {value}, wanted {wanted}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A stdio proxy whose stdout is not read until the test reads it: what
/// it writes piles up in the pipe, as with an agent that stopped reading.
pub struct UnreadProxy {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl UnreadProxy {
    /// Starts `acs-proxy --config CONFIG`.
    pub fn start(config: &Path) -> Self {
        let mut child = Command::new(proxy_bin())
            .arg("--config")
            .arg(config)
            .env("ACS_PROXY_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn acs-proxy");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let stdin = child.stdin.take();
        Self {
            child,
            stdin,
            stdout,
        }
    }

    /// The proxy's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Writes one message.
    pub fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{message}").expect("write");
        stdin.flush().expect("flush");
    }

    /// Reads the next message (blocking; the test bounds the whole run).
    pub fn recv(&mut self) -> Value {
        let mut line = String::new();
        let read = self.stdout.read_line(&mut line).expect("read stdout");
        assert!(read > 0, "the proxy closed its stdout");
        parse(&line)
    }

    /// `initialize` + `notifications/initialized`.
    pub fn initialize(&mut self) {
        self.send(
            &serde_json::json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":{},
            "clientInfo":{"name":"fault-test","version":"1"}}}),
        );
        assert_eq!(self.recv()["id"], "init");
        self.send(&serde_json::json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    }

    /// Closes stdin and waits for the exit status.
    pub fn finish(&mut self) -> std::process::ExitStatus {
        self.stdin.take();
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "acs-proxy did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for UnreadProxy {
    fn drop(&mut self) {
        let stdin = &mut self.stdin;
        super::end(&mut self.child, |_| drop(stdin.take()));
    }
}
