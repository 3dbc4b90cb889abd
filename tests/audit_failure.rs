//! The audit log's storage failing under a running proxy: a file size limit
//! (RLIMIT_FSIZE, set on the live process) and a full filesystem (a small
//! tmpfs, where mounting is permitted). Fail closed refuses every message
//! with -32013 and takes `/readyz` down; fail open lets traffic pass
//! unrecorded; both recover by themselves once writes work, and the log
//! verifies across the outage.

mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::free_port;
use support::{tool_call, Proxy, Scratch};

/// JSON-RPC code of a message refused because the audit log cannot record.
const AUDIT_UNAVAILABLE: i64 = -32013;

/// The tests here run one at a time: mounting and filling a tmpfs, and
/// lowering a process's file size limit, are machine-level events, and one
/// test's storage failure must not overlap another's readiness checks.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Sets the soft `RLIMIT_FSIZE` of a running process (the hard limit stays
/// unlimited, so it can be raised again).
fn limit_file_size(pid: u32, bytes: Option<u64>) {
    let limit = nix::libc::rlimit {
        rlim_cur: bytes.unwrap_or(nix::libc::RLIM_INFINITY),
        rlim_max: nix::libc::RLIM_INFINITY,
    };
    let pid = nix::libc::pid_t::try_from(pid).unwrap();
    // SAFETY: `limit` is a valid rlimit for the call's duration and the old
    // value is not asked for.
    let result =
        unsafe { nix::libc::prlimit(pid, nix::libc::RLIMIT_FSIZE, &limit, std::ptr::null_mut()) };
    assert_eq!(result, 0, "prlimit: {}", std::io::Error::last_os_error());
}

