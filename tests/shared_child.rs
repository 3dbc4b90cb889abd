//! `[[upstream]] share = true`: several Streamable HTTP sessions through
//! one demo-server child. One process, one `initialize`, every session its
//! own answers with its own ids, progress and server requests routed to
//! the right session, broadcasts to all; a crash fails every session's
//! requests in flight with -32011 and the next session starts a new child.

mod support;

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};
use support::mcp_http::{client, read_reply, McpHttp, SseStream};
use support::{audit_chains, listen_section, tool_call, NetProxy, Scratch};

const UPSTREAM_UNAVAILABLE: i64 = -32011;

fn start(scratch: &Scratch) -> NetProxy {
    start_with(scratch, "")
}

fn start_with(scratch: &Scratch, listen_extra: &str) -> NetProxy {
    let config = scratch.demo_config(&listen_section("http", listen_extra));
    let text = std::fs::read_to_string(&config).unwrap();
    let text = text.replacen("name = \"demo\"\n", "name = \"demo\"\nshare = true\n", 1);
    std::fs::write(&config, text).unwrap();
    NetProxy::start(&config)
}

/// The demo servers running for this test (their command line names the
/// scratch directory's record file).
fn server_pids(scratch: &Scratch) -> Vec<i32> {
    let needle = scratch.server_record().display().to_string();
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains("acs-proxy-demo-server") && cmdline.contains(&needle) {
            pids.push(pid);
        }
    }
    pids
}

