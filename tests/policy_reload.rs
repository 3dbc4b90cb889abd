//! Hot reload of the embedded policy through the built binary and the demo
//! server: a change to the config file takes effect mid-session without a
//! restart (noticed by itself, or at once on `SIGHUP`), and a broken file
//! leaves the policy in force as it was.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};
use support::{tool_call, Proxy, Scratch};

const DENY_ECHO: &str = r#"
[[policy.rule]]
name = "no-echo"
hook = "steps/toolCallRequest"
tool = "echo"
decision = "deny"
reasoning = "echo is switched off"
"#;

/// Whether a call of `echo` with id `id` was denied.
fn echo_denied(proxy: &mut Proxy, id: i64) -> bool {
    proxy.send(&tool_call(id, "echo", json!({"text": "hi"})));
    let reply = proxy.response(&json!(id));
    reply["result"]["isError"] == Value::Bool(true)
}

/// Rewrites the config file with `policy` appended to what `base` held.
fn write_policy(config: &Path, base: &str, policy: &str) {
    std::fs::write(config, format!("{base}\n{policy}")).expect("rewrite config");
}

#[test]
fn a_changed_policy_applies_mid_session_and_a_broken_one_is_refused() {
    let scratch = Scratch::new();
    let config = scratch.demo_config("");
    let base = std::fs::read_to_string(&config).unwrap();
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    assert!(!echo_denied(&mut proxy, 1));

    // Noticed without a signal: the file changed.
    write_policy(&config, &base, DENY_ECHO);
    let deadline = Instant::now() + support::WAIT;
    let mut id = 2;
    while !echo_denied(&mut proxy, id) {
        assert!(Instant::now() < deadline, "the new policy never applied");
        std::thread::sleep(Duration::from_millis(200));
        id += 1;
    }

    // A broken policy: the one in force stays, after SIGHUP too.
    write_policy(
        &config,
        &base,
        "[[policy.rule]]\nname = \"half\"\ndecision = \"perhaps\"\n",
    );
    kill(Pid::from_raw(proxy.pid() as i32), Signal::SIGHUP).expect("SIGHUP");
    std::thread::sleep(Duration::from_millis(1500));
    assert!(echo_denied(&mut proxy, 100), "the previous policy stays");

    // SIGHUP applies a fixed file at once, and the proxy keeps serving.
    write_policy(&config, &base, "");
    kill(Pid::from_raw(proxy.pid() as i32), Signal::SIGHUP).expect("SIGHUP");
    let deadline = Instant::now() + support::WAIT;
    let mut id = 200;
    while echo_denied(&mut proxy, id) {
        assert!(Instant::now() < deadline, "the fixed policy never applied");
        std::thread::sleep(Duration::from_millis(100));
        id += 1;
    }
    assert!(proxy.finish().success());
    scratch.assert_audit_verifies();

    // Every decision names the version of the policy that made it.
    let entries = scratch.audit_entries();
    let digests: std::collections::BTreeSet<&str> = entries
        .iter()
        .filter(|entry| entry["decision_source"] == "embedded")
        .map(|entry| entry["policy_digest"].as_str().expect("a policy digest"))
        .collect();
    assert_eq!(digests.len(), 3, "one per policy in force: {digests:?}");
}

/// `n` rules for tools other than `echo`, then, with `deny_echo`, one that
/// denies `echo` (last, so every rule is compiled before it matters).
fn thousand_rules(deny_echo: bool) -> String {
    let mut rules = String::with_capacity(160 * 1000);
    for i in 0..999 {
        rules.push_str(&format!(
            "[[policy.rule]]\nname = \"r{i}\"\nhook = \"steps/toolCallRequest\"\ntool = \"tool-{i}\"\ndecision = \"deny\"\nreasoning = \"tool-{i} is off\"\n"
        ));
    }
    let last = if deny_echo { "echo" } else { "tool-999" };
    rules.push_str(&format!(
        "[[policy.rule]]\nname = \"r999\"\nhook = \"steps/toolCallRequest\"\ntool = \"{last}\"\ndecision = \"deny\"\nreasoning = \"echo is switched off\"\n"
    ));
    rules
}

