//! The network upstream clients (Streamable HTTP, legacy HTTP+SSE,
//! WebSocket) against small servers on 127.0.0.1: exact bytes both ways,
//! session headers, resumption, expiry, TLS with a private CA, shutdown.

mod support;

use std::time::Duration;

use acs_proxy::config::{UpstreamConfig, UpstreamTransport};
use acs_proxy::transport::upstream::{self, Upstream, UpstreamError, UpstreamExit};
use acs_proxy::transport::LineFrame;
use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::Value;
use support::mcp_servers::{
    replies, LegacySseServer, StreamableServer, TestPki, WsServer, SESSION_VERSION,
};

/// The exit reason after an orderly shutdown.
const BY_PROXY: &str = "the proxy closed the connection";
const WAIT: Duration = Duration::from_secs(10);
const MAX: usize = 1024 * 1024;

fn config(url: &str, transport: UpstreamTransport) -> UpstreamConfig {
    let mut config = UpstreamConfig::for_command(vec![]);
    config.name = "net".into();
    config.url = Some(url.into());
    config.transport = Some(transport);
    config.shutdown_grace_ms = 1_000;
    config
        .headers
        .insert("X-Api-Key".into(), "sekrit-value".into());
    config
}

async fn connect(config: &UpstreamConfig) -> Upstream {
    upstream::connect(config, MAX, 16)
        .await
        .unwrap_or_else(|err| panic!("connect failed: {err}"))
}

async fn send(upstream: &Upstream, text: &str) {
    upstream
        .writer
        .send(Bytes::from(text.to_owned()))
        .await
        .expect("writer open");
}

async fn next(upstream: &mut Upstream) -> String {
    match tokio::time::timeout(WAIT, upstream.frames.next()).await {
        Ok(Some(Ok(LineFrame::Line(bytes)))) => String::from_utf8(bytes.to_vec()).unwrap(),
        other => panic!("expected a frame, got {other:?}"),
    }
}

async fn ends(upstream: &mut Upstream) {
    match tokio::time::timeout(WAIT, upstream.frames.next()).await {
        Ok(None) => {}
        other => panic!("expected the frames to end, got {other:?}"),
    }
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|err| panic!("not JSON ({err}): {text}"))
}

async fn eventually<F: Fn() -> bool>(what: &str, check: F) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0", "id":"init-\u0031","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{}},"clientInfo":{"name":"t","version":"1"},"futureField":1.50}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// Initializes a session-era upstream and checks the exchange.
async fn initialize(server: &StreamableServer, upstream: &mut Upstream) {
    send(upstream, INITIALIZE).await;
    let reply = next(upstream).await;
    assert_eq!(reply, replies::INITIALIZE.replace("ID", r#""init-\u0031""#));
    send(upstream, INITIALIZED).await;
    eventually("initialized reaches the server", || {
        server
            .seen()
            .iter()
            .any(|s| s.body == INITIALIZED.as_bytes())
    })
    .await;
}

#[tokio::test]
async fn streamable_http_session_carries_exact_bytes_and_session_headers() {
    let server = StreamableServer::start().await;
    let mut upstream = connect(&config(&server.url, UpstreamTransport::StreamableHttp)).await;
    initialize(&server, &mut upstream).await;

    // The standalone GET stream delivers the server's request.
    assert_eq!(next(&mut upstream).await, replies::ROOTS);
    let pong = r#"{"jsonrpc":"2.0","id":"srv-1","result":{"roots":[]}}"#;
    send(&upstream, pong).await;

    send(
        &upstream,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    )
    .await;
    let call = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"stream","arguments":{"n":1e3}}}"#;
    send(&upstream, call).await;
    let mut got = Vec::new();
    for _ in 0..4 {
        got.push(next(&mut upstream).await);
    }
    // The standalone stream was reopened with Last-Event-ID and sent a log.
    assert!(got.contains(&replies::LOG.to_owned()), "{got:#?}");
    assert!(got.contains(&replies::TOOLS.replace("ID", "2")), "{got:#?}");
    let progress = got
        .iter()
        .position(|f| f == replies::PROGRESS)
        .expect("progress");
    let result = got
        .iter()
        .position(|f| *f == replies::CALLED.replace("ID", "3"))
        .expect("result");
    assert!(progress < result, "{got:#?}");

    let seen = server.seen();
    let session = server.session().expect("a session");
    for request in &seen {
        let body = String::from_utf8_lossy(&request.body).to_string();
        assert_eq!(request.header("x-api-key"), "sekrit-value");
        if request.rpc_method().as_deref() == Some("initialize") {
            assert_eq!(request.body, INITIALIZE.as_bytes());
            assert_eq!(request.header("mcp-session-id"), "");
            assert_eq!(
                request.header("accept"),
                "application/json, text/event-stream"
            );
            continue;
        }
        assert_eq!(request.header("mcp-session-id"), session, "{body}");
        assert_eq!(
            request.header("mcp-protocol-version"),
            SESSION_VERSION,
            "{body}"
        );
        assert_eq!(request.header("mcp-method"), "", "{body}");
    }
    let posted: Vec<&[u8]> = seen
        .iter()
        .filter(|s| s.method == "POST")
        .map(|s| &s.body[..])
        .collect();
    for body in [INITIALIZED, pong, call] {
        assert!(
            posted.contains(&body.as_bytes()),
            "{body} not posted exactly"
        );
    }
    let gets: Vec<_> = seen.iter().filter(|s| s.method == "GET").collect();
    assert_eq!(gets.len(), 2, "{gets:#?}");
    assert_eq!(gets[0].header("accept"), "text/event-stream");
    assert_eq!(gets[0].header("last-event-id"), "");
    assert_ne!(gets[1].header("last-event-id"), "");
}

