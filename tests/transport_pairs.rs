//! The transport pairs users combine, end to end through the built binary:
//! a real client on the agent side (the Python `mcp` SDK where it speaks
//! the transport, else a reqwest/tungstenite client over real sockets), a
//! real server on the other (server-everything, the demo server, or the
//! recording test servers of `support::mcp_servers`), acs-proxy between.
//! Every pair runs `initialize`, a `tools/call` that succeeds and a
//! `tools/call` denied by a policy rule (the agent gets `isError` with the
//! rule's reasoning; the upstream never sees the call, asserted wherever
//! the server records what it received; the audit entry names the rule),
//! and ends with an audit log `acs-proxy audit verify` accepts.
//!
//! | agent → proxy → server  | tests                                                     |
//! |-------------------------|-----------------------------------------------------------|
//! | HTTP → stdio            | `http_to_stdio` (Python SDK, recording demo server)       |
//! | HTTP → Streamable HTTP  | `http_to_streamable_http` (recording test server),        |
//! |                         | `http_to_streamable_http_server_everything` (Python SDK)  |
//! | stdio → Streamable HTTP | `stdio_to_streamable_http` (recording test server),       |
//! |                         | `stdio_to_streamable_http_server_everything` (Python SDK) |
//! | HTTP → legacy SSE       | `http_to_legacy_sse` (recording test server),             |
//! |                         | `http_to_legacy_sse_server_everything` (Python SDK)       |
//! | WS → stdio              | `wss_to_stdio` (TLS listener, recording demo server)      |
//! | HTTP → WS               | `http_to_websocket` (recording test server)               |
//! | HTTPS → HTTPS and WSS   | `https_to_https_and_wss_upstreams`                        |
//!
//! Across them: a server→client request travelling from the upstream's
//! GET stream (or legacy event stream) to the agent's GET stream or stdout
//! and its answer back (`http_to_streamable_http`, `stdio_to_streamable_http`,
//! `http_to_legacy_sse`); a call resumed with `Last-Event-ID` on both legs
//! (`last_event_id_resumes_on_both_legs`); TLS on each side (an HTTPS and a
//! WSS listener with a test CA; https and wss upstreams trusted through
//! `ca_file`); and an upstream session that ends under a pending request.
//!
//! What one side does on its own is covered elsewhere and not repeated:
//! the HTTP listener's sessions, streams, resumption and edge security in
//! `downstream_http.rs`, the Python SDK over HTTP to a stdio
//! server-everything in `downstream_python.rs`, the WebSocket listener in
//! `downstream_ws.rs`, certificate rotation in `downstream_tls.rs`, the
//! legacy SSE listener in `downstream_sse.rs`, and the network upstream
//! clients' exact bytes and headers in `upstream_network.rs`.

mod support;

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use reqwest::StatusCode;
use serde_json::{json, Value};
use support::mcp_http::{client, McpHttp, SseStream};
use support::mcp_servers::{LegacySseServer, Seen, StreamableServer, TestPki, WsServer};
use support::pairs::{
    assert_blocked_by, calls, net_config, python_client, wait_for_sealed_chains, ClientReport,
    EverythingServer, ListenerPki, NetUpstream,
};
use support::{listen_section, tool_call, NetProxy, Proxy, Scratch};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

const RULE: &str = "pair-no-env";
const REASONING: &str = "pair test: the environment stays with the server";
const DENY_ENV: &str = r#"
[[policy.rule]]
name = "pair-no-env"
hook = "steps/toolCallRequest"
tool = "get-env"
decision = "deny"
reasoning = "pair test: the environment stays with the server"
"#;

/// What the test Streamable HTTP server answers a streamed `tools/call` with.
const CALLED_TEXT: &str = "done \u{1f600}";

/// `[listen]` for `transport` plus the deny rule.
fn listening(transport: &str, listen_extra: &str) -> String {
    format!("{}\n{DENY_ENV}", listen_section(transport, listen_extra))
}

