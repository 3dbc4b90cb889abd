//! Crash trials: acs-proxy under load, killed with SIGKILL at random points,
//! each audit log shared by a few consecutive trials (so logs hold several
//! sessions, and a proxy restarts on a log a crash left behind).
//!
//! After each kill the log must verify, or report a torn final line as a
//! torn line (never as tampering) that `acs-proxy audit repair` removes,
//! leaving a chain that verifies and that the next trial appends to. With
//! `fsync = "always"`, every message the upstream received must have the
//! audit entry that let it through.
//!
//! The kill points come from a seeded generator; the seed is printed, and
//! `ACS_CRASH_SEED` replays a run.

mod support;

use std::collections::HashSet;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{proxy_bin, tool_call, Scratch};

/// Trials per run.
const TRIALS: usize = 100;
/// Kills land within this long after the proxy is spawned.
const MAX_KILL_DELAY_MS: u64 = 800;
/// Requests each trial writes to the proxy up front.
const CALLS_PER_TRIAL: usize = 250;
/// Trials appending to one log before it is set aside (verifying a log
/// costs time in proportion to its length).
const TRIALS_PER_LOG: usize = 5;
/// The whole run stops here even if trials remain (a very slow machine).
const TIME_BUDGET: Duration = Duration::from_secs(170);

/// xorshift64*: enough to spread kill points, reproducible from its seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % bound
    }
}

/// What `acs-proxy audit verify` said about the log.
enum Verdict {
    Clean,
    TornTail,
}

fn verify(log: &std::path::Path) -> Verdict {
    let output = Command::new(proxy_bin())
        .args(["audit", "verify"])
        .arg(log)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "audit verify rejected the log after a crash:\n{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    if stdout.contains("torn final line") {
        Verdict::TornTail
    } else {
        Verdict::Clean
    }
}

fn repair(log: &std::path::Path) {
    let output = Command::new(proxy_bin())
        .args(["audit", "repair"])
        .arg(log)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "audit repair failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The messages of one trial: initialize, initialized, then `echo` calls,
/// every id unique over the run.
fn trial_input(trial: usize) -> Vec<u8> {
    let mut input = Vec::new();
    let mut line = |message: Value| {
        input.extend_from_slice(message.to_string().as_bytes());
        input.push(b'\n');
    };
    line(
        json!({"jsonrpc":"2.0","id":format!("t{trial}-init"),"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},
        "clientInfo":{"name":"crash-trial","version":"1"}}}),
    );
    line(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    for call in 0..CALLS_PER_TRIAL {
        let mut message = tool_call(0, "echo", json!({ "text": "load" }));
        message["id"] = json!(format!("t{trial}-{call}"));
        line(message);
    }
    input
}

/// Waits until the server's record stops growing: the killed proxy's
/// server reads what was already in its pipe, then sees end of input.
fn settle(record: &std::path::Path) {
    let size = || std::fs::metadata(record).map(|m| m.len()).unwrap_or(0);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last = size();
    loop {
        std::thread::sleep(Duration::from_millis(30));
        let now = size();
        if now == last || Instant::now() > deadline {
            return;
        }
        last = now;
    }
}

/// Runs one trial: spawn, feed, kill after `delay`.
fn run_trial(config: &std::path::Path, trial: usize, delay: Duration) {
    let mut child = Command::new(proxy_bin())
        .arg("--config")
        .arg(config)
        .env("ACS_PROXY_LOG", "error")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = trial_input(trial);
    // Far below a pipe's capacity, so this does not block on the proxy.
    let _ = stdin.write_all(&input);
    std::thread::sleep(delay);
    child.kill().unwrap();
    child.wait().unwrap();
    drop(stdin);
}

/// The audit entries that let a client message through, keyed by MCP id.
fn forwarded_ids(entries: &[Value]) -> HashSet<String> {
    entries
        .iter()
        .filter(|entry| {
            entry["direction"] == "client_to_server"
                && matches!(entry["action"].as_str(), Some("forwarded" | "rewritten"))
        })
        .filter_map(|entry| entry["mcp_id"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn sigkill_at_random_points_leaves_a_verifiable_log_missing_nothing_forwarded() {
    let seed = std::env::var("ACS_CRASH_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or(0x5eed_0001_u64);
    eprintln!("crash trials: seed {seed} (ACS_CRASH_SEED={seed} replays this run)");
    let mut rng = Rng(seed.max(1));
    let scratch = Scratch::new();
    let config = scratch.demo_config("");
    let log = scratch.audit_log();
    let started = Instant::now();
    let (mut trials, mut torn, mut sessions) = (0, 0, 0);
    let mut entries = Vec::new();
    while trials < TRIALS && started.elapsed() < TIME_BUDGET {
        let delay = Duration::from_millis(rng.below(MAX_KILL_DELAY_MS));
        run_trial(&config, trials, delay);
        settle(&scratch.server_record());
        trials += 1;
        if !log.exists() {
            continue;
        }
        if let Verdict::TornTail = verify(&log) {
            torn += 1;
            repair(&log);
            assert!(
                matches!(verify(&log), Verdict::Clean),
                "trial {trials}: a torn tail remained after repair"
            );
        }
        if trials % TRIALS_PER_LOG == 0 || trials == TRIALS {
            sessions += support::audit_chains(&scratch).len();
            entries.extend(scratch.audit_entries());
            std::fs::remove_file(&log).unwrap();
        }
    }

    let forwarded = forwarded_ids(&entries);
    let received: Vec<String> = scratch
        .server_received()
        .iter()
        .filter_map(|message| {
            let id = message["id"].as_str()?;
            // The proxy's own inventory reads are not the agent's messages.
            (message.get("method").is_some() && !id.starts_with("acs-proxy-"))
                .then(|| id.to_owned())
        })
        .collect();
    let missing: Vec<&String> = received
        .iter()
        .filter(|id| !forwarded.contains(*id))
        .collect();
    eprintln!(
        "crash trials: {trials} trials in {:.1}s, {} requests reached the server, \
         {} audit entries in {sessions} sessions, {torn} torn tails repaired",
        started.elapsed().as_secs_f64(),
        received.len(),
        entries.len(),
    );
    assert!(
        missing.is_empty(),
        "requests the server received without an audit entry allowing them: {missing:?}"
    );
    assert_eq!(trials, TRIALS, "the time budget ran out");
    assert!(
        received.len() > TRIALS,
        "too little load reached the server"
    );
}