#[tokio::test]
async fn a_dropped_response_stream_is_resumed_with_last_event_id() {
    let server = StreamableServer::start().await;
    server.refuse_get();
    let mut upstream = connect(&config(&server.url, UpstreamTransport::StreamableHttp)).await;
    initialize(&server, &mut upstream).await;
    eventually("a GET was tried", || {
        server.seen().iter().any(|s| s.method == "GET")
    })
    .await;

    let call = r#"{"jsonrpc":"2.0","id":"d","method":"tools/call","params":{"name":"drop"}}"#;
    send(&upstream, call).await;
    assert_eq!(next(&mut upstream).await, replies::PROGRESS);
    assert_eq!(
        next(&mut upstream).await,
        replies::CALLED.replace("ID", r#""d""#)
    );
    // The server has no standalone stream (405); resumption is by a GET
    // naming the last event all the same.
    let resumed: Vec<_> = server
        .seen()
        .into_iter()
        .filter(|s| s.method == "GET" && !s.header("last-event-id").is_empty())
        .collect();
    assert_eq!(resumed.len(), 1, "{resumed:#?}");
    let standalone = server
        .seen()
        .into_iter()
        .filter(|s| s.method == "GET" && s.header("last-event-id").is_empty())
        .count();
    assert_eq!(standalone, 1, "a 405 is not retried");
}

#[tokio::test]
async fn requests_are_posted_concurrently() {
    let server = StreamableServer::start().await;
    server.refuse_get();
    let mut upstream = connect(&config(&server.url, UpstreamTransport::StreamableHttp)).await;
    initialize(&server, &mut upstream).await;
    send(
        &upstream,
        r#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"slow"}}"#,
    )
    .await;
    send(
        &upstream,
        r#"{"jsonrpc":"2.0","id":11,"method":"tools/list"}"#,
    )
    .await;
    let mut order = Vec::new();
    while order.len() < 2 {
        let frame = json(&next(&mut upstream).await);
        if let Some(id) = frame.get("id").and_then(Value::as_i64) {
            order.push(id);
        }
    }
    assert_eq!(order, vec![11, 10]);
}

#[tokio::test]
async fn http_errors_answer_the_request() {
    let server = StreamableServer::start().await;
    server.refuse_get();
    let mut upstream = connect(&config(&server.url, UpstreamTransport::StreamableHttp)).await;
    initialize(&server, &mut upstream).await;

    send(
        &upstream,
        r#"{"jsonrpc":"2.0","id":"f","method":"tools/call","params":{"name":"fail"}}"#,
    )
    .await;
    let error = json(&next(&mut upstream).await);
    assert_eq!(error["id"], "f");
    assert_eq!(error["error"]["code"], -32011);
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("500"), "{message}");
    assert_eq!(error["error"]["data"]["httpStatus"], 500);

    // A JSON-RPC answer sent with the error status is forwarded as it is.
    send(
        &upstream,
        r#"{"jsonrpc":"2.0","id":"r","method":"tools/call","params":{"name":"refuse"}}"#,
    )
    .await;
    assert_eq!(
        next(&mut upstream).await,
        replies::REFUSED.replace("ID", r#""r""#)
    );
}

#[tokio::test]
async fn an_expired_session_closes_the_upstream() {
    let server = StreamableServer::start().await;
    server.refuse_get();
    let mut upstream = connect(&config(&server.url, UpstreamTransport::StreamableHttp)).await;
    initialize(&server, &mut upstream).await;
    server.expire_session();
    send(
        &upstream,
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/list"}"#,
    )
    .await;
    ends(&mut upstream).await;
    let exit = tokio::time::timeout(WAIT, upstream.control.wait())
        .await
        .unwrap();
    let UpstreamExit::Closed(reason) = &exit else {
        panic!("{exit:?}")
    };
    assert!(reason.contains("session"), "{reason}");
    assert!(reason.contains("404"), "{reason}");
    assert!(
        upstream.writer.is_closed() || {
            tokio::time::sleep(Duration::from_millis(100)).await;
            upstream.writer.is_closed()
        }
    );
}

#[tokio::test]
async fn shutdown_deletes_the_session() {
    let server = StreamableServer::start().await;
    let mut upstream = connect(&config(&server.url, UpstreamTransport::StreamableHttp)).await;
    initialize(&server, &mut upstream).await;
    let session = server.session().unwrap();
    send(
        &upstream,
        r#"{"jsonrpc":"2.0","method":"notifications/last"}"#,
    )
    .await;
    upstream.writer.close();
    let exit = tokio::time::timeout(WAIT, upstream.control.shutdown())
        .await
        .unwrap();
    assert_eq!(exit, UpstreamExit::Closed(BY_PROXY.into()));
    let seen = server.seen();
    let last = seen
        .iter()
        .position(|s| s.body == br#"{"jsonrpc":"2.0","method":"notifications/last"}"#[..])
        .expect("the last notification was delivered before the DELETE");
    let delete = seen
        .iter()
        .position(|s| s.method == "DELETE")
        .expect("a DELETE");
    assert!(last < delete);
    assert_eq!(seen[delete].header("mcp-session-id"), session);
    assert_eq!(seen[delete].header("x-api-key"), "sekrit-value");
    assert_eq!(server.session(), None);
    // What was already queued may still come out; then the stream ends.
    while let Ok(Some(_)) = tokio::time::timeout(WAIT, upstream.frames.next()).await {}
    if let Some(task) = upstream.writer_task.take() {
        task.await.unwrap().unwrap();
    }
}

#[tokio::test]
async fn stateless_requests_carry_method_and_name_headers_and_no_session() {
    let server = StreamableServer::start().await;
    let mut upstream = connect(&config(&server.url, UpstreamTransport::StreamableHttp)).await;
    let discover = r#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
    send(&upstream, discover).await;
    assert_eq!(
        next(&mut upstream).await,
        replies::DISCOVERED.replace("ID", "1")
    );
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"caf\u00e9","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
    send(&upstream, call).await;
    assert_eq!(
        next(&mut upstream).await,
        replies::DISCOVERED.replace("ID", "2")
    );
    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].body, discover.as_bytes());
    assert_eq!(seen[0].header("mcp-method"), "server/discover");
    assert_eq!(seen[0].header("mcp-name"), "");
    assert_eq!(seen[0].header("mcp-protocol-version"), "2026-07-28");
    assert_eq!(seen[1].body, call.as_bytes());
    assert_eq!(seen[1].header("mcp-method"), "tools/call");
    assert_eq!(seen[1].header("mcp-name"), "=?base64?Y2Fmw6k=?=");
    for request in &seen {
        assert_eq!(request.header("mcp-session-id"), "");
    }
    // No standalone stream in this revision.
    assert!(seen.iter().all(|s| s.method == "POST"));
}