/// Waits until exactly one demo server runs, and returns its pid.
async fn the_one_server(scratch: &Scratch) -> i32 {
    let deadline = tokio::time::Instant::now() + support::WAIT;
    loop {
        let pids = server_pids(scratch);
        if let [pid] = pids.as_slice() {
            return *pid;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "expected one server process, found {pids:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn initializes_received(scratch: &Scratch) -> usize {
    scratch
        .server_received()
        .iter()
        .filter(|m| m["method"] == "initialize")
        .count()
}

async fn session(proxy: &NetProxy, capabilities: Value) -> McpHttp {
    let mut mcp = McpHttp::new(client(None), proxy.url("/mcp"));
    let result = mcp.initialize("2025-06-18", capabilities).await;
    assert_eq!(result["serverInfo"]["name"], "acs-proxy-demo-server");
    mcp
}

fn text_of(reply: &Value) -> String {
    reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn slow_call(id: i64, token: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{
        "name":"slow","arguments":{"ms":600,"steps":3},"_meta":{"progressToken":token}}})
}

#[tokio::test]
async fn sessions_share_one_child_with_their_own_ids_and_progress() {
    let scratch = Scratch::new();
    let proxy = start(&scratch);
    let mut sessions = Vec::new();
    for _ in 0..3 {
        sessions.push(session(&proxy, json!({})).await);
    }
    the_one_server(&scratch).await;
    assert_eq!(initializes_received(&scratch), 1, "initialized once");

    // The same id from every session at once; each gets its own answer.
    let calls = sessions.iter().enumerate().map(|(n, mcp)| async move {
        mcp.request(&tool_call(
            2,
            "echo",
            json!({"text": format!("session {n}")}),
        ))
        .await
    });
    for (n, (reply, _)) in futures_util::future::join_all(calls)
        .await
        .into_iter()
        .enumerate()
    {
        assert_eq!(reply["id"], 2);
        assert_eq!(text_of(&reply), format!("session {n}"));
    }

    // The same id and progress token from two sessions at once: each
    // stream carries only its own call's progress, with its own token.
    let slow = sessions[..2]
        .iter()
        .map(|mcp| async move { mcp.request(&slow_call(3, "tok")).await });
    for (reply, before) in futures_util::future::join_all(slow).await {
        assert_eq!(text_of(&reply), "slept 600 ms");
        let progress: Vec<&Value> = before
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .collect();
        assert_eq!(progress.len(), 3, "{before:?}");
        assert!(progress
            .iter()
            .all(|m| m["params"]["progressToken"] == "tok"));
    }
    let received = scratch.server_received();
    let tokens: Vec<&Value> = received
        .iter()
        .filter_map(|m| m.pointer("/params/_meta/progressToken"))
        .collect();
    assert_eq!(tokens.len(), 2);
    assert_ne!(tokens[0], tokens[1], "the server saw two distinct tokens");

    // A list change reaches every session.
    let mut streams = Vec::new();
    for mcp in &sessions {
        let response = mcp.get(None).await;
        assert_eq!(response.status(), StatusCode::OK);
        streams.push(SseStream::new(response));
    }
    sessions[0]
        .request(&tool_call(4, "change-tools", json!({})))
        .await;
    for stream in &mut streams {
        let event = stream.next_message().await.expect("a broadcast");
        assert_eq!(event.json()["method"], "notifications/tools/list_changed");
    }
    assert_eq!(server_pids(&scratch).len(), 1);
    assert_eq!(initializes_received(&scratch), 1);

    // Each session keeps its own audit chain.
    for mcp in &sessions {
        assert_eq!(mcp.delete().await, StatusCode::NO_CONTENT);
    }
    let deadline = tokio::time::Instant::now() + support::WAIT;
    loop {
        let chains = audit_chains(&scratch);
        if chains.len() == 3 && chains.iter().all(|(_, sealed)| *sealed) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "expected three sealed chains, have {chains:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The last session out shut the shared server down.
    let deadline = tokio::time::Instant::now() + support::WAIT;
    while !server_pids(&scratch).is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server still runs"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_server_request_reaches_a_session_that_can_answer_it() {
    let scratch = Scratch::new();
    let proxy = start(&scratch);
    let sampler = session(&proxy, json!({"sampling":{}})).await;
    let other = session(&proxy, json!({})).await;

    // The sampling session calls `sample`; the other then has a call in
    // flight too, but did not declare sampling, so the request is not its.
    let response = sampler
        .post(&tool_call(5, "sample", json!({"prompt":"hello"})))
        .await;
    let mut stream = SseStream::new(response);
    let busy = other.post(&slow_call(6, "t")).await;
    let request = stream
        .next_message()
        .await
        .expect("a sampling request")
        .json();
    assert_eq!(request["method"], "sampling/createMessage", "{request}");
    let answer = json!({"jsonrpc":"2.0","id":request["id"],"result":{
        "role":"assistant","content":{"type":"text","text":"sampled by the right session"},"model":"m"}});
    assert_eq!(sampler.notify(&answer).await, StatusCode::ACCEPTED);
    let reply = loop {
        let message = stream.next_message().await.expect("the tool result").json();
        if message["id"] == 5 {
            break message;
        }
    };
    assert!(
        reply.to_string().contains("sampled by the right session"),
        "{reply}"
    );
    let (reply, before) = read_reply(busy, &json!(6)).await;
    assert_eq!(text_of(&reply), "slept 600 ms");
    assert!(before
        .iter()
        .all(|m| m["method"] != "sampling/createMessage"));
}

#[tokio::test]
async fn a_crash_fails_every_sessions_requests_and_the_next_session_restarts_the_child() {
    let scratch = Scratch::new();
    let proxy = start(&scratch);
    let a = session(&proxy, json!({})).await;
    let b = session(&proxy, json!({})).await;
    let pid = the_one_server(&scratch).await;

    let long = |id: i64| {
        json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{
            "name":"slow","arguments":{"ms":20000,"steps":20},"_meta":{"progressToken":"p"}}})
    };
    let mut streams = Vec::new();
    for (mcp, id) in [(&a, 7), (&b, 8)] {
        let mut stream = SseStream::new(mcp.post(&long(id)).await);
        let progress = stream.next_message().await.expect("progress").json();
        assert_eq!(progress["method"], "notifications/progress");
        streams.push((stream, id));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    for (mut stream, id) in streams {
        let reply = loop {
            let message = stream.next_message().await.expect("an error reply").json();
            if message["id"] == id {
                break message;
            }
        };
        assert_eq!(reply["error"]["code"], UPSTREAM_UNAVAILABLE, "{reply}");
    }

    let c = session(&proxy, json!({})).await;
    let (reply, _) = c
        .request(&tool_call(9, "echo", json!({"text":"again"})))
        .await;
    assert_eq!(text_of(&reply), "again");
    let restarted = the_one_server(&scratch).await;
    assert_ne!(restarted, pid, "a new child");
    assert_eq!(initializes_received(&scratch), 2);
}

#[tokio::test]
async fn a_legacy_sse_session_and_a_streamable_http_session_share_the_child() {
    let scratch = Scratch::new();
    let proxy = start_with(&scratch, "legacy_sse = true\n");
    let modern = session(&proxy, json!({})).await;

    let http = client(None);
    let response = http
        .get(proxy.url("/mcp/sse"))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    let mut legacy = SseStream::new(response);
    let post_url = proxy.url(&legacy.next().await.expect("the endpoint event").data);
    let post = |message: Value| {
        let (http, url) = (http.clone(), post_url.clone());
        async move {
            let response = http
                .post(url)
                .header("content-type", "application/json")
                .body(message.to_string())
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::ACCEPTED);
        }
    };
    post(json!({"jsonrpc":"2.0","id":2,"method":"initialize","params":{
        "protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"legacy","version":"1"}}}))
    .await;
    let reply = legacy.next_message().await.expect("initialize").json();
    assert_eq!(reply["id"], 2);
    assert_eq!(
        reply["result"]["serverInfo"]["name"],
        "acs-proxy-demo-server"
    );
    post(json!({"jsonrpc":"2.0","method":"notifications/initialized"})).await;

    // Id 2 from both sessions at once.
    post(tool_call(2, "echo", json!({"text":"legacy"}))).await;
    let (reply, _) = modern
        .request(&tool_call(2, "echo", json!({"text":"modern"})))
        .await;
    assert_eq!(text_of(&reply), "modern");
    let reply = loop {
        let message = legacy.next_message().await.expect("the echo").json();
        if message["id"] == 2
            && message
                .get("result")
                .is_some_and(|r| r.get("content").is_some())
        {
            break message;
        }
    };
    assert_eq!(text_of(&reply), "legacy");
    the_one_server(&scratch).await;
    assert_eq!(initializes_received(&scratch), 1);
}
