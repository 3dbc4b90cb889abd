//! Hostile input over Streamable HTTP: every malformed, oversized, deep,
//! ambiguous or unauthorized request gets its documented error, the
//! process stays up, a second session working at the same time is not
//! disturbed, and what the listener refused is in its edge audit chain.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};
use support::mcp_http::{client, json_body, McpHttp, ACCEPT_BOTH};
use support::{edge_entries_once, listen_section, tool_call, NetProxy, Scratch};

fn start(scratch: &Scratch, listen_extra: &str, extra: &str) -> NetProxy {
    let config = scratch.demo_config(&format!(
        "{}\n{extra}",
        listen_section("http", listen_extra)
    ));
    NetProxy::start(&config)
}

/// A session that keeps calling `echo` until told to stop, counting replies.
fn bystander(
    mut mcp: McpHttp,
) -> (
    tokio::sync::watch::Sender<bool>,
    tokio::task::JoinHandle<u32>,
) {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(async move {
        mcp.initialize("2025-06-18", json!({})).await;
        let mut answered = 0;
        for id in 1.. {
            if *stopped.borrow() && answered > 0 {
                break;
            }
            let (reply, _) = mcp
                .request(&tool_call(id, "echo", json!({"text": "bystander"})))
                .await;
            assert_eq!(
                reply["result"]["content"][0]["text"], "bystander",
                "{reply}"
            );
            answered += 1;
        }
        answered
    });
    (stop, task)
}