/// A denied `tools/call` result: `isError` with the rule's reasoning.
fn assert_denied(result: &Value) {
    assert_eq!(result["isError"], true, "not denied: {result}");
    assert!(
        result["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains(REASONING)),
        "the reasoning is missing: {result}"
    );
}

/// The tool names of the `tools/call` requests in these bodies.
fn tools_called<'a>(bodies: impl IntoIterator<Item = &'a [u8]>) -> Vec<String> {
    bodies
        .into_iter()
        .filter_map(|body| serde_json::from_slice::<Value>(body).ok())
        .filter(|m| m["method"] == "tools/call")
        .filter_map(|m| m["params"]["name"].as_str().map(str::to_owned))
        .collect()
}

fn posted_tools(seen: &[Seen]) -> Vec<String> {
    tools_called(
        seen.iter()
            .filter(|s| s.method == "POST")
            .map(|s| &s.body[..]),
    )
}

/// Polls `check` until it holds (blocking: the in-process servers run on
/// the runtime's workers).
fn eventually(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + support::WAIT;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The Python SDK client's checks for a run against server-everything with
/// `--scenario full` and the calls `echo` and `get-env`.
fn assert_full_everything_run(client: &ClientReport, sampling_text: &str, echoed: &str) {
    let report = &client.report;
    let steps = &report["steps"];
    for step in [
        "tools_list",
        "progress",
        "sampling",
        "resource_read",
        "prompt_get",
    ] {
        assert!(
            steps[step]["result"].is_object(),
            "step {step} failed: {}",
            client.context()
        );
    }
    assert!(
        steps["progress"]["progress"]
            .as_array()
            .is_some_and(|p| !p.is_empty()),
        "no progress crossed the pair: {}",
        client.context()
    );
    assert!(
        steps["sampling"]["result"]
            .to_string()
            .contains(sampling_text),
        "the sampling answer did not come back: {}",
        client.context()
    );
    let cancel = &steps["cancel"];
    assert_eq!(cancel["cancelled"], true, "{}", client.context());
    assert!(
        cancel["response_after_cancel"].is_null(),
        "{}",
        client.context()
    );
    assert!(
        cancel["ping_after"]["result"].is_object(),
        "{}",
        client.context()
    );
    assert!(
        client.call("echo")["result"].to_string().contains(echoed),
        "{}",
        client.context()
    );
    assert_denied(&client.call("get-env")["result"]);
}

fn python_full(target: &[String], sampling_text: &str, echoed: &str) -> ClientReport {
    let mut args: Vec<String> = [
        "--scenario",
        "full",
        "--cancel-after",
        "1",
        "--sampling-text",
        sampling_text,
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    args.extend(calls(&[
        ("echo", json!({"message": echoed})),
        ("get-env", json!({})),
    ]));
    args.extend(target.iter().cloned());
    python_client(&args)
}

// ---------------------------------------------------------------------
// HTTP → stdio
// ---------------------------------------------------------------------

#[test]
fn http_to_stdio() {
    let started = Instant::now();
    let scratch = Scratch::new();
    let proxy = NetProxy::start(&scratch.demo_config(&listening("http", "")));
    let mut args = vec![
        "--url".to_owned(),
        proxy.url("/mcp"),
        "--scenario".into(),
        "calls".into(),
    ];
    args.extend(calls(&[
        ("echo", json!({"text": "pair http to stdio"})),
        ("get-env", json!({})),
    ]));
    let client = python_client(&args);
    assert_eq!(
        client.report["server_info"]["name"],
        "acs-proxy-demo-server",
        "{}",
        client.context()
    );
    assert_eq!(
        client.call("echo")["result"]["content"][0]["text"],
        "pair http to stdio",
        "{}",
        client.context()
    );
    assert_denied(&client.call("get-env")["result"]);

    let received = scratch.server_received();
    assert!(received
        .iter()
        .any(|m| m["method"] == "tools/call" && m["params"]["name"] == "echo"));
    assert!(
        !received.iter().any(|m| m["params"]["name"] == "get-env"),
        "the denied call reached the server: {received:#?}"
    );
    assert_blocked_by(&scratch, RULE);
    // The SDK sends DELETE at exit: the chain is sealed.
    wait_for_sealed_chains(&scratch, 1);
    eprintln!("http_to_stdio took {:?}", started.elapsed());
}

// ---------------------------------------------------------------------
// HTTP → Streamable HTTP
// ---------------------------------------------------------------------

#[test]
fn http_to_streamable_http_server_everything() {
    let started = Instant::now();
    let server = EverythingServer::start("streamableHttp");
    let scratch = Scratch::new();
    let proxy = NetProxy::start(&net_config(
        &scratch,
        &[NetUpstream::new("everything", &server.url)],
        &listening("http", ""),
    ));
    let sampling = "sampled across two HTTP legs 7f1e";
    let client = python_full(
        &["--url".to_owned(), proxy.url("/mcp")],
        sampling,
        "h\u{e9}llo over http and http",
    );
    assert_eq!(
        client.report["protocol_version"],
        "2025-11-25",
        "{}",
        client.context()
    );
    assert_full_everything_run(&client, sampling, "h\u{e9}llo over http and http");
    assert_blocked_by(&scratch, RULE);
    wait_for_sealed_chains(&scratch, 1);
    eprintln!(
        "http_to_streamable_http_server_everything took {:?}",
        started.elapsed()
    );
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_to_streamable_http() {
    let server = StreamableServer::start().await;
    let scratch = Scratch::new();
    let proxy = NetProxy::start(&net_config(
        &scratch,
        &[NetUpstream::new("net", &server.url)],
        &listening("http", ""),
    ));
    let mut mcp = McpHttp::new(client(None), proxy.url("/mcp"));
    let init = mcp.initialize("2025-11-25", json!({"roots":{}})).await;
    assert_eq!(init["serverInfo"]["name"], "test-server", "{init}");

    // The server's request on its GET stream reaches the agent's GET
    // stream; the agent's answer, POSTed to the proxy, reaches the server.
    let mut standalone = SseStream::new(mcp.get(None).await);
    let request = standalone
        .next_message()
        .await
        .expect("a server request")
        .json();
    assert_eq!(request["method"], "roots/list", "{request}");
    let answer = json!({"jsonrpc":"2.0","id":request["id"],"result":{
        "roots":[{"uri":"file:///pairs","name":"pairs"}]}});
    assert_eq!(mcp.notify(&answer).await, StatusCode::ACCEPTED);
    eventually("the roots answer reaches the server", || {
        server.seen().iter().any(|s| {
            serde_json::from_slice::<Value>(&s.body).is_ok_and(|m| {
                m["id"] == "srv-1" && m["result"]["roots"][0]["uri"] == "file:///pairs"
            })
        })
    });
    // The upstream's GET stream closed after the request; the proxy
    // reopened it (with Last-Event-ID) and relays what it carries.
    let log = standalone
        .next_message()
        .await
        .expect("a notification")
        .json();
    assert_eq!(log["method"], "notifications/message", "{log}");
    assert_eq!(log["params"]["data"], "reconnected");

    // The test server's progress carries the token "t": the agent's own.
    let (reply, before) = mcp
        .request(
            &json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{
            "name":"stream","arguments":{"n":1},"_meta":{"progressToken":"t"}}}),
        )
        .await;
    assert_eq!(
        reply["result"]["content"][0]["text"], CALLED_TEXT,
        "{reply}"
    );
    assert!(
        before
            .iter()
            .any(|m| m["method"] == "notifications/progress"),
        "the progress notification travels with its request: {before:?}"
    );

    let (reply, _) = mcp.request(&tool_call(3, "get-env", json!({}))).await;
    assert_denied(&reply["result"]);
    assert_eq!(posted_tools(&server.seen()), ["stream"]);
    assert_blocked_by(&scratch, RULE);

    // Ending the agent's session ends the upstream session.
    let session = server.session().expect("an upstream session");
    assert_eq!(mcp.delete().await, StatusCode::NO_CONTENT);
    eventually("the upstream session is deleted", || {
        server
            .seen()
            .iter()
            .any(|s| s.method == "DELETE" && s.header("mcp-session-id") == session)
    });
    wait_for_sealed_chains(&scratch, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_event_id_resumes_on_both_legs() {
    // The upstream drops the call's stream after a progress event (the
    // result waits for a GET with Last-Event-ID); the agent drops its own
    // stream right after the priming event and resumes by GET.
    let server = StreamableServer::start().await;
    server.refuse_get();
    let scratch = Scratch::new();
    let proxy = NetProxy::start(&net_config(
        &scratch,
        &[NetUpstream::new("net", &server.url)],
        &listening("http", ""),
    ));
    let mut mcp = McpHttp::new(client(None), proxy.url("/mcp"));
    mcp.initialize("2025-11-25", json!({})).await;

    let response = mcp.post(&tool_call(5, "drop", json!({}))).await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut stream = SseStream::new(response);
    let primed = stream.next().await.expect("a priming event");
    assert!(primed.data.is_empty(), "{primed:?}");
    let last = primed.id.clone().expect("the priming event has an id");
    drop(stream);

    let resumed = mcp.get(Some(&last)).await;
    assert_eq!(resumed.status(), StatusCode::OK);
    let mut resumed = SseStream::new(resumed);
    let mut progress = 0;
    let reply = loop {
        let message = resumed
            .next_message()
            .await
            .expect("the call's events")
            .json();
        if message["method"] == "notifications/progress" {
            progress += 1;
            continue;
        }
        break message;
    };
    assert_eq!(reply["id"], 5, "{reply}");
    assert_eq!(
        reply["result"]["content"][0]["text"], CALLED_TEXT,
        "{reply}"
    );
    assert_eq!(progress, 1, "the progress sent before the drop is replayed");
    let upstream_resumptions = server
        .seen()
        .iter()
        .filter(|s| s.method == "GET" && !s.header("last-event-id").is_empty())
        .count();
    assert_eq!(
        upstream_resumptions, 1,
        "the proxy resumed the upstream stream"
    );
    scratch.assert_audit_verifies();
}

// ---------------------------------------------------------------------
// stdio → Streamable HTTP
// ---------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_to_streamable_http() {
    let server = StreamableServer::start().await;
    let scratch = Scratch::new();
    let config = net_config(&scratch, &[NetUpstream::new("net", &server.url)], DENY_ENV);
    let mut proxy = Proxy::start(&config);
    let init = proxy.initialize(json!({"roots":{}}));
    assert_eq!(
        init["result"]["serverInfo"]["name"], "test-server",
        "{init}"
    );

    // The request from the upstream's GET stream arrives on stdout.
    let (request, _) = proxy.recv_until(|m| m["method"] == "roots/list");
    proxy.send(&json!({"jsonrpc":"2.0","id":request["id"],"result":{"roots":[]}}));
    eventually("the roots answer reaches the server", || {
        server.seen().iter().any(|s| {
            serde_json::from_slice::<Value>(&s.body)
                .is_ok_and(|m| m["id"] == "srv-1" && m["result"]["roots"].is_array())
        })
    });

    proxy.send(&tool_call(2, "stream", json!({})));
    let reply = proxy.response(&json!(2));
    assert_eq!(
        reply["result"]["content"][0]["text"], CALLED_TEXT,
        "{reply}"
    );
    proxy.send(&tool_call(3, "get-env", json!({})));
    let reply = proxy.response(&json!(3));
    assert_denied(&reply["result"]);
    assert_eq!(posted_tools(&server.seen()), ["stream"]);
    assert_blocked_by(&scratch, RULE);

    let session = server.session().expect("an upstream session");
    let status = proxy.finish();
    assert!(status.success(), "{status:?}");
    assert!(
        server
            .seen()
            .iter()
            .any(|s| s.method == "DELETE" && s.header("mcp-session-id") == session),
        "the upstream session was not deleted at exit"
    );
    wait_for_sealed_chains(&scratch, 1);
}

#[test]
fn stdio_to_streamable_http_server_everything() {
    let started = Instant::now();
    let server = EverythingServer::start("streamableHttp");
    let scratch = Scratch::new();
    let config = net_config(
        &scratch,
        &[NetUpstream::new("everything", &server.url)],
        DENY_ENV,
    );
    let sampling = "sampled from stdio over http 2b9c";
    let client = python_full(
        &[
            "--".to_owned(),
            support::proxy_bin().display().to_string(),
            "--config".into(),
            config.display().to_string(),
        ],
        sampling,
        "stdio then http",
    );
    assert_full_everything_run(&client, sampling, "stdio then http");
    assert_blocked_by(&scratch, RULE);
    wait_for_sealed_chains(&scratch, 1);
    eprintln!(
        "stdio_to_streamable_http_server_everything took {:?}",
        started.elapsed()
    );
}

// ---------------------------------------------------------------------
// HTTP → legacy SSE
// ---------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_to_legacy_sse() {
    let server = LegacySseServer::start().await;
    let scratch = Scratch::new();
    let proxy = NetProxy::start(&net_config(
        &scratch,
        &[NetUpstream::new("old", &server.url).transport("sse")],
        &listening("http", ""),
    ));
    let mut mcp = McpHttp::new(client(None), proxy.url("/mcp"));
    // The test server echoes every request's params as its result.
    let init = mcp.initialize("2025-03-26", json!({})).await;
    assert_eq!(
        init["echo"]["clientInfo"]["name"], "downstream-test",
        "{init}"
    );

    // A server request on the legacy event stream reaches the agent's GET
    // stream; the answer is POSTed to the server's message endpoint.
    let mut standalone = SseStream::new(mcp.get(None).await);
    server
        .push("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"q1\",\"method\":\"roots/list\"}\n\n")
        .await;
    let request = standalone
        .next_message()
        .await
        .expect("a server request")
        .json();
    assert_eq!(request["method"], "roots/list", "{request}");
    let answer = json!({"jsonrpc":"2.0","id":request["id"],"result":{"roots":[]}});
    assert_eq!(mcp.notify(&answer).await, StatusCode::ACCEPTED);
    eventually("the roots answer reaches the server", || {
        server.seen().iter().any(|s| {
            s.method == "POST"
                && serde_json::from_slice::<Value>(&s.body)
                    .is_ok_and(|m| m["id"] == "q1" && m["result"]["roots"].is_array())
        })
    });

    let (reply, _) = mcp
        .request(&tool_call(2, "anything", json!({"s":"\u{e9}"})))
        .await;
    assert_eq!(reply["result"]["echo"]["name"], "anything", "{reply}");
    assert_eq!(reply["result"]["echo"]["arguments"]["s"], "\u{e9}");
    let (reply, _) = mcp.request(&tool_call(3, "get-env", json!({}))).await;
    assert_denied(&reply["result"]);
    assert_eq!(posted_tools(&server.seen()), ["anything"]);
    assert!(server
        .seen()
        .iter()
        .filter(|s| s.method == "POST")
        .all(|s| s.uri == "/messages?sessionId=s1"));
    assert_blocked_by(&scratch, RULE);

    assert_eq!(mcp.delete().await, StatusCode::NO_CONTENT);
    wait_for_sealed_chains(&scratch, 1);
}

#[test]
fn http_to_legacy_sse_server_everything() {
    let started = Instant::now();
    let server = EverythingServer::start("sse");
    let scratch = Scratch::new();
    let proxy = NetProxy::start(&net_config(
        &scratch,
        &[NetUpstream::new("everything", &server.url).transport("sse")],
        &listening("http", ""),
    ));
    let sampling = "sampled over legacy sse 5d02";
    let client = python_full(
        &["--url".to_owned(), proxy.url("/mcp")],
        sampling,
        "http then legacy sse",
    );
    assert_full_everything_run(&client, sampling, "http then legacy sse");
    assert_blocked_by(&scratch, RULE);
    wait_for_sealed_chains(&scratch, 1);
    eprintln!(
        "http_to_legacy_sse_server_everything took {:?}",
        started.elapsed()
    );
    drop(server);
}

// ---------------------------------------------------------------------
// HTTP → WebSocket
// ---------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_to_websocket() {
    let server = WsServer::start(true).await;
    let scratch = Scratch::new();
    let proxy = NetProxy::start(&net_config(
        &scratch,
        &[NetUpstream::new("ws", &server.url)],
        &listening("http", ""),
    ));
    let mut mcp = McpHttp::new(client(None), proxy.url("/mcp"));
    let init = mcp.initialize("2025-06-18", json!({})).await;
    assert_eq!(init["echo"]["protocolVersion"], "2025-06-18", "{init}");
    let (reply, _) = mcp
        .request(&tool_call(
            2,
            "anything",
            json!({"big": 12345678901234567890u64}),
        ))
        .await;
    assert_eq!(reply["result"]["echo"]["name"], "anything", "{reply}");
    let (reply, _) = mcp.request(&tool_call(3, "get-env", json!({}))).await;
    assert_denied(&reply["result"]);
    let received = server.received();
    assert_eq!(
        tools_called(received.iter().map(|m| m.as_bytes())),
        ["anything"],
        "{received:#?}"
    );
    assert_blocked_by(&scratch, RULE);
    assert_eq!(mcp.delete().await, StatusCode::NO_CONTENT);
    wait_for_sealed_chains(&scratch, 1);
}

