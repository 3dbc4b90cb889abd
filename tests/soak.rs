//! Soak: many concurrent Streamable HTTP sessions, each making thousands of
//! `tools/call`s through acs-proxy to its own stdio demo server, under a
//! policy that denies one call in ten and redacts another one in ten.
//!
//! Off by default: it runs for minutes. `ACS_PROXY_SOAK=1 cargo test --release
//! --test soak -- --nocapture` runs the full size (200 sessions × 10,000
//! calls); `ACS_PROXY_SOAK_SESSIONS` and `ACS_PROXY_SOAK_CALLS` change it.
//!
//! Checked: every response carries its request's id and the payload that
//! request asked for (nothing lost, nothing misrouted), every denial and
//! redaction is applied, the proxy's RSS grows less than 10% between the
//! end of the warm-up and the end of the run, and the audit log verifies.

mod support;

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::mcp_http::{client, read_reply, McpHttp};
use support::{listen_section, proxy_bin, rss_kib, tool_call, NetProxy, Scratch};
use tokio::task::JoinSet;

const POLICY: &str = r#"
[[policy.rule]]
name = "no-forbidden-echo"
hook = "steps/toolCallRequest"
tool = "echo"
match = { pointer = "/arguments/text/value", regex = '^forbidden-' }
decision = "deny"
reasoning = "forbidden texts are not echoed"

[[policy.rule]]
name = "redact-ssn"
hook = "steps/toolCallResult"
decision = "modify"
reasoning = "social security numbers are removed from tool output"
redact = { pointer = "/outputs", regex = '\b\d{3}-\d{2}-\d{4}\b', replacement = "[REDACTED SSN]" }
"#;

/// The soak's size, from the environment; `None` when the soak is off.
struct SoakSize {
    sessions: usize,
    calls: usize,
}

impl SoakSize {
    fn from_env() -> Option<Self> {
        std::env::var_os("ACS_PROXY_SOAK")?;
        let number = |name: &str, default: usize| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(default)
        };
        Some(Self {
            sessions: number("ACS_PROXY_SOAK_SESSIONS", 200),
            calls: number("ACS_PROXY_SOAK_CALLS", 10_000),
        })
    }

    /// Calls per session made before the RSS baseline is taken.
    fn warm_up(&self) -> usize {
        (self.calls / 10).max(1)
    }
}

/// What one session saw.
#[derive(Default)]
struct Tally {
    echoed: usize,
    denied: usize,
    redacted: usize,
}

/// The call number `n` of session `s`: one in ten is denied, one in ten
/// has an SSN in its result, the rest echo a text unique to the call.
fn call_for(s: usize, n: usize) -> (Value, Expect) {
    let id = json!(format!("s{s}-c{n}"));
    match n % 10 {
        3 => {
            let text = format!("forbidden-{s}-{n}");
            (echo(&id, &text), Expect::Denied)
        }
        7 => {
            let name = format!("user{s}x{n}");
            let call = with_id(tool_call(0, "lookup-user", json!({ "name": name })), &id);
            (call, Expect::Redacted(name))
        }
        _ => {
            let text = format!("payload-{s}-{n}");
            (echo(&id, &text), Expect::Echo(text))
        }
    }
}

fn echo(id: &Value, text: &str) -> Value {
    with_id(tool_call(0, "echo", json!({ "text": text })), id)
}

fn with_id(mut message: Value, id: &Value) -> Value {
    message["id"] = id.clone();
    message
}

enum Expect {
    Echo(String),
    Denied,
    Redacted(String),
}

/// Checks one reply against what its request asked for.
fn check(reply: &Value, id: &Value, expect: &Expect, tally: &mut Tally) {
    assert_eq!(&reply["id"], id, "misrouted reply: {reply}");
    match expect {
        Expect::Echo(text) => {
            assert_eq!(reply["result"]["content"][0]["text"], *text, "{reply}");
            tally.echoed += 1;
        }
        Expect::Denied => {
            let result = &reply["result"];
            assert_eq!(result["isError"], true, "not denied: {reply}");
            assert_eq!(
                result["_meta"]["io.acs-proxy/decision"]["decision"], "deny",
                "not denied: {reply}"
            );
            tally.denied += 1;
        }
        Expect::Redacted(name) => {
            let text = reply["result"]["content"][0]["text"]
                .as_str()
                .unwrap_or_else(|| panic!("no text: {reply}"));
            assert!(text.contains(name.as_str()), "wrong record: {reply}");
            assert!(text.contains("[REDACTED SSN]"), "not redacted: {reply}");
            assert!(!text.contains("123-45-6789"), "SSN leaked: {reply}");
            tally.redacted += 1;
        }
    }
}