/// The JSON-RPC error of a refused POST, with its HTTP status.
async fn refusal(response: reqwest::Response) -> (StatusCode, i64, String) {
    let status = response.status();
    let body = json_body(response).await;
    let code = body["error"]["code"].as_i64().unwrap_or_default();
    let message = body["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (status, code, message)
}

async fn post_bytes(mcp: &McpHttp, body: Vec<u8>) -> reqwest::Response {
    let mut request = mcp
        .client
        .post(&mcp.url)
        .header("content-type", "application/json")
        .header("accept", ACCEPT_BOTH)
        .body(body);
    if let Some(id) = &mcp.session {
        request = request.header("mcp-session-id", id);
    }
    request.send().await.expect("POST")
}

#[tokio::test]
async fn malformed_bodies_get_their_error_while_another_session_goes_on() {
    let scratch = Scratch::new();
    let proxy = start(&scratch, "", "[limits]\nmax_message_bytes = 65536\n");
    let url = proxy.url("/mcp");
    let (stop, others) = bystander(McpHttp::new(client(None), url.clone()));
    let mut mcp = McpHttp::new(client(None), url);
    mcp.initialize("2025-03-26", json!({})).await;

    let mut utf8 = br#"{"jsonrpc":"2.0","id":1,"method":"ping","x":""#.to_vec();
    utf8.extend_from_slice(b"\xc3\x28\"}");
    assert_eq!(
        refusal(post_bytes(&mcp, utf8).await).await,
        (
            StatusCode::BAD_REQUEST,
            -32700,
            "parse error: the message is not valid UTF-8 (first invalid byte at offset 45)".into()
        )
    );

    let too_deep =
        "invalid request: JSON nesting exceeds the limit of 128 levels ([limits] max_json_depth)";
    for depth in [129, 30_000] {
        let body = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert_eq!(
            refusal(post_bytes(&mcp, body.into_bytes()).await).await,
            (StatusCode::BAD_REQUEST, -32600, too_deep.into())
        );
    }

    let huge = tool_call(2, "echo", json!({"text": "x".repeat(70_000)})).to_string();
    assert_eq!(
        refusal(post_bytes(&mcp, huge.into_bytes()).await).await,
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            -32600,
            "the request body exceeds the 65536-byte limit".into()
        )
    );
    let big_array = tool_call(3, "echo", json!({"text": "many", "items": vec![7; 20_000]}));
    let (reply, _) = mcp.request(&big_array).await;
    assert_eq!(reply["result"]["content"][0]["text"], "many");

    let batch = json!([
        {"jsonrpc":"2.0","id":"i","method":"initialize","params":{}},
        {"jsonrpc":"2.0","id":4,"method":"ping"}
    ]);
    assert_eq!(
        refusal(mcp.post(&batch).await).await,
        (
            StatusCode::BAD_REQUEST,
            -32600,
            "invalid request: `initialize` must not be part of a JSON-RPC batch".into()
        )
    );

    // Duplicate keys reach the session's relay, which refuses them in-band.
    let duplicate = r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","name":"get-env","arguments":{}}}"#;
    let response = mcp.post_text(duplicate, "application/json").await;
    assert_eq!(response.status(), StatusCode::OK);
    let reply = json_body(response).await;
    assert_eq!(reply["error"]["code"], -32600, "{reply}");
    assert!(reply["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("invalid request: duplicate key \"name\" in an object"));

    // Numbers beyond f64 reach the server exactly as sent.
    let digits = "7".repeat(100);
    let numbers = format!(
        r#"{{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"n","big":{digits},"huge":1e400}}}}}}"#
    );
    let response = mcp.post_text(&numbers, "application/json").await;
    assert_eq!(
        json_body(response).await["result"]["content"][0]["text"],
        "n"
    );
    assert!(scratch.server_lines().contains(&numbers));

    // A body that is not declared JSON, a header that does not fit.
    let session = mcp.session.clone().unwrap();
    let post = |name: &'static str, value: &'static str| {
        mcp.client
            .post(&mcp.url)
            .header("accept", ACCEPT_BOTH)
            .header("mcp-session-id", &session)
            .header(name, value)
            .body(r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#)
            .send()
    };
    let response = post("content-type", "text/plain").await.unwrap();
    assert_eq!(response.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let response = post("mcp-protocol-version", "1999-01-01").await.unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);

    stop.send(true).unwrap();
    assert!(others.await.unwrap() > 0, "the other session was served");
    assert!(!scratch
        .server_lines()
        .iter()
        .any(|l| l.contains("get-env") || l.contains("\"id\":\"i\"")));

    // Every refusal at the HTTP layer is in the edge chain, with the body's digest.
    let refusals = [
        ("400", "not valid UTF-8"),
        ("400", "max_json_depth"),
        ("413", "65536-byte limit"),
        ("400", "JSON-RPC batch"),
        ("415", "application/json"),
        ("400", "MCP-Protocol-Version"),
    ];
    let recorded = |edge: &[Value], status: &str, reason: &str| {
        edge.iter().any(|e| {
            e["detail"]
                .as_str()
                .is_some_and(|d| d.starts_with(&format!("HTTP {status} POST route demo")))
                && e["reasoning"].as_str().is_some_and(|r| r.contains(reason))
        })
    };
    let edge = edge_entries_once(&scratch, |edge| {
        refusals.iter().all(|(s, r)| recorded(edge, s, r))
    });
    for (status, reason) in refusals {
        assert!(
            recorded(&edge, status, reason),
            "no edge entry for {status} {reason}: {edge:#?}"
        );
    }
    assert!(edge
        .iter()
        .filter(|e| e["reasoning"].as_str().is_some_and(|r| r.contains("UTF-8")))
        .all(|e| e["content_digest"].as_str().is_some_and(|d| d.len() == 64)));
    scratch.assert_audit_verifies();
}

#[tokio::test]
async fn sessions_belong_to_the_principal_that_opened_them() {
    let scratch = Scratch::new();
    let tokens = scratch.path("tokens");
    std::fs::write(&tokens, "token-alpha-0123456789\ntoken-beta-9876543210\n").unwrap();
    let proxy = start(
        &scratch,
        &format!("auth_tokens_file = {:?}\n", tokens.display().to_string()),
        "",
    );
    let url = proxy.url("/mcp");
    let mut alpha = McpHttp::new(client(None), url.clone())
        .header("authorization", "Bearer token-alpha-0123456789");
    alpha.initialize("2025-06-18", json!({})).await;
    let session = alpha.session.clone().unwrap();

    // Beta presents alpha's session id: as unknown as any other id.
    let mut beta = McpHttp::new(client(None), url.clone())
        .header("authorization", "Bearer token-beta-9876543210");
    beta.session = Some(session.clone());
    beta.version = alpha.version.clone();
    let unknown = "unknown or ended session: start a new one with `initialize`";
    let response = beta
        .post(&tool_call(9, "echo", json!({"text": "hijack"})))
        .await;
    assert_eq!(
        refusal(response).await,
        (StatusCode::NOT_FOUND, -32600, unknown.into())
    );
    assert_eq!(beta.get(None).await.status(), StatusCode::NOT_FOUND);
    assert_eq!(beta.delete().await, StatusCode::NOT_FOUND);

    // No token: 401 with a challenge, whatever the session id.
    let mut anonymous = McpHttp::new(client(None), url.clone());
    anonymous.session = Some(session.clone());
    let response = anonymous
        .post(&tool_call(10, "echo", json!({"text": "x"})))
        .await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        response.headers()["www-authenticate"],
        "Bearer realm=\"acs-proxy\""
    );
    // A foreign Origin: 403, even with the right token.
    let foreign = McpHttp::new(client(None), url)
        .header("authorization", "Bearer token-alpha-0123456789")
        .header("origin", "https://evil.example");
    let response = foreign
        .post(&tool_call(11, "echo", json!({"text": "x"})))
        .await;
    assert_eq!(
        refusal(response).await,
        (
            StatusCode::FORBIDDEN,
            -32600,
            "this Origin is not allowed".into()
        )
    );

    // Alpha's session was untouched.
    let (reply, _) = alpha
        .request(&tool_call(12, "echo", json!({"text": "mine"})))
        .await;
    assert_eq!(reply["result"]["content"][0]["text"], "mine");
    assert!(!scratch.server_lines().iter().any(|l| l.contains("hijack")));

    let refusals = ["404 POST", "404 GET", "404 DELETE", "401 POST", "403 POST"];
    let recorded = |edge: &[Value], status: &str| {
        edge.iter().any(|e| {
            e["detail"]
                .as_str()
                .is_some_and(|d| d.starts_with(&format!("HTTP {status}")))
        })
    };
    let edge = edge_entries_once(&scratch, |edge| {
        refusals.iter().all(|status| recorded(edge, status))
    });
    for status in refusals {
        assert!(
            recorded(&edge, status),
            "no edge entry for {status}: {edge:#?}"
        );
    }
    let log = std::fs::read_to_string(scratch.audit_log()).unwrap();
    assert!(!log.contains("token-alpha") && !log.contains("token-beta"));
    scratch.assert_audit_verifies();
}

