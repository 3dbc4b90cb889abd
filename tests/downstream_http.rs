//! acs-proxy as a Streamable HTTP MCP server (`[listen] transport =
//! "http"`), driven over real sockets by an HTTP client, in front of the
//! demo server: sessions, SSE responses, routing of server→client
//! requests, resumption, cancellation of abandoned streams, edge security,
//! limits, and the audit chain of each session.

mod support;

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};
use support::mcp_http::{client, json_body, read_reply, McpHttp, SseStream, ACCEPT_BOTH};
use support::{audit_chains, listen_section, tool_call, NetProxy, Scratch};

const DENY_ENV: &str = r#"
[[policy.rule]]
name = "no-env"
hook = "steps/toolCallRequest"
tool = "get-env"
decision = "deny"
reasoning = "the environment stays private"
"#;

fn start(scratch: &Scratch, listen_extra: &str, extra: &str) -> NetProxy {
    let config = scratch.demo_config(&format!(
        "{}\n{DENY_ENV}\n{extra}",
        listen_section("http", listen_extra)
    ));
    NetProxy::start(&config)
}

fn session(proxy: &NetProxy) -> McpHttp {
    McpHttp::new(client(None), proxy.url("/mcp"))
}

fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Waits until the audit log has `count` sealed session chains.
async fn wait_for_sealed(scratch: &Scratch, count: usize) -> Vec<(String, bool)> {
    let deadline = tokio::time::Instant::now() + support::WAIT;
    loop {
        let chains = audit_chains(scratch);
        if chains.iter().filter(|(_, sealed)| *sealed).count() >= count {
            return chains;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "expected {count} sealed chains, have {chains:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_session_from_initialize_to_delete() {
    let scratch = Scratch::new();
    let proxy = start(&scratch, "", "");
    let mut mcp = session(&proxy);
    let result = mcp.initialize("2025-06-18", json!({})).await;
    assert_eq!(result["serverInfo"]["name"], "acs-proxy-demo-server");
    assert_eq!(mcp.version.as_deref(), Some("2025-06-18"));
    let id = mcp.session.clone().unwrap();
    assert!(id.len() >= 32 && id.bytes().all(|b| (0x21..=0x7e).contains(&b)));

    // A call answered on an SSE stream.
    let response = mcp
        .post(&tool_call(2, "echo", json!({"text":"hello"})))
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    assert_eq!(response.headers()["mcp-session-id"].to_str().unwrap(), id);
    let mut stream = SseStream::new(response);
    let event = stream.next_message().await.expect("an event");
    assert_eq!(event.json()["result"]["content"][0]["text"], "hello");
    let (stream_id, _) = event.id.as_deref().unwrap().split_once('-').unwrap();
    assert_ne!(stream_id, "0", "a POST stream is not the GET stream");
    assert!(
        stream.next().await.is_none(),
        "the stream ends after its response"
    );

    // A denied call: the policy's answer, on the same path.
    let (reply, _) = mcp.request(&tool_call(3, "get-env", json!({}))).await;
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    assert!(text_of(&reply["result"]).contains("the environment stays private"));

    // A client that accepts only JSON gets one JSON body.
    let response = mcp
        .post_text(
            &tool_call(4, "add", json!({"a":2,"b":3})).to_string(),
            "application/json",
        )
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "application/json"
    );
    let reply = json_body(response).await;
    assert_eq!(text_of(&reply["result"]), "5");

    // Notifications alone: 202, no body.
    let response = mcp
        .post(&json!({"jsonrpc":"2.0","method":"notifications/roots/list_changed"}))
        .await;
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    assert!(response.bytes().await.unwrap().is_empty());

    // DELETE ends the session; it is unknown afterwards.
    assert_eq!(mcp.delete().await, StatusCode::NO_CONTENT);
    let response = mcp
        .post(&tool_call(5, "echo", json!({"text":"late"})))
        .await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let body = json_body(response).await;
    assert!(body["error"]["message"].is_string(), "{body}");
    assert_eq!(mcp.delete().await, StatusCode::NOT_FOUND);

    // The server saw the calls, not the denied one; the chain is sealed.
    let received = scratch.server_received();
    assert!(received.iter().any(|m| m["id"] == 2));
    assert!(!received.iter().any(|m| m["params"]["name"] == "get-env"));
    let chains = wait_for_sealed(&scratch, 1).await;
    assert_eq!(chains.len(), 1);
}

#[tokio::test]
async fn requests_without_a_known_session_are_refused() {
    let scratch = Scratch::new();
    let proxy = start(&scratch, "", "");
    let mut mcp = session(&proxy);
    // No session id: 400; an unknown one: 404.
    let response = mcp.post(&tool_call(1, "echo", json!({"text":"x"}))).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let body = json_body(response).await;
    assert_eq!(body["jsonrpc"], "2.0");
    assert!(body["error"]["code"].is_i64());
    assert_eq!(mcp.get(None).await.status(), StatusCode::BAD_REQUEST);
    mcp.session = Some("no-such-session".into());
    assert_eq!(
        mcp.post(&tool_call(1, "echo", json!({"text":"x"})))
            .await
            .status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(mcp.get(None).await.status(), StatusCode::NOT_FOUND);
    mcp.session = None;

    mcp.initialize("2025-11-25", json!({})).await;
    // An unsupported MCP-Protocol-Version: 400. Absent: accepted.
    mcp.version = Some("1999-01-01".into());
    let response = mcp.post(&tool_call(2, "echo", json!({"text":"x"}))).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    mcp.version = None;
    let (reply, _) = mcp
        .request(&tool_call(3, "echo", json!({"text":"x"})))
        .await;
    assert_eq!(text_of(&reply["result"]), "x");
    // An Accept that allows neither JSON nor SSE: 400.
    let response = mcp
        .post_text(
            &tool_call(4, "echo", json!({"text":"x"})).to_string(),
            "text/html",
        )
        .await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    // Not JSON: 400 with a parse error.
    let response = mcp.post_text("{not json", ACCEPT_BOTH).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let body = json_body(response).await;
    assert_eq!(body["error"]["code"], -32700);
    // Other methods: 405.
    let response = mcp.client.put(mcp.url.clone()).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    // Other paths: 404.
    let response = mcp
        .client
        .get(proxy.url("/elsewhere"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn server_requests_travel_on_the_get_stream_and_are_answered_by_post() {
    let scratch = Scratch::new();
    let proxy = start(&scratch, "", "");
    let mut mcp = session(&proxy);
    mcp.initialize("2025-06-18", json!({"sampling":{}})).await;
    let get = mcp.get(None).await;
    assert_eq!(get.status(), StatusCode::OK);
    let mut standalone = SseStream::new(get);

    let call = mcp
        .post(&tool_call(7, "sample", json!({"prompt":"say hi"})))
        .await;
    assert_eq!(call.status(), StatusCode::OK);
    let sampling = standalone.next_message().await.expect("a server request");
    assert!(sampling.id.as_deref().unwrap().starts_with("0-"));
    let request = sampling.json();
    assert_eq!(request["method"], "sampling/createMessage", "{request}");
    let answer = json!({"jsonrpc":"2.0","id":request["id"],"result":{
        "role":"assistant","content":{"type":"text","text":"sampled by the test"},
        "model":"test-model","stopReason":"endTurn"}});
    assert_eq!(mcp.notify(&answer).await, StatusCode::ACCEPTED);
    let (reply, before) = read_reply(call, &json!(7)).await;
    assert!(
        reply.to_string().contains("sampled by the test"),
        "{reply} after {before:?}"
    );
    assert!(
        before
            .iter()
            .all(|m| m["method"] != "sampling/createMessage"),
        "a message goes to exactly one stream"
    );
}

#[tokio::test]
async fn without_a_get_stream_server_requests_use_the_open_post_stream() {
    let scratch = Scratch::new();
    let proxy = start(&scratch, "", "");
    let mut mcp = session(&proxy);
    mcp.initialize("2025-03-26", json!({"sampling":{}})).await;
    let call = mcp
        .post(&tool_call(8, "sample", json!({"prompt":"x"})))
        .await;
    let mut stream = SseStream::new(call);
    let request = stream.next_message().await.unwrap().json();
    assert_eq!(request["method"], "sampling/createMessage");
    let answer = json!({"jsonrpc":"2.0","id":request["id"],"result":{
        "role":"assistant","content":{"type":"text","text":"from the POST stream"},
        "model":"m","stopReason":"endTurn"}});
    assert_eq!(mcp.notify(&answer).await, StatusCode::ACCEPTED);
    let reply = stream.next_message().await.unwrap().json();
    assert_eq!(reply["id"], 8);
    assert!(reply.to_string().contains("from the POST stream"));
}

/// `change-tools` (the server then sends `notifications/tools/list_changed`),
/// answered as JSON so no POST stream is open for other traffic.
async fn json_only(mcp: &McpHttp, id: i64) {
    let body = tool_call(id, "change-tools", json!({})).to_string();
    let response = mcp.post_text(&body, "application/json").await;
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test]
async fn streams_resume_after_last_event_id() {
    let scratch = Scratch::new();
    let proxy = start(&scratch, "", "");
    let mut mcp = session(&proxy);
    mcp.initialize("2025-11-25", json!({})).await;

    // The GET stream starts with a priming event (an id, empty data).
    let mut standalone = SseStream::new(mcp.get(None).await);
    let priming = standalone.next().await.unwrap();
    assert!(priming.data.is_empty());
    assert!(priming.id.as_deref().unwrap().starts_with("0-"));
    // Unrelated notifications (tools/list_changed) go to the GET stream.
    json_only(&mcp, 10).await;
    let first = standalone.next_message().await.unwrap();
    assert_eq!(first.json()["method"], "notifications/tools/list_changed");
    json_only(&mcp, 11).await;
    let second = standalone.next_message().await.unwrap();
    drop(standalone);

    // Resuming after the first event replays the second, then goes on live.
    let mut resumed = SseStream::new(mcp.get(first.id.as_deref()).await);
    let replayed = resumed.next_message().await.unwrap();
    assert_eq!(replayed.id, second.id);
    assert_eq!(replayed.data, second.data);
    json_only(&mcp, 12).await;
    let live = resumed.next_message().await.unwrap();
    assert_eq!(live.json()["method"], "notifications/tools/list_changed");
    drop(resumed);

    // With no stream open, messages are kept until a GET opens one.
    // (Give the proxy a moment to notice the closed connection.)
    tokio::time::sleep(Duration::from_millis(300)).await;
    json_only(&mcp, 13).await;
    let mut reopened = SseStream::new(mcp.get(None).await);
    let kept = reopened.next_message().await.unwrap();
    assert_eq!(kept.json()["method"], "notifications/tools/list_changed");
    drop(reopened);

    // A POST stream broken off after its first event resumes by GET.
    let response = mcp
        .post(
            &json!({"jsonrpc":"2.0","id":20,"method":"tools/call","params":{
            "name":"slow","arguments":{"ms":600,"steps":3},"_meta":{"progressToken":"p20"}}}),
        )
        .await;
    let mut post_stream = SseStream::new(response);
    let primed = post_stream.next().await.unwrap();
    assert!(primed.data.is_empty());
    drop(post_stream);
    let mut resumed = SseStream::new(mcp.get(primed.id.as_deref()).await);
    let mut progress = 0;
    loop {
        let message = resumed.next_message().await.expect("the response").json();
        if message["method"] == "notifications/progress" {
            assert_eq!(message["params"]["progressToken"], "p20");
            progress += 1;
            continue;
        }
        assert_eq!(message["id"], 20, "{message}");
        assert!(message["result"].is_object());
        break;
    }
    assert_eq!(progress, 3);
    assert!(resumed.next().await.is_none(), "a finished stream ends");
    // An event id of a stream nobody knows: 409; a malformed one: 400.
    assert_eq!(mcp.get(Some("999-1")).await.status(), StatusCode::CONFLICT);
    assert_eq!(
        mcp.get(Some("garbage")).await.status(),
        StatusCode::BAD_REQUEST
    );
}

#[tokio::test]
async fn an_abandoned_response_stream_cancels_its_request() {
    let scratch = Scratch::new();
    let proxy = start(&scratch, "", "");
    let mut mcp = session(&proxy);
    mcp.initialize("2025-06-18", json!({})).await;
    let response = mcp
        .post(&tool_call(30, "slow", json!({"ms":20000,"steps":2})))
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    drop(response);
    // After the resumption grace period the proxy cancels upstream.
    let deadline = tokio::time::Instant::now() + support::WAIT;
    loop {
        let cancelled = scratch
            .server_received()
            .into_iter()
            .find(|m| m["method"] == "notifications/cancelled" && m["params"]["requestId"] == 30);
        if let Some(cancelled) = cancelled {
            assert!(cancelled["params"]["reason"].is_string());
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no notifications/cancelled reached the server"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The session goes on.
    let (reply, _) = mcp
        .request(&tool_call(31, "echo", json!({"text":"still here"})))
        .await;
    assert_eq!(text_of(&reply["result"]), "still here");
}

#[tokio::test]
async fn batches_are_answered_as_batches() {
    let scratch = Scratch::new();
    let proxy = start(&scratch, "", "");
    let mut mcp = session(&proxy);
    mcp.initialize("2025-03-26", json!({})).await;
    let batch = json!([
        tool_call(40, "echo", json!({"text":"a"})),
        {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"x","progress":1}},
        tool_call(41, "get-env", json!({})),
    ]);
    let response = mcp.post_text(&batch.to_string(), "application/json").await;
    assert_eq!(response.status(), StatusCode::OK);
    let reply = json_body(response).await;
    let replies = reply.as_array().expect("an array");
    let ids: Vec<&Value> = replies.iter().map(|r| &r["id"]).collect();
    assert!(
        ids.contains(&&json!(40)) && ids.contains(&&json!(41)),
        "{reply}"
    );

    // Over SSE the batch answer arrives on the POST's stream.
    let batch = json!([
        tool_call(42, "echo", json!({"text":"b"})),
        tool_call(43, "echo", json!({"text":"c"}))
    ]);
    let mut stream = SseStream::new(mcp.post(&batch).await);
    let mut seen = Vec::new();
    while let Some(event) = stream.next().await {
        if event.data.is_empty() {
            continue;
        }
        match event.json() {
            Value::Array(items) => seen.extend(items.into_iter().map(|m| m["id"].clone())),
            single => seen.push(single["id"].clone()),
        }
    }
    seen.sort_by_key(|id| id.as_i64());
    assert_eq!(seen, [json!(42), json!(43)]);
}

#[tokio::test]
async fn edge_security_and_limits() {
    let scratch = Scratch::new();
    let tokens = scratch.path("tokens");
    std::fs::write(&tokens, "# agents\ntoken-alpha\ntoken-beta\n").unwrap();
    let proxy = start(
        &scratch,
        &format!("auth_tokens_file = {:?}\n", tokens.display().to_string()),
        "[limits]\nmax_message_bytes = 2048\n",
    );
    let http = client(None);
    let url = proxy.url("/mcp");
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})
    .to_string();
    let post = |headers: &[(&str, &str)], body: String| {
        let mut builder = http
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", ACCEPT_BOTH)
            .body(body);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.send()
    };
    let auth = ("authorization", "Bearer token-beta");

    // No token, a wrong token: 401 with a Bearer challenge.
    let response = post(&[], init.clone()).await.unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert!(response.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .starts_with("Bearer"));
    let response = post(&[("authorization", "Bearer token-gamma")], init.clone())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    // A foreign Origin or Host: 403, before anything else.
    let response = post(&[auth, ("origin", "https://evil.example")], init.clone())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let response = post(&[auth, ("host", "evil.example")], init.clone())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let response = post(&[("host", "rebind.example:80")], init.clone())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    // A loopback Origin and the right token: served, with CORS headers.
    let response = post(&[auth, ("origin", "http://localhost:5173")], init.clone())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["access-control-allow-origin"],
        "http://localhost:5173"
    );
    let session = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    drop(response);
    // A body over the limit: 413.
    let big = tool_call(2, "echo", json!({"text": "x".repeat(4096)})).to_string();
    let response = post(&[auth, ("mcp-session-id", &session)], big)
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    // The token file is re-read when it changes.
    std::fs::write(&tokens, "token-rotated-in\n").unwrap();
    let deadline = tokio::time::Instant::now() + support::WAIT;
    loop {
        let response = post(
            &[("authorization", "Bearer token-rotated-in")],
            init.clone(),
        )
        .await
        .unwrap();
        if response.status() == StatusCode::OK {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the new token was never accepted"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let response = post(&[auth], init.clone()).await.unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn upstream_failures_session_limits_and_idle_expiry() {
    // An upstream that cannot start: 502 with a JSON-RPC error naming it.
    let scratch = Scratch::new();
    let config = scratch.config(
        &["/nonexistent/mcp-server".to_owned()],
        &listen_section("http", ""),
    );
    let proxy = NetProxy::start(&config);
    let mcp = session(&proxy);
    let response = mcp
        .post(&json!({"jsonrpc":"2.0","id":"i","method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}))
        .await;
    assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
    let body = json_body(response).await;
    assert_eq!(body["id"], "i");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("demo"),
        "{body}"
    );
    drop(proxy);

    // max_sessions = 1: a second session gets 503; an idle one expires.
    let scratch = Scratch::new();
    let proxy = start(
        &scratch,
        "max_sessions = 1\nsession_idle_timeout_ms = 400\n",
        "",
    );
    let mut first = session(&proxy);
    first.initialize("2025-06-18", json!({})).await;
    let mut second = session(&proxy);
    let response = second
        .post(&json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}))
        .await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body = json_body(response).await;
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("maximum"));
    // Idle past the timeout: the session is gone, its chain sealed, and a
    // new session fits again.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let response = first.post(&tool_call(2, "echo", json!({"text":"x"}))).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    wait_for_sealed(&scratch, 1).await;
    second.initialize("2025-06-18", json!({})).await;
}

#[tokio::test]
async fn sigterm_ends_every_session_and_seals_its_chain() {
    let scratch = Scratch::new();
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let mut proxy = start(
        &scratch,
        "",
        &format!("[metrics]\naddress = \"127.0.0.1:{port}\"\n"),
    );
    let mut a = session(&proxy);
    a.initialize("2025-06-18", json!({})).await;
    let mut b = McpHttp::new(client(None), proxy.url("/mcp/demo"));
    b.initialize("2025-11-25", json!({})).await;
    let (reply, _) = b.request(&tool_call(2, "echo", json!({"text":"b"}))).await;
    assert_eq!(text_of(&reply["result"]), "b");
    let mut standalone = SseStream::new(a.get(None).await);

    let metrics = client(None)
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("acs_proxy_http_requests_total{route=\"demo\",status=\"200\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("acs_proxy_sessions_active{route=\"demo\"} 2"),
        "{metrics}"
    );
    let ready = client(None)
        .get(format!("http://127.0.0.1:{port}/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), StatusCode::OK);

    let status = tokio::task::spawn_blocking(move || {
        let status = proxy.terminate();
        (status, proxy)
    })
    .await
    .unwrap();
    assert!(status.0.success(), "exit status {:?}", status.0);
    // The open stream ends with the session.
    assert!(standalone.next().await.is_none());
    let chains = audit_chains(&scratch);
    assert_eq!(chains.len(), 2, "{chains:?}");
    assert!(chains.iter().all(|(_, sealed)| *sealed), "{chains:?}");
    let ends = support::entries_of(&scratch.audit_entries(), "steps/sessionEnd").len();
    assert_eq!(ends, 2);
}