/// Replaces the config file in one step (write beside it, rename), as
/// deployment tools do, so no reader sees half a file.
fn replace_config(config: &Path, text: &str) {
    let staged = config.with_extension("toml.new");
    std::fs::write(&staged, text).expect("write the new config");
    std::fs::rename(&staged, config).expect("rename over the config");
}

/// What became of the calls of a load run.
#[derive(Debug, Default)]
struct Tally {
    sent: i64,
    allowed: usize,
    denied: usize,
    /// Answers that are JSON-RPC errors (failed calls).
    errors: Vec<Value>,
    /// The decision the policy last put in force gives echo (denied?), and
    /// the first call id sent after it was put in force.
    expected: Option<(bool, i64)>,
    /// Whether a call sent after the last reload got the new decision.
    applied: bool,
}

impl Tally {
    fn take(&mut self, reply: Value) {
        let id = reply["id"].as_i64().unwrap_or(0);
        let denied = if reply.get("error").is_some() {
            self.errors.push(reply);
            return;
        } else if reply["result"]["isError"] == Value::Bool(true) {
            self.denied += 1;
            true
        } else {
            self.allowed += 1;
            false
        };
        if let Some((expected, from_id)) = self.expected {
            if id >= from_id && denied == expected {
                self.applied = true;
            }
        }
    }

    fn answered(&self) -> i64 {
        (self.allowed + self.denied + self.errors.len()) as i64
    }
}