/// A connection that sends nothing at all, and one that opens HTTP/2 with
/// its preface and settings but never a request, are cut off after the
/// header read timeout like an HTTP/1.1 trickle; a served connection stays.
#[tokio::test]
async fn silent_and_http2_idle_connections_are_cut_off() {
    let scratch = Scratch::new();
    let proxy = start(&scratch, "header_read_timeout_ms = 1000\n", "");
    let addr = proxy.addr;
    let silent = std::thread::spawn(move || {
        let mut stream = TcpStream::connect(addr).unwrap();
        let started = Instant::now();
        (
            closes_within(&mut stream, Duration::from_secs(15)),
            started.elapsed(),
        )
    });
    let h2_idle = std::thread::spawn(move || {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream
            .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            .unwrap();
        // An empty SETTINGS frame: length 0, type 4, no flags, stream 0.
        stream.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).unwrap();
        let started = Instant::now();
        (
            closes_within(&mut stream, Duration::from_secs(15)),
            started.elapsed(),
        )
    });
    let mut mcp = McpHttp::new(client(None), proxy.url("/mcp"));
    mcp.initialize("2025-06-18", json!({})).await;
    for (name, probe) in [("silent", silent), ("HTTP/2 idle", h2_idle)] {
        let (closed, after) = tokio::task::spawn_blocking(move || probe.join().unwrap())
            .await
            .unwrap();
        assert!(closed, "the {name} connection was never cut off");
        assert!(
            after < Duration::from_secs(5),
            "{name}: cut off only after {after:?}"
        );
    }
    let (reply, _) = mcp
        .request(&tool_call(1, "echo", json!({"text": "still served"})))
        .await;
    assert_eq!(reply["result"]["content"][0]["text"], "still served");
}