#[tokio::test]
async fn a_stateless_cancellation_closes_the_request_stream() {
    let server = StreamableServer::start().await;
    let mut upstream = connect(&config(&server.url, UpstreamTransport::StreamableHttp)).await;
    let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#;
    let call = format!(
        r#"{{"jsonrpc":"2.0","id":"h","method":"tools/call","params":{{"name":"hang",{meta}}}}}"#
    );
    send(&upstream, &call).await;
    eventually("the call reaches the server", || server.seen().len() == 1).await;
    let cancel = format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":"h",{meta}}}}}"#
    );
    send(&upstream, &cancel).await;
    eventually("the stream is closed", || server.hung_up() == 1).await;
    // The cancellation itself is not posted in this revision, and the
    // cancelled request gets no reply from the client.
    send(
        &upstream,
        &format!(r#"{{"jsonrpc":"2.0","id":"n","method":"server/discover","params":{{{meta}}}}}"#),
    )
    .await;
    assert_eq!(
        next(&mut upstream).await,
        replies::DISCOVERED.replace("ID", r#""n""#)
    );
    let methods: Vec<_> = server
        .seen()
        .iter()
        .map(|s| s.header("mcp-method"))
        .collect();
    assert_eq!(methods, vec!["tools/call", "server/discover"]);
}

#[tokio::test]
async fn an_oversized_reply_is_reported_and_answered() {
    let server = StreamableServer::start().await;
    let config = config(&server.url, UpstreamTransport::StreamableHttp);
    let mut upstream = upstream::connect(&config, 100, 4).await.unwrap();
    send(&upstream, INITIALIZE).await;
    match tokio::time::timeout(WAIT, upstream.frames.next()).await {
        Ok(Some(Ok(LineFrame::TooLong))) => {}
        other => panic!("expected TooLong, got {other:?}"),
    }
    let error = json(&next(&mut upstream).await);
    assert_eq!(error["id"], "init-1");
    assert_eq!(error["error"]["code"], -32011);
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("100-byte"), "{message}");
}

