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