/// Reads from `stream` until it closes; `true` when it did within `limit`.
fn closes_within(stream: &mut TcpStream, limit: Duration) -> bool {
    stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let deadline = Instant::now() + limit;
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(err) if err.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return true,
        }
    }
    false
}

#[tokio::test]
async fn slow_and_oversized_headers_are_cut_off_while_others_are_served() {
    let scratch = Scratch::new();
    let proxy = start(&scratch, "header_read_timeout_ms = 1000\n", "");
    let addr = proxy.addr;

    // A client trickling its headers, one line every 200 ms.
    let slowloris = std::thread::spawn(move || {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream
            .write_all(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\n")
            .unwrap();
        let started = Instant::now();
        for n in 0..50 {
            std::thread::sleep(Duration::from_millis(200));
            if stream
                .write_all(format!("X-Slow-{n}: 1\r\n").as_bytes())
                .is_err()
            {
                break;
            }
        }
        let closed = closes_within(&mut stream, Duration::from_secs(15));
        (closed, started.elapsed())
    });
    // Meanwhile another client is served as usual.
    let mut mcp = McpHttp::new(client(None), proxy.url("/mcp"));
    mcp.initialize("2025-06-18", json!({})).await;
    let (reply, _) = mcp
        .request(&tool_call(1, "echo", json!({"text": "served"})))
        .await;
    assert_eq!(reply["result"]["content"][0]["text"], "served");
    let (closed, after) = tokio::task::spawn_blocking(move || slowloris.join().unwrap())
        .await
        .unwrap();
    assert!(closed, "the trickling connection was never cut off");
    assert!(
        after < Duration::from_secs(12),
        "cut off only after {after:?}"
    );

    // Headers beyond what the listener buffers: 431, and the process stays up.
    let oversized = tokio::task::spawn_blocking(move || {
        let mut stream = TcpStream::connect(addr).unwrap();
        let header = format!("X-Big: {}\r\n", "h".repeat(1 << 20));
        let request = format!("GET /mcp HTTP/1.1\r\nHost: localhost\r\n{header}\r\n");
        let _ = stream.write_all(request.as_bytes());
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut head = [0u8; 64];
        let read = stream.read(&mut head).unwrap_or(0);
        String::from_utf8_lossy(&head[..read]).into_owned()
    })
    .await
    .unwrap();
    assert!(oversized.starts_with("HTTP/1.1 431"), "{oversized:?}");
    let (reply, _) = mcp
        .request(&tool_call(2, "echo", json!({"text": "still"})))
        .await;
    assert_eq!(reply["result"]["content"][0]["text"], "still");
}

#[tokio::test]
async fn legacy_sse_sessions_belong_to_their_principal_too() {
    let scratch = Scratch::new();
    let tokens = scratch.path("tokens");
    std::fs::write(&tokens, "token-alpha-0123456789\ntoken-beta-9876543210\n").unwrap();
    let proxy = start(
        &scratch,
        &format!(
            "legacy_sse = true\nauth_tokens_file = {:?}\n",
            tokens.display().to_string()
        ),
        "",
    );
    let http = client(None);
    let stream = http
        .get(proxy.url("/mcp/sse"))
        .header("accept", "text/event-stream")
        .header("authorization", "Bearer token-alpha-0123456789")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    let mut events = support::mcp_http::SseStream::new(stream);
    let endpoint = events.next().await.expect("the endpoint event");
    assert_eq!(endpoint.event.as_deref(), Some("endpoint"));
    let post = |token: &'static str| {
        http.post(proxy.url(&endpoint.data))
            .header("content-type", "application/json")
            .header("authorization", format!("Bearer {token}"))
            .body(tool_call(1, "echo", json!({"text": "x"})).to_string())
            .send()
    };
    let (status, _, message) = refusal(post("token-beta-9876543210").await.unwrap()).await;
    assert_eq!(
        (status, message.as_str()),
        (StatusCode::NOT_FOUND, "unknown or ended session")
    );
    let response = post("token-alpha-0123456789").await.unwrap();
    assert_eq!(response.status(), StatusCode::ACCEPTED);
}