#[tokio::test]
async fn https_with_a_private_ca() {
    let pki = TestPki::generate();
    let server = StreamableServer::start_tls(&pki).await;
    let mut trusted = config(&server.url, UpstreamTransport::StreamableHttp);
    trusted.ca_file = Some(pki.ca_cert.clone());
    let mut upstream = connect(&trusted).await;
    initialize(&server, &mut upstream).await;

    // Without the CA the server is not trusted: the request is answered
    // with an error naming the certificate problem.
    let mut upstream = connect(&config(&server.url, UpstreamTransport::StreamableHttp)).await;
    send(&upstream, INITIALIZE).await;
    let error = json(&next(&mut upstream).await);
    assert_eq!(error["error"]["code"], -32011);
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.to_lowercase().contains("certificate"), "{message}");
}

#[tokio::test]
async fn an_unreachable_server_fails_at_connect_without_secrets() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    for transport in [
        UpstreamTransport::StreamableHttp,
        UpstreamTransport::Sse,
        UpstreamTransport::Ws,
    ] {
        let scheme = if transport == UpstreamTransport::Ws {
            "ws"
        } else {
            "http"
        };
        let url = format!("{scheme}://user:pa55word@127.0.0.1:{port}/mcp?token=t0ken");
        let err = upstream::connect(&config(&url, transport), MAX, 4)
            .await
            .err()
            .expect("connect fails");
        let UpstreamError::Network { route, reason } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(route, "net");
        let text = err.to_string();
        assert!(text.contains(&format!("127.0.0.1:{port}/mcp")), "{text}");
        for secret in ["pa55word", "t0ken", "sekrit-value", "user"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        assert!(reason.contains("connect"), "{reason}");
    }
}

