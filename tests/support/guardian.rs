//! The ACS test Guardian (`acs-test-guardian`, the `test-guardian/` package)
//! as a remote Guardian for end-to-end tests: built once per test run,
//! started over HTTP on a free port or handed to the proxy as a stdio
//! command, with its script, its shared secret and its record of every
//! request it received kept in the test's [`Scratch`] directory.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{parse, workspace_bin, Scratch, WAIT};

/// The deployment secret both sides are given (at least 32 bytes, no
/// trailing whitespace, which both sides would strip).
pub const SECRET: &[u8] = b"acs-proxy remote guardian tests: 40 byte";

/// `key_id` the proxy signs with.
pub const KEY_ID: &str = "k-tests";

/// The `acs-test-guardian` binary, built the first time it is asked for in
/// this test process.
pub fn test_guardian_bin() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| workspace_bin("acs-test-guardian", "acs-test-guardian"))
        .clone()
}

/// How the proxy reaches the Guardian.
#[derive(Debug, Clone)]
pub enum Endpoint {
    /// `url = "http://HOST:PORT/acs"`.
    Http(String),
    /// `command = [...]`: the proxy spawns the Guardian and frames with Content-Length.
    Stdio(Vec<String>),
}

/// One test Guardian and the files it works from.
pub struct TestGuardian {
    endpoint: Endpoint,
    secret: PathBuf,
    record: PathBuf,
    child: Option<Child>,
    restart: Option<Restart>,
}

/// What an HTTP Guardian is started from again by [`TestGuardian::restart`].
struct Restart {
    script: PathBuf,
    addr_file: PathBuf,
    addr: String,
    args: Vec<String>,
}

/// The files an HTTP Guardian works from, and its extra command-line
/// arguments.
struct HttpFiles<'a> {
    addr_file: &'a Path,
    secret: &'a Path,
    script: &'a Path,
    record: &'a Path,
    args: &'a [String],
}

/// Starts an HTTP Guardian bound to `bind` and waits for its address.
fn spawn_http(bind: &str, files: &HttpFiles<'_>) -> (Child, String) {
    try_spawn_http(bind, files).unwrap_or_else(|| panic!("acs-test-guardian could not bind {bind}"))
}