// ---------------------------------------------------------------------
// WS (over TLS) → stdio
// ---------------------------------------------------------------------

async fn ws_send<S>(socket: &mut tokio_tungstenite::WebSocketStream<S>, message: &Value)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    socket
        .send(Message::text(message.to_string()))
        .await
        .expect("send");
}

async fn ws_response<S>(socket: &mut tokio_tungstenite::WebSocketStream<S>, id: Value) -> Value
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    loop {
        let next = tokio::time::timeout(support::WAIT, socket.next())
            .await
            .expect("a message in time")
            .expect("the socket is open")
            .expect("no WebSocket error");
        if let Message::Text(text) = next {
            let message = support::parse(&text);
            if message.get("method").is_none() && message["id"] == id {
                return message;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wss_to_stdio() {
    let scratch = Scratch::new();
    let pki = ListenerPki::generate(&scratch);
    let proxy = NetProxy::start(&scratch.demo_config(&listening("ws", &pki.listen_keys())));
    assert_eq!(proxy.scheme, "wss");

    let tcp = tokio::net::TcpStream::connect(proxy.addr)
        .await
        .expect("connect");
    let tls = tokio_rustls::TlsConnector::from(pki.client_config())
        .connect(
            rustls::pki_types::ServerName::try_from("localhost").unwrap(),
            tcp,
        )
        .await
        .expect("a TLS handshake trusting the test CA");
    let mut request = format!("wss://localhost:{}/mcp", proxy.addr.port())
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("sec-websocket-protocol", "mcp".parse().unwrap());
    let (mut socket, response) = tokio_tungstenite::client_async(request, tls)
        .await
        .expect("upgrade over TLS");
    assert_eq!(response.headers()["sec-websocket-protocol"], "mcp");

    ws_send(
        &mut socket,
        &json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},
        "clientInfo":{"name":"wss-pair","version":"1"}}}),
    )
    .await;
    let init = ws_response(&mut socket, json!(1)).await;
    assert_eq!(
        init["result"]["serverInfo"]["name"],
        "acs-proxy-demo-server"
    );
    ws_send(
        &mut socket,
        &json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
    )
    .await;
    ws_send(
        &mut socket,
        &tool_call(2, "echo", json!({"text":"over wss"})),
    )
    .await;
    let reply = ws_response(&mut socket, json!(2)).await;
    assert_eq!(reply["result"]["content"][0]["text"], "over wss");
    ws_send(&mut socket, &tool_call(3, "get-env", json!({}))).await;
    let reply = ws_response(&mut socket, json!(3)).await;
    assert_denied(&reply["result"]);
    socket.close(None).await.expect("close");

    let received = scratch.server_received();
    assert!(received
        .iter()
        .any(|m| m["method"] == "tools/call" && m["params"]["name"] == "echo"));
    assert!(!received.iter().any(|m| m["params"]["name"] == "get-env"));
    assert_blocked_by(&scratch, RULE);
    wait_for_sealed_chains(&scratch, 1);
}