#[tokio::test]
async fn legacy_sse_posts_to_the_endpoint_and_reads_messages() {
    let server = LegacySseServer::start().await;
    let mut upstream = connect(&config(&server.url, UpstreamTransport::Sse)).await;
    let request = r#"{"jsonrpc":"2.0","id":"x1","method":"tools/call","params":{"name":"echo","arguments":{"s":"\u00e9","n":1.0E+2}}}"#;
    send(&upstream, request).await;
    let reply = next(&mut upstream).await;
    assert_eq!(
        reply,
        r#"{"jsonrpc":"2.0","id":"x1","result":{"echo":{"name":"echo","arguments":{"s":"\u00e9","n":1.0E+2}}}}"#
    );
    let seen = server.seen();
    assert_eq!(seen[0].method, "GET");
    assert_eq!(seen[0].header("accept"), "text/event-stream");
    assert_eq!(seen[1].uri, "/messages?sessionId=s1");
    assert_eq!(seen[1].body, request.as_bytes());
    assert!(seen.iter().all(|s| s.header("x-api-key") == "sekrit-value"));

    server
        .push("event: message\ndata: {\"jsonrpc\":\"2.0\",\ndata: \"method\":\"n\"}\n\n")
        .await;
    assert_eq!(
        next(&mut upstream).await,
        "{\"jsonrpc\":\"2.0\",\n\"method\":\"n\"}"
    );
    server.close_stream();
    ends(&mut upstream).await;
    let exit = tokio::time::timeout(WAIT, upstream.control.wait())
        .await
        .unwrap();
    assert_eq!(
        exit,
        UpstreamExit::Closed("the server closed its event stream".into())
    );
}

#[tokio::test]
async fn websocket_carries_text_messages_exactly() {
    let server = WsServer::start(true).await;
    let mut upstream = connect(&config(&server.url, UpstreamTransport::Ws)).await;
    let headers = server.upgrade_headers().unwrap();
    assert_eq!(headers["x-api-key"], "sekrit-value");
    assert_eq!(headers["sec-websocket-protocol"], "mcp");

    let request = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"e","arguments":{"big":12345678901234567890123,"s":"\ud83d\ude00"}}}"#;
    send(&upstream, request).await;
    assert_eq!(
        next(&mut upstream).await,
        r#"{"jsonrpc":"2.0","id":7,"result":{"echo":{"name":"e","arguments":{"big":12345678901234567890123,"s":"\ud83d\ude00"}}}}"#
    );
    assert_eq!(server.received(), vec![request.to_owned()]);
    eventually("the ping is answered", || server.pongs() == 1).await;

    send(&upstream, r#"{"jsonrpc":"2.0","id":8,"method":"close"}"#).await;
    ends(&mut upstream).await;
    let exit = tokio::time::timeout(WAIT, upstream.control.wait())
        .await
        .unwrap();
    let UpstreamExit::Closed(reason) = exit else {
        panic!()
    };
    assert!(reason.contains("closed the WebSocket"), "{reason}");
}

