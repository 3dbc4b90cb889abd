//! Fault injection on the Guardian side: a remote Guardian that goes away
//! in the middle of a session and comes back as a new process on the same
//! port, knowing nothing of the session; and one whose HTTP server closes
//! kept-alive connections without notice (after every answer, or when
//! idle), under requests acs-proxy is sending.

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use support::faults::{metric, scrape};
use support::free_port;
use support::guardian::TestGuardian;
use support::{tool_call, Proxy, Scratch};

fn text(reply: &Value) -> &str {
    reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content: {reply}"))
}

/// The `steps/toolCallRequest` audit entry about the request `id`.
fn request_entry(entries: &[Value], id: i64) -> &Value {
    entries
        .iter()
        .find(|e| e["step_type"] == "steps/toolCallRequest" && e["mcp_id"] == id)
        .unwrap_or_else(|| panic!("no steps/toolCallRequest entry for {id}"))
}

#[test]
fn a_guardian_restart_mid_session_applies_the_posture_then_re_handshakes() {
    let scratch = Scratch::new();
    // The restarted Guardian checks the chain head the proxy witnesses: one
    // carried over from the old process would be a chain_mismatch.
    let script = json!({"check_chain_hash": true, "rules": [
        {"method": "steps/toolCallRequest", "tool": "get-env",
         "then": {"action": "deny", "reasoning": "no env dumps"}}]});
    let mut guardian = TestGuardian::http(&scratch, &script);
    let metrics = free_port();
    let config = guardian.proxy_config(
        &scratch,
        "on_decision_failure = \"deny\"\n",
        &format!("[metrics]\naddress = \"127.0.0.1:{metrics}\"\n"),
    );
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(1, "echo", json!({"text": "before"})));
    assert_eq!(text(&proxy.response(&json!(1))), "before");
    assert_eq!(guardian.hello_records().len(), 1);

    guardian.stop();
    proxy.send(&tool_call(2, "echo", json!({"text": "while down"})));
    let down = proxy.response(&json!(2));
    assert_eq!(down["result"]["isError"], true, "{down}");
    assert!(text(&down).contains("failure posture is deny"), "{down}");
    let failures = scrape(metrics);
    assert!(
        failures.contains("acs_proxy_decision_failures_total{"),
        "no decision failure counted:\n{failures}"
    );

    guardian.restart();
    proxy.send(&tool_call(3, "echo", json!({"text": "after"})));
    assert_eq!(text(&proxy.response(&json!(3))), "after");
    proxy.send(&tool_call(4, "get-env", json!({})));
    let denied = proxy.response(&json!(4));
    assert_eq!(denied["result"]["isError"], true, "{denied}");
    assert!(text(&denied).contains("no env dumps"), "{denied}");
    assert!(proxy.finish().success());

    assert_eq!(guardian.hello_records().len(), 2, "no re-handshake");
    let mismatches = guardian
        .hook_records()
        .into_iter()
        .filter(|r| r["action"] == "chain_mismatch")
        .count();
    assert_eq!(mismatches, 0);
    let entries = scratch.audit_entries();
    assert_eq!(request_entry(&entries, 1)["decision_source"], "remote");
    let posture: Vec<&Value> = entries
        .iter()
        .filter(|e| e["mcp_id"] == 2 && e["decision_source"] == "posture")
        .collect();
    assert_eq!(posture.len(), 1, "{entries:#?}");
    assert_eq!(posture[0]["action"], "blocked");
    assert_eq!(request_entry(&entries, 3)["decision_source"], "remote");
    let guarded = request_entry(&entries, 4);
    assert_eq!(guarded["decision_source"], "remote");
    assert_eq!(guarded["decision"], "deny");
    scratch.assert_audit_verifies();
}

