//! Limits on requests in flight (per session and across sessions) and on
//! sessions: a request or session over a limit is refused at once with
//! -32012 naming the limit, counted in `acs_proxy_limit_refusals_total`, and
//! recorded in the audit log; other sessions go on unaffected. Driven over
//! stdio, Streamable HTTP and WebSocket in front of the demo server.

mod support;

use futures_util::StreamExt;
use reqwest::StatusCode;
use serde_json::{json, Value};
use support::free_port;
use support::mcp_http::{client, json_body, read_reply, McpHttp, SseStream};
use support::{listen_section, tool_call, NetProxy, Proxy, Scratch};

const LIMIT_EXCEEDED: i64 = -32012;

/// A `slow` call that reports progress, so the test knows it is in flight.
fn slow_call(id: i64, ms: u64) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{
        "name":"slow","arguments":{"ms":ms,"steps":4},"_meta":{"progressToken":format!("p{id}")}}})
}

fn metrics_section(port: u16) -> String {
    format!("[metrics]\naddress = \"127.0.0.1:{port}\"\n")
}

/// `acs_proxy_limit_refusals_total{limit="<limit>"}`, 0 when absent.
async fn refusals(port: u16, limit: &str) -> u64 {
    let text = client(None)
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .send()
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("metrics body");
    let series = format!("acs_proxy_limit_refusals_total{{limit=\"{limit}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&series))
        .map(|value| value.trim().parse().expect("a counter value"))
        .unwrap_or(0)
}

/// Audit entries recording a refusal by `limit`.
fn limit_entries(scratch: &Scratch, limit: &str) -> Vec<Value> {
    scratch
        .audit_entries()
        .into_iter()
        .filter(|entry| {
            entry.to_string().contains("limit_exceeded")
                && entry["detail"]
                    .as_str()
                    .is_some_and(|detail| detail.starts_with(limit))
        })
        .collect()
}

fn assert_refused(reply: &Value, key: &str) {
    assert_eq!(reply["error"]["code"], LIMIT_EXCEEDED, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(key), "the message names {key}: {reply}");
}

#[tokio::test]
async fn stdio_refuses_requests_over_the_session_limit() {
    let scratch = Scratch::new();
    let port = free_port();
    let config = scratch.demo_config(&format!(
        "[limits]\nmax_requests_per_session = 2\n\n{}",
        metrics_section(port)
    ));
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&slow_call(1, 1500));
    proxy.send(&slow_call(2, 1500));
    // Both are in flight once each has reported progress.
    for token in ["p1", "p2"] {
        proxy.recv_until(|m| m["params"]["progressToken"] == token);
    }
    proxy.send(&tool_call(3, "echo", json!({"text":"over"})));
    let refused = proxy.response(&json!(3));
    assert_refused(&refused, "limits.max_requests_per_session");
    assert_eq!(refused["error"]["data"]["limit"], "session_requests");
    // The calls in flight finish; then there is room again.
    for _ in 0..2 {
        let (done, _) = proxy.recv_until(|m| m.get("method").is_none() && m["id"] != 3);
        assert!(done["result"].is_object(), "{done}");
    }
    proxy.send(&tool_call(4, "echo", json!({"text":"room"})));
    assert!(proxy.response(&json!(4))["result"].is_object());

    assert_eq!(refusals(port, "session_requests").await, 1);
    proxy.finish();
    let recorded = limit_entries(&scratch, "session_requests");
    assert_eq!(recorded.len(), 1, "one audit entry per refusal");
    assert_eq!(recorded[0]["mcp_id"], 3);
    assert!(
        !scratch
            .server_lines()
            .iter()
            .any(|line| line.contains("over")),
        "a refused request never reaches the server"
    );
    scratch.assert_audit_verifies();
}

fn http_proxy(scratch: &Scratch, listen_extra: &str, extra: &str) -> NetProxy {
    let config = scratch.demo_config(&format!(
        "{}\n{extra}",
        listen_section("http", listen_extra)
    ));
    NetProxy::start(&config)
}

/// POSTs a `slow` call and waits until it reports progress (it is in
/// flight); the stream is returned so the caller can read the answer.
async fn start_slow(mcp: &McpHttp, id: i64, ms: u64) -> SseStream {
    let response = mcp.post(&slow_call(id, ms)).await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut stream = SseStream::new(response);
    let progress = stream.next_message().await.expect("progress").json();
    assert_eq!(progress["method"], "notifications/progress", "{progress}");
    stream
}