async fn run_session(
    url: String,
    s: usize,
    size: Arc<SoakSize>,
    warmed: Arc<AtomicUsize>,
) -> Tally {
    let mut session = McpHttp::new(client(None), url);
    session.initialize("2025-06-18", json!({})).await;
    let mut tally = Tally::default();
    for n in 0..size.calls {
        if n == size.warm_up() {
            warmed.fetch_add(1, Ordering::Relaxed);
        }
        let (call, expect) = call_for(s, n);
        let response = session.post(&call).await;
        assert_eq!(response.status(), reqwest::StatusCode::OK, "{call}");
        let (reply, _) = read_reply(response, &call["id"]).await;
        check(&reply, &call["id"], &expect, &mut tally);
    }
    assert!(session.delete().await.is_success());
    tally
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sessions_under_sustained_load_lose_and_misroute_nothing() {
    let Some(size) = SoakSize::from_env() else {
        eprintln!("soak skipped: set ACS_PROXY_SOAK=1 to run it");
        return;
    };
    let size = Arc::new(size);
    let scratch = Scratch::new();
    let config = scratch.config(
        &[support::demo_server_bin().display().to_string()],
        &format!(
            "{}\n{POLICY}\n[limits]\nmax_in_flight = 256\n",
            listen_section("http", "")
        ),
    );
    let text = std::fs::read_to_string(&config)
        .expect("config")
        .replace("fsync = \"always\"", "fsync = \"batch\"");
    std::fs::write(&config, text).expect("config");
    let mut proxy = NetProxy::start(&config);
    let pid = proxy.pid();

    // The baseline is taken once every session is past its warm-up; the
    // sessions keep going meanwhile, so no session waits on another.
    let warmed = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut sessions = JoinSet::new();
    for s in 0..size.sessions {
        sessions.spawn(run_session(
            proxy.url("/mcp"),
            s,
            size.clone(),
            warmed.clone(),
        ));
    }
    let mut baseline = None;
    let mut peak = 0;
    let mut totals = Tally::default();
    loop {
        tokio::select! {
            finished = sessions.join_next() => {
                let Some(tally) = finished else { break };
                let tally = tally.expect("session task");
                totals.echoed += tally.echoed;
                totals.denied += tally.denied;
                totals.redacted += tally.redacted;
            }
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
        let rss = rss_kib(pid);
        if baseline.is_none() && warmed.load(Ordering::Relaxed) == size.sessions {
            baseline = Some(rss);
        }
        if baseline.is_some() {
            peak = peak.max(rss);
        }
    }
    let elapsed = started.elapsed();
    let end = rss_kib(pid);
    let baseline = baseline.unwrap_or(end);
    peak = peak.max(end);

    let calls = size.sessions * size.calls;
    eprintln!(
        "soak: {} sessions x {} calls = {calls} calls in {:.1} s ({:.0} calls/s); \
         echoed {}, denied {}, redacted {}; proxy RSS after warm-up {baseline} KiB, \
         peak {peak} KiB ({:+.1}%), end {end} KiB",
        size.sessions,
        size.calls,
        elapsed.as_secs_f64(),
        calls as f64 / elapsed.as_secs_f64(),
        totals.echoed,
        totals.denied,
        totals.redacted,
        (peak as f64 / baseline as f64 - 1.0) * 100.0,
    );
    assert_eq!(totals.echoed + totals.denied + totals.redacted, calls);
    assert_eq!(
        totals.denied,
        size.sessions * (size.calls / 10 + usize::from(size.calls % 10 > 3))
    );
    assert!(
        (peak as f64) < baseline as f64 * 1.10,
        "RSS grew from {baseline} KiB after warm-up to a peak of {peak} KiB"
    );

    proxy.terminate();
    let verdict = Command::new(proxy_bin())
        .args(["audit", "verify"])
        .arg(scratch.audit_log())
        .output()
        .expect("run audit verify");
    assert!(
        verdict.status.success(),
        "audit verify failed:\n{}",
        String::from_utf8_lossy(&verdict.stdout)
    );
}