// ---------------------------------------------------------------------
// HTTPS → HTTPS and WSS
// ---------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_to_https_and_wss_upstreams() {
    // Each side has its own CA: the agent trusts the listener's, the proxy
    // trusts the upstreams' through `ca_file`.
    let upstream_pki = TestPki::generate();
    let https = StreamableServer::start_tls(&upstream_pki).await;
    let wss = WsServer::start_tls(&upstream_pki).await;
    assert!(https.url.starts_with("https://") && wss.url.starts_with("wss://"));
    let scratch = Scratch::new();
    let listener_pki = ListenerPki::generate(&scratch);
    let proxy = NetProxy::start(&net_config(
        &scratch,
        &[
            NetUpstream::new("h", &https.url).ca_file(&upstream_pki.ca_cert),
            NetUpstream::new("w", &wss.url).ca_file(&upstream_pki.ca_cert),
        ],
        &listening("http", &listener_pki.listen_keys()),
    ));
    assert_eq!(proxy.scheme, "https");
    let agent = || client(Some(listener_pki.ca_pem.as_bytes()));

    let mut h = McpHttp::new(agent(), proxy.url("/mcp/h"));
    let init = h.initialize("2025-11-25", json!({})).await;
    assert_eq!(init["serverInfo"]["name"], "test-server", "{init}");
    let (reply, _) = h.request(&tool_call(2, "stream", json!({}))).await;
    assert_eq!(
        reply["result"]["content"][0]["text"], CALLED_TEXT,
        "{reply}"
    );
    let (reply, _) = h.request(&tool_call(3, "get-env", json!({}))).await;
    assert_denied(&reply["result"]);
    assert_eq!(posted_tools(&https.seen()), ["stream"]);

    let mut w = McpHttp::new(agent(), proxy.url("/mcp/w"));
    let init = w.initialize("2025-06-18", json!({})).await;
    assert!(init["echo"].is_object(), "{init}");
    let (reply, _) = w.request(&tool_call(4, "anything", json!({}))).await;
    assert_eq!(reply["result"]["echo"]["name"], "anything", "{reply}");
    let (reply, _) = w.request(&tool_call(5, "get-env", json!({}))).await;
    assert_denied(&reply["result"]);
    let received = wss.received();
    assert_eq!(
        tools_called(received.iter().map(|m| m.as_bytes())),
        ["anything"]
    );

    // An agent that does not trust the listener's CA gets no session.
    let stranger = McpHttp::new(client(None), proxy.url("/mcp/h"));
    let refused = stranger
        .client
        .post(&stranger.url)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await;
    assert!(refused.is_err(), "an untrusted certificate was accepted");

    assert_blocked_by(&scratch, RULE);
    assert_eq!(h.delete().await, StatusCode::NO_CONTENT);
    assert_eq!(w.delete().await, StatusCode::NO_CONTENT);
    wait_for_sealed_chains(&scratch, 2);
}