/// Reads a `start_slow` stream to its answer.
async fn finish_slow(mut stream: SseStream, id: i64) -> Value {
    while let Some(event) = stream.next_message().await {
        let message = event.json();
        if message["id"] == id {
            return message;
        }
    }
    panic!("no answer to {id}");
}

#[tokio::test]
async fn http_sessions_hit_their_own_limit_and_the_global_one() {
    let scratch = Scratch::new();
    let port = free_port();
    let proxy = http_proxy(
        &scratch,
        "",
        &format!(
            "[limits]\nmax_requests_per_session = 1\nmax_requests_total = 2\n\n{}",
            metrics_section(port)
        ),
    );
    let url = proxy.url("/mcp");
    let mut a = McpHttp::new(client(None), url.clone());
    let mut b = McpHttp::new(client(None), url.clone());
    let mut c = McpHttp::new(client(None), url);
    for mcp in [&mut a, &mut b, &mut c] {
        mcp.initialize("2025-06-18", json!({})).await;
    }

    let a_slow = start_slow(&a, 1, 2000).await;
    // A's second request is over A's own limit.
    let (refused, _) = a.request(&tool_call(2, "echo", json!({"text":"a"}))).await;
    assert_refused(&refused, "limits.max_requests_per_session");
    // B is unaffected by A's limit, and its call fills the global limit.
    let b_slow = start_slow(&b, 1, 2000).await;
    let (refused, _) = c.request(&tool_call(1, "echo", json!({"text":"c"}))).await;
    assert_refused(&refused, "limits.max_requests_total");
    assert_eq!(refused["error"]["data"]["limit"], "global_requests");

    assert!(finish_slow(a_slow, 1).await["result"].is_object());
    assert!(finish_slow(b_slow, 1).await["result"].is_object());
    // Room again for everyone.
    let (reply, _) = c.request(&tool_call(2, "echo", json!({"text":"c"}))).await;
    assert_eq!(reply["result"]["content"][0]["text"], "c");
    let (reply, _) = a.request(&tool_call(3, "echo", json!({"text":"a"}))).await;
    assert_eq!(reply["result"]["content"][0]["text"], "a");

    assert_eq!(refusals(port, "session_requests").await, 1);
    assert_eq!(refusals(port, "global_requests").await, 1);
    assert_eq!(limit_entries(&scratch, "session_requests").len(), 1);
    assert_eq!(limit_entries(&scratch, "global_requests").len(), 1);
    scratch.assert_audit_verifies();
}

#[tokio::test]
async fn a_session_over_max_sessions_is_refused_with_503_and_recorded() {
    let scratch = Scratch::new();
    let port = free_port();
    let proxy = http_proxy(&scratch, "max_sessions = 1\n", &metrics_section(port));
    let mut first = McpHttp::new(client(None), proxy.url("/mcp"));
    first.initialize("2025-06-18", json!({})).await;
    let second = McpHttp::new(client(None), proxy.url("/mcp"));
    let response = second
        .post(&json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}))
        .await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body = json_body(response).await;
    assert_eq!(body["id"], "init");
    assert_refused(&body, "listen.max_sessions");
    // The session already open is unaffected.
    let response = first
        .post(&tool_call(2, "echo", json!({"text":"still here"})))
        .await;
    let (reply, _) = read_reply(response, &json!(2)).await;
    assert_eq!(reply["result"]["content"][0]["text"], "still here");

    assert_eq!(refusals(port, "sessions").await, 1);
    assert_eq!(limit_entries(&scratch, "sessions").len(), 1);
    scratch.assert_audit_verifies();
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Opens a WebSocket session with subprotocol `mcp`.
async fn ws_connect(url: &str) -> Socket {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = url.into_client_request().unwrap();
    request
        .headers_mut()
        .insert("sec-websocket-protocol", "mcp".parse().unwrap());
    tokio_tungstenite::connect_async(request).await.unwrap().0
}

async fn ws_send(socket: &mut Socket, message: &Value) {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message;
    socket
        .send(Message::text(message.to_string()))
        .await
        .unwrap();
}