/// Like [`spawn_http`]; `None` when the process exits at startup (the
/// address is taken).
fn try_spawn_http(bind: &str, files: &HttpFiles<'_>) -> Option<(Child, String)> {
    let addr_file = files.addr_file;
    let mut child = Command::new(test_guardian_bin())
        .arg("--http")
        .arg(bind)
        .arg("--addr-file")
        .arg(addr_file)
        .arg("--secret-file")
        .arg(files.secret)
        .arg("--script")
        .arg(files.script)
        .arg("--record")
        .arg(files.record)
        .args(files.args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn acs-test-guardian");
    let deadline = Instant::now() + WAIT;
    loop {
        // Written atomically once the port accepts connections.
        if let Ok(addr) = std::fs::read_to_string(addr_file) {
            return Some((child, addr.trim().to_owned()));
        }
        if child.try_wait().expect("try_wait").is_some() {
            return None;
        }
        assert!(
            Instant::now() < deadline,
            "acs-test-guardian did not bind within {WAIT:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

impl TestGuardian {
    /// Starts the Guardian over HTTP on a free port of 127.0.0.1 with this
    /// script, and waits until it accepts connections.
    pub fn http(scratch: &Scratch, script: &Value) -> Self {
        Self::http_with_args(scratch, script, &[])
    }

    /// Like [`TestGuardian::http`], with extra command-line arguments (such
    /// as `--close-after-answer` or `--keep-alive-ms 200`), kept for
    /// [`TestGuardian::restart`].
    pub fn http_with_args(scratch: &Scratch, script: &Value, args: &[&str]) -> Self {
        let (secret, script, record) = prepare(scratch, script);
        let addr_file = scratch.path("guardian-addr");
        let args: Vec<String> = args.iter().map(|arg| (*arg).to_owned()).collect();
        let files = HttpFiles {
            addr_file: &addr_file,
            secret: &secret,
            script: &script,
            record: &record,
            args: &args,
        };
        let (child, addr) = spawn_http("127.0.0.1:0", &files);
        Self {
            endpoint: Endpoint::Http(format!("http://{addr}/acs")),
            secret,
            record,
            child: Some(child),
            restart: Some(Restart {
                script,
                addr_file,
                addr,
                args,
            }),
        }
    }

    /// Kills an HTTP Guardian and starts a new process on the same address
    /// with the same script, secret and record file: a Guardian restart,
    /// which keeps no session state. Waits until it accepts connections.
    pub fn restart(&mut self) {
        self.stop();
        let restart = self
            .restart
            .as_ref()
            .expect("only an HTTP Guardian restarts");
        let _ = std::fs::remove_file(&restart.addr_file);
        let deadline = Instant::now() + WAIT;
        loop {
            // The old socket may linger a moment; bind again until it is free.
            let files = HttpFiles {
                addr_file: &restart.addr_file,
                secret: &self.secret,
                script: &restart.script,
                record: &self.record,
                args: &restart.args,
            };
            if let Some(child) = try_spawn_http(&restart.addr, &files) {
                self.child = Some(child.0);
                return;
            }
            assert!(
                Instant::now() < deadline,
                "could not restart on {}",
                restart.addr
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Prepares the Guardian for stdio: the proxy spawns it from
    /// [`TestGuardian::guardian_toml`]'s `command`.
    pub fn stdio(scratch: &Scratch, script: &Value) -> Self {
        let (secret, script, record) = prepare(scratch, script);
        let command = vec![
            test_guardian_bin().display().to_string(),
            "--stdio".into(),
            "--secret-file".into(),
            secret.display().to_string(),
            "--script".into(),
            script.display().to_string(),
            "--record".into(),
            record.display().to_string(),
        ];
        Self {
            endpoint: Endpoint::Stdio(command),
            secret,
            record,
            child: None,
            restart: None,
        }
    }

    /// A Guardian that is not there: an HTTP URL on a port of 127.0.0.1
    /// nothing listens on (bound, then closed), so connections are refused.
    pub fn unreachable(scratch: &Scratch) -> Self {
        let secret = write_secret(scratch);
        let port = {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
            listener.local_addr().expect("local addr").port()
        };
        Self {
            endpoint: Endpoint::Http(format!("http://127.0.0.1:{port}/acs")),
            secret,
            record: scratch.path("guardian-record.jsonl"),
            child: None,
            restart: None,
        }
    }

    /// How the proxy reaches this Guardian.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The `[guardian]` keys naming this Guardian (endpoint, secret, key id),
    /// without `mode`.
    pub fn guardian_toml(&self) -> String {
        let endpoint = match &self.endpoint {
            Endpoint::Http(url) => format!("url = {url:?}"),
            Endpoint::Stdio(command) => {
                let args: Vec<String> = command.iter().map(|arg| format!("{arg:?}")).collect();
                format!("command = [{}]", args.join(", "))
            }
        };
        format!(
            "{endpoint}\nsecret_file = {:?}\nkey_id = {KEY_ID:?}\n",
            self.secret.display().to_string()
        )
    }

    /// Writes the scratch directory's `proxy.toml`: the demo server behind
    /// the proxy, this Guardian as its remote Guardian with the extra
    /// `[guardian]` keys `guardian_keys` (timeouts, postures), then `extra`
    /// (other sections).
    pub fn proxy_config(&self, scratch: &Scratch, guardian_keys: &str, extra: &str) -> PathBuf {
        scratch.remote_demo_config(&format!("{}{guardian_keys}", self.guardian_toml()), extra)
    }

    /// Every request the Guardian received, in processing order, as its
    /// `--record` lines (`envelope`, `signature_valid`, `action`, `chain_hash`).
    pub fn records(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.record)
            .unwrap_or_default()
            .lines()
            .map(parse)
            .collect()
    }

    /// The records of content-bearing requests: everything but
    /// `system/ping` and `handshake/hello`.
    pub fn hook_records(&self) -> Vec<Value> {
        self.records()
            .into_iter()
            .filter(|record| {
                let method = &record["envelope"]["method"];
                method != "system/ping" && method != "handshake/hello"
            })
            .collect()
    }

    /// The records of `handshake/hello` requests.
    pub fn hello_records(&self) -> Vec<Value> {
        self.records()
            .into_iter()
            .filter(|record| record["envelope"]["method"] == "handshake/hello")
            .collect()
    }

    /// Stops an HTTP Guardian (a no-op for stdio and unreachable ones).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for TestGuardian {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Writes the secret, the script and an empty record file into `scratch`.
fn prepare(scratch: &Scratch, script: &Value) -> (PathBuf, PathBuf, PathBuf) {
    let secret = write_secret(scratch);
    let script_path = scratch.path("guardian-script.json");
    std::fs::write(&script_path, script.to_string()).expect("write guardian script");
    let record = scratch.path("guardian-record.jsonl");
    std::fs::write(&record, b"").expect("create guardian record");
    (secret, script_path, record)
}

/// Writes [`SECRET`] to the scratch directory, readable by its owner only.
fn write_secret(scratch: &Scratch) -> PathBuf {
    let path = scratch.path("guardian-secret");
    std::fs::write(&path, SECRET).expect("write guardian secret");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .expect("chmod guardian secret");
    }
    path
}
