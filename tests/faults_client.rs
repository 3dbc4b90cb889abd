//! Fault injection on the client side: an agent that goes away with
//! requests in flight, and one that reuses a request id while the first
//! request with it is still pending. Over stdio and Streamable HTTP.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::faults::{misbehaving_config, server_received, wait_for_metric};
use support::free_port;
use support::mcp_http::{client, read_reply, McpHttp};
use support::{
    audit_chains, audit_chains_once, listen_section, tool_call, NetProxy, Proxy, Scratch, WAIT,
};

const SESSIONS_ACTIVE: &str = "acs_proxy_sessions_active";

/// The upstream child of the proxy (the misbehaving server).
fn child_of(pid: u32) -> u32 {
    let output = Command::new("pgrep")
        .args(["-P", &pid.to_string()])
        .output()
        .expect("pgrep");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .next()
        .and_then(|line| line.trim().parse().ok())
        .expect("the proxy has a child process")
}

fn alive(pid: u32) -> bool {
    Command::new("kill")
        .args(["-0", &pid.to_string()])
        .status()
        .expect("kill -0")
        .success()
}

#[test]
fn closing_stdin_with_requests_in_flight_ends_the_server_and_seals_the_chain() {
    let scratch = Scratch::new();
    let mut proxy = Proxy::start(&misbehaving_config(&scratch, free_port(), ""));
    proxy.initialize(json!({}));
    proxy.send(&tool_call(1, "hang", json!({})));
    proxy.send(&tool_call(2, "late", json!({"ms": 60_000})));
    let server = child_of(proxy.pid());
    let deadline = Instant::now() + WAIT;
    while server_received(&scratch)
        .iter()
        .filter(|m| m["method"] == "tools/call")
        .count()
        < 2
    {
        assert!(
            Instant::now() < deadline,
            "the calls never reached the server"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(proxy.finish().success());
    assert!(!alive(server), "the upstream server outlived the proxy");
    let entries = scratch.audit_entries();
    assert_eq!(entries.last().unwrap()["step_type"], "steps/sessionEnd");
    assert!(audit_chains(&scratch).iter().all(|(_, sealed)| *sealed));
}

#[tokio::test]
async fn over_http_a_dropped_connection_cancels_upstream_and_the_session_does_not_leak() {
    let scratch = Scratch::new();
    let metrics = free_port();
    let listen = listen_section("http", "session_idle_timeout_ms = 5000");
    let proxy = NetProxy::start(&misbehaving_config(&scratch, metrics, &listen));
    let mut session = McpHttp::new(client(None), proxy.url("/mcp"));
    session.initialize("2025-06-18", json!({})).await;
    wait_for_metric(metrics, SESSIONS_ACTIVE, "route=\"demo\"", 1.0);

    let stream = session.post(&tool_call(1, "hang", json!({}))).await;
    assert_eq!(stream.status(), 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(stream);

    // Not resumed within 3 s: the request is cancelled upstream.
    let deadline = Instant::now() + WAIT;
    loop {
        let cancelled = server_received(&scratch)
            .into_iter()
            .any(|m| m["method"] == "notifications/cancelled" && m["params"]["requestId"] == 1);
        if cancelled {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no cancellation reached the server"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Nobody comes back: the session expires, its chain is sealed and the
    // gauge goes back to zero.
    wait_for_metric(metrics, SESSIONS_ACTIVE, "route=\"demo\"", 0.0);
    let chains = audit_chains_once(&scratch, |chains| chains.iter().all(|(_, sealed)| *sealed));
    assert_eq!(chains.len(), 1);
    assert!(chains[0].1, "the chain was not sealed: {chains:?}");
    let entries = scratch.audit_entries();
    assert_eq!(entries.last().unwrap()["step_type"], "steps/sessionEnd");
}

#[tokio::test]
async fn over_http_a_reused_id_is_refused_and_the_first_answer_goes_to_its_own_stream() {
    let scratch = Scratch::new();
    let config = misbehaving_config(&scratch, free_port(), &listen_section("http", ""));
    let proxy = NetProxy::start(&config);
    let mut session = McpHttp::new(client(None), proxy.url("/mcp"));
    session.initialize("2025-06-18", json!({})).await;

    let first = session
        .post(&tool_call(7, "late", json!({"ms": 1500})))
        .await;
    assert_eq!(first.status(), 200);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let second = session
        .post(&tool_call(7, "echo", json!({"text": "second"})))
        .await;
    let (refusal, _) = read_reply(second, &json!(7)).await;
    assert_eq!(refusal["error"]["code"], -32600, "{refusal}");
    let (answer, _) = read_reply(first, &json!(7)).await;
    assert_eq!(
        answer["result"]["content"][0]["text"], "late answer",
        "{answer}"
    );
    let echoed: Vec<Value> = server_received(&scratch)
        .into_iter()
        .filter(|m| m["params"]["name"] == "echo")
        .collect();
    assert!(
        echoed.is_empty(),
        "the reused id reached the server: {echoed:?}"
    );
}