// ---------------------------------------------------------------------
// The upstream session ends under a pending request
// ---------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_to_streamable_http_answers_requests_pending_when_the_upstream_session_ends() {
    let server = StreamableServer::start().await;
    server.refuse_get();
    let scratch = Scratch::new();
    let mut proxy = Proxy::start(&net_config(
        &scratch,
        &[NetUpstream::new("net", &server.url)],
        "",
    ));
    proxy.initialize(json!({}));
    proxy.send(&tool_call(2, "stream", json!({})));
    assert_eq!(
        proxy.response(&json!(2))["result"]["content"][0]["text"],
        CALLED_TEXT
    );
    server.expire_session();
    proxy.send(&tool_call(3, "stream", json!({})));
    let reply = proxy.response(&json!(3));
    assert_eq!(reply["error"]["code"], -32011, "{reply}");
    let status = proxy.wait();
    assert_eq!(status.code(), Some(3), "{status:?}");
    wait_for_sealed_chains(&scratch, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_to_streamable_http_answers_requests_pending_when_the_upstream_session_ends() {
    // The same event as above with an HTTP agent: the call's stream must
    // carry the -32011 answer before the session goes away.
    let server = StreamableServer::start().await;
    server.refuse_get();
    let scratch = Scratch::new();
    let proxy = NetProxy::start(&net_config(
        &scratch,
        &[NetUpstream::new("net", &server.url)],
        &listen_section("http", ""),
    ));
    let mut mcp = McpHttp::new(client(None), proxy.url("/mcp"));
    mcp.initialize("2025-11-25", json!({})).await;
    let (reply, _) = mcp.request(&tool_call(2, "stream", json!({}))).await;
    assert_eq!(
        reply["result"]["content"][0]["text"], CALLED_TEXT,
        "{reply}"
    );
    server.expire_session();
    let response = mcp.post(&tool_call(3, "stream", json!({}))).await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut stream = SseStream::new(response);
    let mut events = Vec::new();
    let reply = loop {
        match stream.next().await {
            Some(event) if event.data.is_empty() => events.push(event),
            Some(event) => break Some(event.json()),
            None => break None,
        }
    };
    let reply = reply.unwrap_or_else(|| {
        panic!(
            "the request pending when the upstream session ended (HTTP 404) got no answer: \
             its stream ended after {events:?}"
        )
    });
    assert_eq!(reply["id"], 3, "{reply}");
    assert_eq!(reply["error"]["code"], -32011, "{reply}");
    wait_for_sealed_chains(&scratch, 1);
    // The session is over: the agent must start a new one.
    let next = mcp.post(&tool_call(4, "stream", json!({}))).await;
    assert_eq!(next.status(), StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_to_streamable_http_answers_a_request_posted_as_the_upstream_session_ends() {
    // The upstream session ends right after `initialize`: the proxy's own
    // inventory requests (sent after `notifications/initialized`) get 404
    // and the upstream is gone while the agent's first call is in flight.
    // The proxy may refuse that call (404: the session is over) or answer
    // it (-32011), but a 200 stream it accepted must carry an answer.
    let server = StreamableServer::start().await;
    server.refuse_get();
    let scratch = Scratch::new();
    let proxy = NetProxy::start(&net_config(
        &scratch,
        &[NetUpstream::new("net", &server.url)],
        &listen_section("http", ""),
    ));
    let mut mcp = McpHttp::new(client(None), proxy.url("/mcp"));
    mcp.initialize("2025-11-25", json!({})).await;
    server.expire_session();
    let response = mcp.post(&tool_call(3, "stream", json!({}))).await;
    let status = response.status();
    if status == StatusCode::NOT_FOUND {
        return;
    }
    assert_eq!(status, StatusCode::OK);
    let mut stream = SseStream::new(response);
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        if !event.data.is_empty() {
            let reply = event.json();
            assert_eq!(reply["id"], 3, "{reply}");
            assert_eq!(reply["error"]["code"], -32011, "{reply}");
            return;
        }
        events.push(event);
    }
    panic!(
        "a call accepted (200) as the upstream session ended was never answered: \
         its stream ended after {events:?}; the session now answers {}",
        mcp.post(&tool_call(4, "stream", json!({}))).await.status()
    );
}