#[tokio::test]
async fn websocket_shutdown_sends_a_close_frame() {
    let server = WsServer::start(true).await;
    let mut upstream = connect(&config(&server.url, UpstreamTransport::Ws)).await;
    send(
        &upstream,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
    upstream.writer.close();
    let exit = tokio::time::timeout(WAIT, upstream.control.shutdown())
        .await
        .unwrap();
    assert_eq!(exit, UpstreamExit::Closed(BY_PROXY.into()));
    assert_eq!(
        server.received(),
        vec![r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned()]
    );
    ends(&mut upstream).await;
}

#[tokio::test]
async fn websocket_without_the_mcp_subprotocol_is_refused() {
    let server = WsServer::start(false).await;
    let err = upstream::connect(&config(&server.url, UpstreamTransport::Ws), MAX, 4)
        .await
        .err()
        .expect("refused");
    let text = err.to_string();
    assert!(text.contains("subprotocol `mcp`"), "{text}");
}

#[tokio::test]
async fn secure_websocket_with_a_private_ca() {
    let pki = TestPki::generate();
    let server = WsServer::start_tls(&pki).await;
    let mut trusted = config(&server.url, UpstreamTransport::Ws);
    trusted.ca_file = Some(pki.ca_cert.clone());
    let mut upstream = connect(&trusted).await;
    send(&upstream, r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).await;
    assert_eq!(
        next(&mut upstream).await,
        r#"{"jsonrpc":"2.0","id":1,"result":{"echo":null}}"#
    );
    let err = upstream::connect(&config(&server.url, UpstreamTransport::Ws), MAX, 4)
        .await
        .err()
        .expect("untrusted");
    assert!(err.to_string().contains("TLS"), "{err}");
}

/// The real `@modelcontextprotocol/server-everything` in streamableHttp
/// mode (from `tests/peers`), killed when dropped.
struct Everything {
    _child: tokio::process::Child,
    url: String,
}

impl Everything {
    async fn start() -> Self {
        let command = support::server_everything();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = tokio::process::Command::new(&command[0])
            .arg(&command[1])
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("node starts");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "server-everything did not listen"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Self {
            _child: child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

/// Reads frames until one answers `id`, answering sampling requests on the
/// way; returns the answer and every other frame seen.
async fn answer_of(upstream: &mut Upstream, id: i64) -> (Value, Vec<Value>) {
    let mut others = Vec::new();
    loop {
        let frame = json(&next(upstream).await);
        if frame["id"] == id && frame.get("method").is_none() {
            return (frame, others);
        }
        if frame["method"] == "sampling/createMessage" {
            let reply = serde_json::json!({
                "jsonrpc": "2.0",
                "id": frame["id"],
                "result": {"role": "assistant", "content": {"type": "text", "text": "sampled!"}, "model": "test"}
            });
            send(upstream, &reply.to_string()).await;
        }
        others.push(frame);
    }
}

#[tokio::test]
async fn server_everything_over_streamable_http() {
    let server = Everything::start().await;
    let mut upstream = connect(&config(&server.url, UpstreamTransport::StreamableHttp)).await;
    send(
        &upstream,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"acs-proxy-test","version":"0"}}}"#,
    )
    .await;
    let (init, _) = answer_of(&mut upstream, 1).await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    send(&upstream, INITIALIZED).await;

    send(
        &upstream,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    )
    .await;
    let (tools, _) = answer_of(&mut upstream, 2).await;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"echo"), "{names:?}");

    send(
        &upstream,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":"h\u00e9llo"}}}"#,
    )
    .await;
    let (echo, _) = answer_of(&mut upstream, 3).await;
    let text = echo["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("héllo"), "{text}");

    // Progress notifications come on the request's own stream.
    send(
        &upstream,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"trigger-long-running-operation","arguments":{"duration":1,"steps":2},"_meta":{"progressToken":"p4"}}}"#,
    )
    .await;
    let (done, others) = answer_of(&mut upstream, 4).await;
    assert!(done.get("result").is_some(), "{done}");
    let progress = others
        .iter()
        .filter(|f| f["method"] == "notifications/progress" && f["params"]["progressToken"] == "p4")
        .count();
    assert_eq!(progress, 2, "{others:#?}");

    // A server-to-client request in the middle of a call, answered by POST.
    send(
        &upstream,
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"trigger-sampling-request","arguments":{"prompt":"hi","maxTokens":5}}}"#,
    )
    .await;
    let (sampled, others) = answer_of(&mut upstream, 5).await;
    assert!(
        others
            .iter()
            .any(|f| f["method"] == "sampling/createMessage"),
        "{others:#?}"
    );
    assert!(sampled.to_string().contains("sampled!"), "{sampled}");

    upstream.writer.close();
    let exit = tokio::time::timeout(WAIT, upstream.control.shutdown())
        .await
        .unwrap();
    assert!(matches!(exit, UpstreamExit::Closed(_)), "{exit:?}");
}