#[test]
fn reloading_a_thousand_rule_policy_under_load_fails_no_call() {
    const RATE_PER_S: f64 = 1000.0;
    const RELOADS: usize = 6;
    const MIN_LOAD: Duration = Duration::from_secs(4);
    const MAX_OUTSTANDING: i64 = 256;
    let scratch = Scratch::new();
    let config = scratch.demo_config("");
    let base = std::fs::read_to_string(&config).unwrap();
    replace_config(&config, &format!("{base}\n{}", thousand_rules(false)));
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    let pid = Pid::from_raw(proxy.pid() as i32);

    // Calls go out at a steady rate; meanwhile the config file is replaced
    // by the other of two 1,000-rule policies (one denies echo) and the
    // proxy sent SIGHUP, each time once the previous one is seen deciding.
    let started = Instant::now();
    let deadline = started + MIN_LOAD + support::WAIT;
    let mut tally = Tally {
        applied: true,
        ..Tally::default()
    };
    let mut reloads = 0;
    let mut reloaded_at = started;
    while started.elapsed() < MIN_LOAD || reloads < RELOADS || !tally.applied {
        assert!(
            Instant::now() < deadline,
            "reload {reloads} never applied: {tally:?}"
        );
        let due = (started.elapsed().as_secs_f64() * RATE_PER_S) as i64;
        while tally.sent < due && tally.sent - tally.answered() < MAX_OUTSTANDING {
            tally.sent += 1;
            proxy.send(&tool_call(tally.sent, "echo", json!({"text": "load"})));
        }
        while let Some(reply) = proxy.try_recv() {
            tally.take(reply);
        }
        if tally.applied && reloads < RELOADS && reloaded_at.elapsed() > Duration::from_millis(300)
        {
            let deny_echo = reloads % 2 == 0;
            replace_config(&config, &format!("{base}\n{}", thousand_rules(deny_echo)));
            kill(pid, Signal::SIGHUP).expect("SIGHUP");
            tally.expected = Some((deny_echo, tally.sent + 1));
            tally.applied = false;
            reloads += 1;
            reloaded_at = Instant::now();
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let deadline = Instant::now() + support::WAIT;
    while tally.answered() < tally.sent {
        assert!(
            Instant::now() < deadline,
            "calls left unanswered: {tally:?}"
        );
        tally.take(proxy.recv());
    }
    assert!(proxy.finish().success());

    assert!(tally.errors.is_empty(), "failed calls: {:?}", tally.errors);
    assert!(tally.sent >= 1000, "only {} calls were sent", tally.sent);
    assert!(tally.allowed > 0 && tally.denied > 0, "{tally:?}");
    scratch.assert_audit_verifies();
}

/// A limit of three echo calls per session, and a rule on `add` whose
/// reasoning names the version, to see when a version is in force.
fn limited(version: &str, calls: u32) -> String {
    format!(
        "[[policy.limit]]\nname = \"echo-quota\"\ntool = \"echo\"\nper = \"session\"\ncalls = {calls}\ninterval_s = 3600\n\n\
         [[policy.rule]]\nname = \"version\"\nhook = \"steps/toolCallRequest\"\ntool = \"add\"\ndecision = \"deny\"\nreasoning = \"{version}\"\n"
    )
}

/// Sends SIGHUP and calls `add` until the policy `version` answers.
fn reload_to(proxy: &mut Proxy, next_id: &mut i64, version: &str) {
    kill(Pid::from_raw(proxy.pid() as i32), Signal::SIGHUP).expect("SIGHUP");
    let deadline = Instant::now() + support::WAIT;
    loop {
        *next_id += 1;
        proxy.send(&tool_call(*next_id, "add", json!({"a": 1, "b": 2})));
        let reply = proxy.response(&json!(*next_id));
        if reply["result"]["content"][0]["text"] == format!("Blocked by policy: {version}").as_str()
        {
            return;
        }
        assert!(Instant::now() < deadline, "{version} never applied");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn echo_answer(proxy: &mut Proxy, next_id: &mut i64) -> Value {
    *next_id += 1;
    proxy.send(&tool_call(*next_id, "echo", json!({"text": "hi"})));
    proxy.response(&json!(*next_id))
}

#[test]
fn limits_reload_with_the_policy_and_unchanged_ones_keep_their_count() {
    let scratch = Scratch::new();
    let config = scratch.demo_config("");
    let base = std::fs::read_to_string(&config).unwrap();
    write_policy(&config, &base, &limited("v1", 3));
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    let mut id = 0;
    for _ in 0..2 {
        let reply = echo_answer(&mut proxy, &mut id);
        assert!(reply.get("result").is_some(), "{reply}");
    }

    // The limit is the same in v2: its two spent calls stay spent.
    write_policy(&config, &base, &limited("v2", 3));
    reload_to(&mut proxy, &mut id, "v2");
    let third = echo_answer(&mut proxy, &mut id);
    assert!(third.get("result").is_some(), "{third}");
    let refused = echo_answer(&mut proxy, &mut id);
    assert_eq!(refused["error"]["code"], -32012, "{refused}");

    // v3 changes the limit: it starts with a full bucket of its new size.
    write_policy(&config, &base, &limited("v3", 5));
    reload_to(&mut proxy, &mut id, "v3");
    for call in 0..5 {
        let reply = echo_answer(&mut proxy, &mut id);
        assert!(reply.get("result").is_some(), "call {call}: {reply}");
    }
    let refused = echo_answer(&mut proxy, &mut id);
    assert_eq!(refused["error"]["code"], -32012, "{refused}");
    assert_eq!(
        refused["error"]["message"]
            .as_str()
            .map(|m| m.contains("5 calls")),
        Some(true),
        "{refused}"
    );

    // v4 drops it: echo is no longer limited.
    write_policy(&config, &base, "");
    kill(Pid::from_raw(proxy.pid() as i32), Signal::SIGHUP).expect("SIGHUP");
    let deadline = Instant::now() + support::WAIT;
    while echo_answer(&mut proxy, &mut id).get("error").is_some() {
        assert!(Instant::now() < deadline, "the limit was never dropped");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(proxy.finish().success());
    scratch.assert_audit_verifies();
}