fn http_get(port: u16, path: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// Polls `/readyz` until its status line starts with `want`.
fn wait_ready(port: u16, want: &str) {
    let deadline = Instant::now() + support::WAIT;
    loop {
        let status = TcpStream::connect(("127.0.0.1", port))
            .ok()
            .map(|_| http_get(port, "/readyz"))
            .unwrap_or_default();
        if status.starts_with(want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "readyz never became {want}: {status}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The value of one unlabelled series in `/metrics`.
fn metric(port: u16, name: &str) -> f64 {
    let text = http_get(port, "/metrics");
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("{name} not in /metrics:\n{text}"))
}

fn echo(id: i64) -> Value {
    tool_call(id, "echo", json!({ "text": format!("call {id}") }))
}

/// Whether the demo server received a request with this id.
fn server_saw(scratch: &Scratch, id: i64) -> bool {
    scratch
        .server_received()
        .iter()
        .any(|message| message["id"] == id)
}

fn assert_refused_for_audit(reply: &Value) {
    assert_eq!(reply["error"]["code"], AUDIT_UNAVAILABLE, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(message.contains("audit log cannot be written"), "{message}");
}

/// The entries that record an outage (the proxy's own one-entry chains).
fn outage_entries(scratch: &Scratch) -> Vec<Value> {
    scratch
        .audit_entries()
        .into_iter()
        .filter(|entry| entry["reason_codes"][0] == "audit_unavailable")
        .collect()
}

/// Calls `echo` with fresh ids until one is answered with a result.
fn call_until_allowed(proxy: &mut Proxy, first_id: i64) -> i64 {
    let deadline = Instant::now() + support::WAIT;
    let mut id = first_id;
    loop {
        proxy.send(&echo(id));
        let reply = proxy.response(&json!(id));
        if reply.get("result").is_some() {
            return id;
        }
        assert_refused_for_audit(&reply);
        assert!(Instant::now() < deadline, "the audit log never recovered");
        std::thread::sleep(Duration::from_millis(100));
        id += 1;
    }
}

#[test]
fn file_size_limit_fails_closed_then_recovers_and_verifies() {
    let _serial = one_at_a_time();
    let scratch = Scratch::new();
    let port = free_port();
    let config = scratch.demo_config(&format!("[metrics]\naddress = \"127.0.0.1:{port}\"\n"));
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&echo(1));
    assert!(proxy.response(&json!(1)).get("result").is_some());
    wait_ready(port, "HTTP/1.1 200");
    assert_eq!(metric(port, "acs_proxy_audit_writable"), 1.0);

    let size = std::fs::metadata(scratch.audit_log()).unwrap().len();
    limit_file_size(proxy.pid(), Some(size));
    for id in 2..5 {
        proxy.send(&echo(id));
        assert_refused_for_audit(&proxy.response(&json!(id)));
        assert!(!server_saw(&scratch, id), "call {id} was forwarded");
    }
    wait_ready(port, "HTTP/1.1 503");
    assert_eq!(metric(port, "acs_proxy_audit_writable"), 0.0);
    assert!(metric(port, "acs_proxy_audit_failures_total") >= 3.0);
    assert_eq!(
        std::fs::metadata(scratch.audit_log()).unwrap().len(),
        size,
        "a refused entry left bytes behind"
    );

    limit_file_size(proxy.pid(), None);
    wait_ready(port, "HTTP/1.1 200");
    let allowed = call_until_allowed(&mut proxy, 5);
    assert!(server_saw(&scratch, allowed));
    assert_eq!(metric(port, "acs_proxy_audit_writable"), 1.0);
    assert!(proxy.finish().success());

    scratch.assert_audit_verifies();
    let outages = outage_entries(&scratch);
    assert_eq!(outages.len(), 1, "{outages:?}");
    let detail = outages[0]["detail"].as_str().unwrap();
    assert!(detail.contains("File too large"), "{detail}");
    // The session's chain goes on from its last written entry.
    let entries = scratch.audit_entries();
    let refused_ids: Vec<&Value> = entries
        .iter()
        .filter(|entry| (2..5).any(|id| entry["mcp_id"] == id))
        .collect();
    assert!(refused_ids.is_empty(), "{refused_ids:?}");
    assert!(entries.iter().any(|entry| entry["mcp_id"] == allowed));
}

/// The proxy's own stderr is a file already past the limit, so its log
/// lines fail to write during the outage too; losing them must not stop
/// the audit log from recovering.
#[test]
fn a_log_file_past_the_size_limit_does_not_stop_recovery() {
    let _serial = one_at_a_time();
    let scratch = Scratch::new();
    let port = free_port();
    let config = scratch.demo_config(&format!("[metrics]\naddress = \"127.0.0.1:{port}\"\n"));
    let log_path = scratch.path("proxy-stderr.log");
    std::fs::write(&log_path, vec![b'#'; 1 << 20]).unwrap();
    let log = std::fs::OpenOptions::new()
        .append(true)
        .open(&log_path)
        .unwrap();
    let args = ["--config".to_owned(), config.display().to_string()];
    let mut proxy = Proxy::start_logging_to(&args, log.into());
    proxy.initialize(json!({}));
    wait_ready(port, "HTTP/1.1 200");

    let size = std::fs::metadata(scratch.audit_log()).unwrap().len();
    limit_file_size(proxy.pid(), Some(size));
    proxy.send(&echo(1));
    assert_refused_for_audit(&proxy.response(&json!(1)));
    wait_ready(port, "HTTP/1.1 503");

    limit_file_size(proxy.pid(), None);
    wait_ready(port, "HTTP/1.1 200");
    let allowed = call_until_allowed(&mut proxy, 2);
    assert!(server_saw(&scratch, allowed));
    assert!(proxy.finish().success());
    scratch.assert_audit_verifies();
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(
        log.contains("the audit log is writable again"),
        "the recovery was not logged"
    );
}

#[test]
fn fail_open_passes_traffic_unrecorded_and_still_counts() {
    let _serial = one_at_a_time();
    let scratch = Scratch::new();
    let port = free_port();
    let config = scratch.demo_config(&format!("[metrics]\naddress = \"127.0.0.1:{port}\"\n"));
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replacen("\n[audit]\n", "\n[audit]\non_failure = \"allow\"\n", 1),
    )
    .unwrap();
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    wait_ready(port, "HTTP/1.1 200");

    let size = std::fs::metadata(scratch.audit_log()).unwrap().len();
    limit_file_size(proxy.pid(), Some(size));
    proxy.send(&echo(1));
    let reply = proxy.response(&json!(1));
    assert!(reply.get("result").is_some(), "{reply}");
    assert!(server_saw(&scratch, 1));
    assert_eq!(metric(port, "acs_proxy_audit_writable"), 0.0);
    assert!(metric(port, "acs_proxy_audit_failures_total") >= 1.0);
    wait_ready(port, "HTTP/1.1 503");

    limit_file_size(proxy.pid(), None);
    wait_ready(port, "HTTP/1.1 200");
    proxy.send(&echo(2));
    assert!(proxy.response(&json!(2)).get("result").is_some());
    assert!(proxy.finish().success());

    scratch.assert_audit_verifies();
    let entries = scratch.audit_entries();
    assert!(!entries.iter().any(|entry| entry["mcp_id"] == 1));
    assert!(entries.iter().any(|entry| entry["mcp_id"] == 2));
    assert_eq!(outage_entries(&scratch).len(), 1);
}

/// A tmpfs of 64 KiB mounted for one test, unmounted when dropped.
struct SmallTmpfs {
    mount_point: PathBuf,
}

impl SmallTmpfs {
    /// `None` where mounting is not permitted (not root, no CAP_SYS_ADMIN).
    fn mount(at: &Path) -> Option<Self> {
        std::fs::create_dir_all(at).unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
            .arg(at)
            .output()
            .is_ok_and(|output| output.status.success());
        mounted.then(|| Self {
            mount_point: at.to_path_buf(),
        })
    }

    /// Writes `filler` until the filesystem is full.
    fn fill(&self, filler: &Path) {
        let mut file = std::fs::File::create(filler).unwrap();
        let chunk = [b'x'; 1024];
        loop {
            match file.write(&chunk) {
                Ok(0) => break,
                Ok(_) => {}
                Err(err) if err.kind() == ErrorKind::StorageFull => break,
                Err(err) => panic!("filling the tmpfs: {err}"),
            }
        }
    }
}

impl Drop for SmallTmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(&self.mount_point)
            .status();
    }
}

