//! The legacy HTTP+SSE transport (2024-11-05) beside Streamable HTTP
//! (`legacy_sse = true`), and per-upstream routes (`<path>/<name>`).

mod support;

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};
use support::mcp_http::{client, McpHttp, SseStream};
use support::{audit_chains, listen_section, tool_call, NetProxy, Scratch};

async fn post(http: &reqwest::Client, url: &str, message: &Value) -> StatusCode {
    http.post(url)
        .header("content-type", "application/json")
        .body(message.to_string())
        .send()
        .await
        .unwrap()
        .status()
}

/// The next `event: message` on a legacy stream.
async fn message(stream: &mut SseStream) -> Value {
    let event = stream.next().await.expect("an event");
    assert_eq!(event.event.as_deref(), Some("message"), "{event:?}");
    event.json()
}

#[tokio::test]
async fn legacy_sse_sessions_and_routes() {
    let scratch = Scratch::new();
    let second = format!(
        "[[upstream]]\nname = \"second\"\ncommand = [{:?}]\n",
        support::demo_server_bin().display().to_string()
    );
    let proxy = NetProxy::start(&scratch.demo_config(&format!(
        "{}\n{second}",
        listen_section("http", "legacy_sse = true\n")
    )));
    let http = client(None);

    // Two upstreams: no bare endpoint, one per route.
    let bare = http.get(proxy.url("/mcp/sse")).send().await.unwrap();
    assert_eq!(bare.status(), StatusCode::NOT_FOUND);

    let response = http
        .get(proxy.url("/mcp/second/sse"))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut stream = SseStream::new(response);
    let endpoint = stream.next().await.unwrap();
    assert_eq!(endpoint.event.as_deref(), Some("endpoint"));
    assert!(
        endpoint.data.starts_with("/mcp/second/message?sessionId="),
        "{endpoint:?}"
    );
    let post_url = proxy.url(&endpoint.data);

    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2024-11-05","capabilities":{"sampling":{}},
        "clientInfo":{"name":"legacy","version":"1"}}});
    assert_eq!(post(&http, &post_url, &init).await, StatusCode::ACCEPTED);
    let reply = message(&mut stream).await;
    assert_eq!(reply["id"], 1);
    assert_eq!(
        reply["result"]["serverInfo"]["name"],
        "acs-proxy-demo-server"
    );
    let initialized = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
    assert_eq!(
        post(&http, &post_url, &initialized).await,
        StatusCode::ACCEPTED
    );

    assert_eq!(
        post(
            &http,
            &post_url,
            &tool_call(2, "echo", json!({"text":"legacy"}))
        )
        .await,
        StatusCode::ACCEPTED
    );
    let reply = message(&mut stream).await;
    assert_eq!(reply["result"]["content"][0]["text"], "legacy");

    // A server request on the stream, answered by POST.
    assert_eq!(
        post(
            &http,
            &post_url,
            &tool_call(3, "sample", json!({"prompt":"p"}))
        )
        .await,
        StatusCode::ACCEPTED
    );
    let request = message(&mut stream).await;
    assert_eq!(request["method"], "sampling/createMessage");
    let answer = json!({"jsonrpc":"2.0","id":request["id"],"result":{
        "role":"assistant","content":{"type":"text","text":"legacy sampled"},
        "model":"m","stopReason":"endTurn"}});
    assert_eq!(post(&http, &post_url, &answer).await, StatusCode::ACCEPTED);
    let reply = message(&mut stream).await;
    assert!(reply.to_string().contains("legacy sampled"), "{reply}");

    // Bad posts.
    let no_session = proxy.url("/mcp/second/message");
    assert_eq!(
        post(&http, &no_session, &initialized).await,
        StatusCode::BAD_REQUEST
    );
    let unknown = proxy.url("/mcp/second/message?sessionId=nope");
    assert_eq!(
        post(&http, &unknown, &initialized).await,
        StatusCode::NOT_FOUND
    );
    let other_route = post_url.replace("/mcp/second/", "/mcp/demo/");
    assert_eq!(
        post(&http, &other_route, &initialized).await,
        StatusCode::NOT_FOUND
    );

    // Streamable HTTP on the other route, at the same time.
    let mut mcp = McpHttp::new(client(None), proxy.url("/mcp/demo"));
    mcp.initialize("2025-06-18", json!({})).await;
    let (reply, _) = mcp
        .request(&tool_call(9, "echo", json!({"text":"modern"})))
        .await;
    assert_eq!(reply["result"]["content"][0]["text"], "modern");
    // A session belongs to its route.
    let mut elsewhere = McpHttp::new(client(None), proxy.url("/mcp/second"));
    elsewhere.session = mcp.session.clone();
    assert_eq!(
        elsewhere
            .post(&tool_call(10, "echo", json!({"text":"x"})))
            .await
            .status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(mcp.delete().await, StatusCode::NO_CONTENT);

    // Closing the legacy stream ends its session.
    drop(stream);
    let deadline = tokio::time::Instant::now() + support::WAIT;
    loop {
        let chains = audit_chains(&scratch);
        if chains.len() == 2 && chains.iter().all(|(_, sealed)| *sealed) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{chains:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        post(&http, &post_url, &initialized).await,
        StatusCode::NOT_FOUND
    );
}