/// The next message with this id.
async fn ws_response(socket: &mut Socket, id: Value) -> Value {
    use tokio_tungstenite::tungstenite::Message;
    loop {
        match tokio::time::timeout(support::WAIT, socket.next()).await {
            Ok(Some(Ok(Message::Text(text)))) => {
                let message = support::parse(&text);
                if message["id"] == id && message.get("method").is_none() {
                    return message;
                }
            }
            Ok(Some(Ok(_))) => continue,
            other => panic!("no message: {other:?}"),
        }
    }
}

#[tokio::test]
async fn websocket_sessions_over_the_limit_are_closed_with_the_reason() {
    use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
    use tokio_tungstenite::tungstenite::Message;

    let scratch = Scratch::new();
    let port = free_port();
    let config = scratch.demo_config(&format!(
        "{}\n[limits]\nmax_requests_per_session = 1\n\n{}",
        listen_section("ws", "max_sessions = 1\n"),
        metrics_section(port)
    ));
    let proxy = NetProxy::start(&config);
    let mut first = ws_connect(&proxy.url("/mcp")).await;
    ws_send(
        &mut first,
        &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
    )
    .await;
    assert!(ws_response(&mut first, json!(0)).await["result"].is_object());

    // A second session is accepted, then closed at once with 1013 and the limit.
    let mut second = ws_connect(&proxy.url("/mcp")).await;
    let closed = tokio::time::timeout(support::WAIT, second.next())
        .await
        .expect("a close in time");
    match closed {
        Some(Ok(Message::Close(Some(frame)))) => {
            assert_eq!(frame.code, CloseCode::Again);
            assert!(frame.reason.contains("listen.max_sessions"), "{frame:?}");
        }
        other => panic!("expected a close frame, got {other:?}"),
    }

    // Within the open session, a second request in flight is refused (the
    // relay reads in order, so the slow call is in flight by then).
    ws_send(&mut first, &slow_call(1, 1500)).await;
    ws_send(&mut first, &tool_call(2, "echo", json!({"text":"x"}))).await;
    let refused = ws_response(&mut first, json!(2)).await;
    assert_refused(&refused, "limits.max_requests_per_session");
    assert!(ws_response(&mut first, json!(1)).await["result"].is_object());

    assert_eq!(refusals(port, "sessions").await, 1);
    assert_eq!(refusals(port, "session_requests").await, 1);
    assert_eq!(limit_entries(&scratch, "sessions").len(), 1);
    assert_eq!(limit_entries(&scratch, "session_requests").len(), 1);
    scratch.assert_audit_verifies();
}

#[tokio::test]
async fn legacy_sse_sessions_are_limited_too() {
    let scratch = Scratch::new();
    let port = free_port();
    let proxy = http_proxy(
        &scratch,
        "legacy_sse = true\n",
        &format!(
            "[limits]\nmax_requests_per_session = 1\n\n{}",
            metrics_section(port)
        ),
    );
    let http = client(None);
    let response = http
        .get(proxy.url("/mcp/sse"))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut stream = SseStream::new(response);
    let endpoint = stream.next().await.expect("the endpoint event");
    let post_url = proxy.url(&endpoint.data);
    let post = |message: Value| {
        let http = http.clone();
        let url = post_url.clone();
        async move {
            let status = http
                .post(url)
                .header("content-type", "application/json")
                .body(message.to_string())
                .send()
                .await
                .unwrap()
                .status();
            assert_eq!(status, StatusCode::ACCEPTED);
        }
    };
    let reply_to = async |stream: &mut SseStream, id: Value| -> Value {
        loop {
            let message = stream.next_message().await.expect("a message").json();
            if message["id"] == id && message.get("method").is_none() {
                return message;
            }
        }
    };
    post(json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"legacy","version":"1"}}}))
    .await;
    assert!(reply_to(&mut stream, json!(0)).await["result"].is_object());
    post(slow_call(1, 1500)).await;
    post(tool_call(2, "echo", json!({"text":"x"}))).await;
    assert_refused(
        &reply_to(&mut stream, json!(2)).await,
        "limits.max_requests_per_session",
    );
    assert!(reply_to(&mut stream, json!(1)).await["result"].is_object());
    assert_eq!(refusals(port, "session_requests").await, 1);
    assert_eq!(limit_entries(&scratch, "session_requests").len(), 1);
}