#[test]
fn full_disk_refuses_the_session_start_until_space_returns() {
    let _serial = one_at_a_time();
    let scratch = Scratch::new();
    let Some(tmpfs) = SmallTmpfs::mount(&scratch.path("small")) else {
        eprintln!("skipped: mounting a tmpfs is not permitted here");
        return;
    };
    let log = tmpfs.mount_point.join("audit.jsonl");
    let config = scratch.demo_config("");
    let text = std::fs::read_to_string(&config).unwrap();
    let audit_path = format!("path = {:?}", scratch.audit_log().display().to_string());
    std::fs::write(
        &config,
        text.replacen(
            &audit_path,
            &format!("path = {:?}", log.display().to_string()),
            1,
        ),
    )
    .unwrap();
    let mut proxy = Proxy::start(&config);
    let filler = tmpfs.mount_point.join("filler");
    tmpfs.fill(&filler);

    let initialize = |id: &str| {
        json!({"jsonrpc":"2.0","id":id,"method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":{},
            "clientInfo":{"name":"integration-test","version":"1"}}})
    };
    proxy.send(&initialize("init-1"));
    assert_refused_for_audit(&proxy.response(&json!("init-1")));
    proxy.send(&echo(1));
    assert_refused_for_audit(&proxy.response(&json!(1)));
    assert!(scratch.server_received().is_empty());

    std::fs::remove_file(&filler).unwrap();
    let deadline = Instant::now() + support::WAIT;
    let mut attempt = 2;
    loop {
        let id = format!("init-{attempt}");
        proxy.send(&initialize(&id));
        let reply = proxy.response(&json!(id));
        if reply.get("result").is_some() {
            break;
        }
        assert_refused_for_audit(&reply);
        assert!(Instant::now() < deadline, "the audit log never recovered");
        std::thread::sleep(Duration::from_millis(100));
        attempt += 1;
    }
    proxy.send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    proxy.send(&echo(2));
    assert!(proxy.response(&json!(2)).get("result").is_some());
    assert!(proxy.finish().success());

    let verify = Command::new(support::proxy_bin())
        .args(["audit", "verify"])
        .arg(&log)
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "{}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
    let entries: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(support::parse)
        .collect();
    let session: Vec<&Value> = entries
        .iter()
        .filter(|entry| entry["reason_codes"][0] != "audit_unavailable")
        .collect();
    assert_eq!(session[0]["step_type"], "steps/sessionStart", "{entries:?}");
    assert_eq!(session[0]["entry_id"], "1");
    assert_eq!(
        session.last().unwrap()["step_type"],
        "steps/sessionEnd",
        "{entries:?}"
    );
    drop(tmpfs);
}