/// Runs `calls` echo `tools/call`s through the proxy, one after another,
/// sleeping `pause(n)` after the n-th answer, against `guardian` with the
/// posture `proceed` (a hook the Guardian did not decide would go through
/// unguarded, as in the field), then checks that the Guardian decided
/// every hook exactly once: no posture fallback in the audit log, one
/// Guardian record per audited hook. Returns the proxy's metrics text.
fn every_hook_decided(
    scratch: &Scratch,
    guardian: &TestGuardian,
    calls: i64,
    pause: impl Fn(i64) -> Duration,
) -> String {
    let metrics = free_port();
    let config = guardian.proxy_config(
        scratch,
        "on_decision_failure = \"proceed\"\n",
        &format!("[metrics]\naddress = \"127.0.0.1:{metrics}\"\n"),
    );
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    for id in 1..=calls {
        let sent = format!("call {id}");
        proxy.send(&tool_call(id, "echo", json!({ "text": sent })));
        assert_eq!(text(&proxy.response(&json!(id))), sent);
        std::thread::sleep(pause(id));
    }
    let scraped = scrape(metrics);
    assert!(proxy.finish().success());

    let entries = scratch.audit_entries();
    let fallbacks: Vec<&Value> = entries
        .iter()
        .filter(|e| e["decision_source"] == "posture")
        .collect();
    assert!(
        fallbacks.is_empty(),
        "{} of {} hooks resolved by the posture: {fallbacks:#?}",
        fallbacks.len(),
        entries.len()
    );
    for entry in &entries {
        assert_eq!(entry["decision_source"], "remote", "{entry}");
    }
    for id in 1..=calls {
        assert_eq!(request_entry(&entries, id)["decision"], "allow");
    }
    let records = guardian.hook_records();
    let undecided = records
        .iter()
        .filter(|r| r["action"] != "allow")
        .collect::<Vec<_>>();
    assert!(undecided.is_empty(), "{undecided:#?}");
    assert_eq!(
        records.len(),
        entries.len(),
        "one Guardian request per hook"
    );
    scratch.assert_audit_verifies();
    scraped
}

/// The `acs_proxy_guardian_retries_total` series, for the test log: how
/// often the race this guards against happened in this run.
fn report_retries(scraped: &str) {
    let retries: Vec<&str> = scraped
        .lines()
        .filter(|line| line.starts_with("acs_proxy_guardian_retries_total"))
        .collect();
    eprintln!("Guardian retries: {retries:?}");
}

#[test]
fn a_guardian_closing_after_every_answer_decides_every_hook() {
    let scratch = Scratch::new();
    // It closes each connection once answered, and never says so with
    // `Connection: close`: every pooled connection goes stale.
    let guardian = TestGuardian::http_with_args(&scratch, &json!({}), &["--close-after-answer"]);
    let scraped = every_hook_decided(&scratch, &guardian, 150, |_| Duration::ZERO);
    report_retries(&scraped);
}

#[test]
fn a_guardian_closing_just_after_every_answer_decides_every_hook() {
    let scratch = Scratch::new();
    // The close comes 5 ms after each answer, and what is sent meanwhile
    // is never read: the hook that follows another at once (the wrapped
    // `tools/call` after its step) goes out on a connection about to close
    // under it, as when the close takes that long to cross the network.
    let guardian = TestGuardian::http_with_args(
        &scratch,
        &json!({}),
        &["--close-after-answer", "--close-delay-ms", "5"],
    );
    let scraped = every_hook_decided(&scratch, &guardian, 100, |_| Duration::ZERO);
    report_retries(&scraped);
    let answered = metric(
        &scraped,
        "acs_proxy_guardian_retries_total",
        "outcome=\"answered\"",
    );
    assert!(answered > 0.0, "the race never happened:\n{scraped}");
}

#[test]
fn a_guardian_closing_idle_connections_decides_every_hook() {
    let scratch = Scratch::new();
    // A 200 ms keep-alive, and calls spaced from just under it to just
    // over it: some find their connection closed in the meantime, some
    // race the close.
    let guardian = TestGuardian::http_with_args(&scratch, &json!({}), &["--keep-alive-ms", "200"]);
    let scraped = every_hook_decided(&scratch, &guardian, 40, |id| {
        Duration::from_millis(180 + (id as u64 % 11) * 5)
    });
    report_retries(&scraped);
}
