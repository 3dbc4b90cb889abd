//! A real Prometheus (Debian's `prometheus` package, installed by
//! `.ci/install-peers`) for the observability tests: started on a free
//! port of 127.0.0.1 with a throwaway config that scrapes the given
//! targets every second and loads `docker/prometheus/alerts.yml`, and
//! queried over its HTTP API. `promtool` runs the rule checks.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{free_port, parse, repo_root, Scratch, WAIT};

/// The `prometheus` binary.
pub fn prometheus_bin() -> PathBuf {
    installed("prometheus")
}

/// The `promtool` binary.
pub fn promtool_bin() -> PathBuf {
    installed("promtool")
}

fn installed(name: &str) -> PathBuf {
    let path = PathBuf::from("/usr/bin").join(name);
    assert!(
        path.exists(),
        "{name} is not installed: run .ci/install-peers (Debian's prometheus package)"
    );
    path
}

/// Runs `promtool ARGS` in `dir`, failing the test with its output unless
/// it succeeds.
pub fn promtool(dir: &Path, args: &[&str]) -> Output {
    let output = Command::new(promtool_bin())
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run promtool");
    assert!(
        output.status.success(),
        "promtool {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// A running Prometheus.
pub struct Prometheus {
    child: Child,
    /// Its HTTP port on 127.0.0.1.
    pub port: u16,
}

impl Prometheus {
    /// Starts Prometheus scraping `targets` (`host:port`) as job
    /// `acs-proxy` every second, with the repository's alerting rules,
    /// and waits until it is ready.
    pub fn start(scratch: &Scratch, targets: &[String]) -> Self {
        let config = scratch.path("prometheus.yml");
        let rules = repo_root().join("docker/prometheus/alerts.yml");
        let targets = targets
            .iter()
            .map(|t| format!("{t:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {:?}\nscrape_configs:\n  - job_name: acs-proxy\n    static_configs:\n      - targets: [{targets}]\n",
                rules.display().to_string()
            ),
        )
        .expect("write prometheus.yml");
        let port = free_port();
        let child = Command::new(prometheus_bin())
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                scratch.path("prometheus-data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn prometheus");
        let prometheus = Self { child, port };
        let deadline = Instant::now() + WAIT;
        while prometheus
            .get("/-/ready")
            .is_none_or(|(status, _)| status != 200)
        {
            assert!(
                Instant::now() < deadline,
                "prometheus was not ready within {WAIT:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        prometheus
    }

    /// `GET path` → (status, body); `None` when nothing answers.
    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .ok()?;
        // HTTP/1.0: the body comes whole, never chunked, then the close.
        write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).ok()?;
        let (head, body) = response.split_once("\r\n\r\n")?;
        let status = head.split_whitespace().nth(1)?.parse().ok()?;
        Some((status, body.to_owned()))
    }

    /// `GET path` of the HTTP API, its `data` member; fails the test on an
    /// error answer.
    pub fn api(&self, path: &str) -> Value {
        let (status, body) = self
            .get(path)
            .unwrap_or_else(|| panic!("prometheus did not answer {path}"));
        let answer = parse(&body);
        assert!(
            status == 200 && answer["status"] == "success",
            "{path}: {status} {body}"
        );
        answer["data"].clone()
    }

    /// An instant PromQL query: the result vector.
    pub fn query(&self, promql: &str) -> Vec<Value> {
        let data = self.api(&format!("/api/v1/query?query={}", encode(promql)));
        data["result"].as_array().cloned().unwrap_or_default()
    }

    /// The query's result once `done` holds for it, or the last one after
    /// [`WAIT`].
    pub fn query_until(&self, promql: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + WAIT;
        loop {
            let result = self.query(promql);
            if done(&result) || Instant::now() >= deadline {
                return result;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The value of one sample of a query result (`value: [time, "text"]`).
pub fn sample_value(sample: &Value) -> f64 {
    sample["value"][1]
        .as_str()
        .and_then(|text| text.parse().ok())
        .unwrap_or(f64::NAN)
}

/// Percent-encodes a query parameter (RFC 3986 unreserved kept).
pub fn encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (byte as char).to_string()
            }
            _ => format!("%{byte:02X}"),
        })
        .collect()
}
