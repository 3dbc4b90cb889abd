//! acs-proxy serving MCP 2026-07-28 (stateless) Streamable HTTP to agents,
//! next to session-era clients on the same endpoint, in front of a real
//! HTTP upstream that serves both eras and records what it receives:
//! allowed, denied and rewritten calls, the request metadata headers
//! (checked on the way in, recomputed on the way out), JSON and SSE
//! answers, cancellation by hanging up, and one sealed audit chain per
//! request. One test puts the Python SDK's 2026-07-28 server behind the
//! proxy: it checks the headers it receives against the body itself.

mod support;

use std::time::Duration;

use reqwest::{Response, StatusCode};
use serde_json::{json, Value};
use support::mcp_http::{client, json_body, read_reply, McpHttp, SseStream, ACCEPT_BOTH};
use support::mcp_servers::{Seen, StreamableServer};
use support::{audit_chains, entries_of, listen_section, NetProxy, Scratch};

const VERSION: &str = "2026-07-28";

/// A proxy whose one route is `upstream`, with `policy` rules.
fn start(scratch: &Scratch, upstream: &StreamableServer, policy: &str) -> NetProxy {
    let text = format!(
        "[[upstream]]\nname = \"modern\"\nurl = {:?}\nshutdown_grace_ms = 500\n\n[audit]\npath = {:?}\nfsync = \"always\"\n\n{}\n{policy}\n",
        upstream.url,
        scratch.audit_log().display().to_string(),
        listen_section("http", "")
    );
    let path = scratch.path("proxy.toml");
    std::fs::write(&path, text).unwrap();
    NetProxy::start(&path)
}

/// A 2026-07-28 request body: `params` plus the `_meta` every request carries.
fn request(id: i64, method: &str, mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientInfo": {"name": "stateless-agent", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn call(id: i64, tool: &str, arguments: Value) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    )
}

/// POSTs `body` with exactly `headers` (plus the content headers).
async fn post(proxy: &NetProxy, body: &Value, headers: &[(&str, &str)]) -> Response {
    let mut builder = client(None)
        .post(proxy.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", ACCEPT_BOTH)
        .body(body.to_string());
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    builder.send().await.expect("POST")
}

/// The headers a conforming client sends for `body`, plus `extra`.
fn headers_for<'a>(body: &'a Value, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut headers = vec![
        ("mcp-protocol-version", VERSION),
        ("mcp-method", body["method"].as_str().unwrap()),
    ];
    if let Some(name) = body["params"]["name"].as_str() {
        headers.push(("mcp-name", name));
    }
    headers.extend_from_slice(extra);
    headers
}

/// POSTs a conforming request and returns the status and the response to it.
async fn send(proxy: &NetProxy, body: &Value, extra: &[(&str, &str)]) -> (StatusCode, Value) {
    let response = post(proxy, body, &headers_for(body, extra)).await;
    let status = response.status();
    assert!(
        response.headers().get("mcp-session-id").is_none(),
        "no session id in the stateless era"
    );
    (status, read_reply(response, &body["id"]).await.0)
}

/// Lists the tools, so the route knows which arguments are mirrored.
async fn list_tools(proxy: &NetProxy) {
    let (status, reply) = send(proxy, &request(1, "tools/list", json!({})), &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(reply["result"]["tools"][0]["name"], "query", "{reply}");
}

fn calls_seen(upstream: &StreamableServer) -> Vec<Seen> {
    upstream
        .seen()
        .into_iter()
        .filter(|s| s.rpc_method().as_deref() == Some("tools/call"))
        .collect()
}

/// Waits until the audit log has `count` sealed chains.
async fn sealed_chains(scratch: &Scratch, count: usize) -> Vec<(String, bool)> {
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
async fn an_allowed_call_goes_through_with_its_headers_and_its_own_sealed_session() {
    let scratch = Scratch::new();
    let upstream = StreamableServer::start().await;
    let proxy = start(&scratch, &upstream, "");
    list_tools(&proxy).await;
    let body = call(
        2,
        "query",
        json!({"region": "Hello, 世界", "sql": "select 1"}),
    );
    let region = "=?base64?SGVsbG8sIOS4lueVjA==?=";
    let (status, reply) = send(&proxy, &body, &[("mcp-param-region", region)]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(reply["result"]["content"][0]["text"], "queried", "{reply}");

    let seen = calls_seen(&upstream);
    assert_eq!(seen.len(), 1);
    let call = &seen[0];
    assert_eq!(call.body, body.to_string().as_bytes(), "the exact bytes");
    assert_eq!(call.header("mcp-protocol-version"), VERSION);
    assert_eq!(call.header("mcp-method"), "tools/call");
    assert_eq!(call.header("mcp-name"), "query");
    assert_eq!(call.header("mcp-param-region"), region);
    assert_eq!(call.header("mcp-session-id"), "");

    // One chain per request: list, then call; each opened and sealed.
    let chains = sealed_chains(&scratch, 2).await;
    assert!(chains.iter().all(|(_, sealed)| *sealed), "{chains:?}");
    let entries = scratch.audit_entries();
    let starts = entries_of(&entries, "steps/sessionStart");
    assert_eq!(starts.len(), 2);
    assert_eq!(entries_of(&entries, "steps/sessionEnd").len(), 2);
    assert_eq!(entries_of(&entries, "steps/toolCallRequest").len(), 1);
    assert_eq!(
        entries_of(&entries, "agbom/snapshot").len(),
        1,
        "from the list"
    );
    scratch.assert_audit_verifies();
}

#[tokio::test]
async fn a_denied_call_never_reaches_the_upstream() {
    let scratch = Scratch::new();
    let upstream = StreamableServer::start().await;
    let proxy = start(
        &scratch,
        &upstream,
        r#"
[[policy.rule]]
name = "no-queries"
hook = "steps/toolCallRequest"
tool = "query"
decision = "deny"
reasoning = "queries are off today"
"#,
    );
    let (status, reply) = send(&proxy, &call(3, "query", json!({})), &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    assert!(reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("queries are off today"));
    assert!(calls_seen(&upstream).is_empty());
    sealed_chains(&scratch, 1).await;
}

#[tokio::test]
async fn rewritten_arguments_are_mirrored_in_the_headers_sent_upstream() {
    let scratch = Scratch::new();
    let upstream = StreamableServer::start().await;
    let proxy = start(
        &scratch,
        &upstream,
        r#"
[[policy.rule]]
name = "pin-region"
hook = "steps/toolCallRequest"
tool = "query"
match = { pointer = "/arguments/sql/value", regex = "pin" }
decision = "modify"
reasoning = "pinned queries run in eu-west"
set = { region = "eu-west" }

[[policy.rule]]
name = "hide-secret-regions"
hook = "protocols/MCP/tools/call"
tool = "query"
match = { pointer = "/params", regex = "secret-" }
decision = "modify"
reasoning = "secret regions are not named"
redact = { pointer = "/params/arguments", regex = 'secret-[a-z]+', replacement = "hidden zone" }
"#,
    );
    list_tools(&proxy).await;
    let pinned = call(4, "query", json!({"region": "us-east", "sql": "pin me"}));
    let (status, reply) = send(&proxy, &pinned, &[("mcp-param-region", "us-east")]).await;
    assert_eq!(
        (status, &reply["result"]["content"][0]["text"]),
        (StatusCode::OK, &json!("queried"))
    );
    let hidden = call(5, "query", json!({"region": "secret-base", "sql": "x"}));
    let (status, _) = send(&proxy, &hidden, &[("mcp-param-region", "secret-base")]).await;
    assert_eq!(status, StatusCode::OK);

    let seen = calls_seen(&upstream);
    assert_eq!(seen.len(), 2);
    let sent: Value = serde_json::from_slice(&seen[0].body).unwrap();
    assert_eq!(sent["params"]["arguments"]["region"], "eu-west");
    assert_eq!(seen[0].header("mcp-param-region"), "eu-west");
    assert_eq!(seen[0].header("mcp-name"), "query");
    let sent: Value = serde_json::from_slice(&seen[1].body).unwrap();
    assert_eq!(sent["params"]["arguments"]["region"], "hidden zone");
    assert_eq!(seen[1].header("mcp-param-region"), "hidden zone");
}

#[tokio::test]
async fn headers_that_disagree_with_the_body_are_refused() {
    let scratch = Scratch::new();
    let upstream = StreamableServer::start().await;
    let proxy = start(&scratch, &upstream, "");
    list_tools(&proxy).await;
    let body = call(6, "query", json!({"region": "eu", "sql": "x"}));
    let good = [
        ("mcp-protocol-version", VERSION),
        ("mcp-method", "tools/call"),
        ("mcp-name", "query"),
        ("mcp-param-region", "eu"),
    ];
    let without = |name: &str| -> Vec<(&str, &str)> {
        good.iter().copied().filter(|(n, _)| *n != name).collect()
    };
    let replaced = |name: &'static str, value: &'static str| -> Vec<(&'static str, &'static str)> {
        let mut headers = without(name);
        headers.push((name, value));
        headers
    };
    let cases: Vec<(&str, Vec<(&str, &str)>)> = vec![
        ("no version header", without("mcp-protocol-version")),
        (
            "another version",
            replaced("mcp-protocol-version", "2027-01-01"),
        ),
        ("no method", without("mcp-method")),
        ("another method", replaced("mcp-method", "tools/list")),
        ("no name", without("mcp-name")),
        ("another name", replaced("mcp-name", "=?base64?b3RoZXI=?=")),
        ("undecodable name", replaced("mcp-name", "=?base64?***?=")),
        ("no param", without("mcp-param-region")),
        ("another param", replaced("mcp-param-region", "us")),
    ];
    for (case, headers) in cases {
        let response = post(&proxy, &body, &headers).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{case}");
        let reply = json_body(response).await;
        assert_eq!(reply["error"]["code"], -32020, "{case}: {reply}");
        assert_eq!(reply["id"], 6, "{case}");
    }
    // A param header for an argument the body does not have.
    let bare = call(7, "query", json!({"sql": "x"}));
    let response = post(
        &proxy,
        &bare,
        &headers_for(&bare, &[("mcp-param-region", "eu")]),
    )
    .await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(json_body(response).await["error"]["code"], -32020);
    // A revision the proxy does not serve.
    let mut future = call(8, "query", json!({}));
    future["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2031-01-01");
    let response = post(
        &proxy,
        &future,
        &[
            ("mcp-protocol-version", "2031-01-01"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "query"),
        ],
    )
    .await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let reply = json_body(response).await;
    assert_eq!(reply["error"]["code"], -32022, "{reply}");
    assert_eq!(reply["error"]["data"]["supported"][0], VERSION);
    assert!(calls_seen(&upstream).is_empty(), "nothing refused went on");
    // Unknown Mcp-Param-* headers are passed on.
    let (status, _) = send(
        &proxy,
        &body,
        &[("mcp-param-region", "eu"), ("mcp-param-trace", "t-1")],
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(calls_seen(&upstream)[0].header("mcp-param-trace"), "t-1");
}

#[tokio::test]
async fn streams_unknown_methods_get_and_delete() {
    let scratch = Scratch::new();
    let upstream = StreamableServer::start().await;
    let proxy = start(&scratch, &upstream, "");
    // Answered as the upstream answered: a stream when progress comes first.
    let body = call(9, "progress", json!({}));
    let response = post(&proxy, &body, &headers_for(&body, &[])).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let mut stream = SseStream::new(response);
    let progress = stream.next_message().await.unwrap();
    assert_eq!(progress.id, None, "no resumable event ids");
    assert_eq!(progress.json()["method"], "notifications/progress");
    let result = stream.next_message().await.unwrap();
    assert_eq!(result.json()["id"], 9);
    assert!(
        stream.next().await.is_none(),
        "the stream ends with the response"
    );

    // A method the upstream does not serve: 404 with -32601.
    let unknown = request(10, "nope/x", json!({}));
    let response = post(&proxy, &unknown, &headers_for(&unknown, &[])).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_eq!(json_body(response).await["error"]["code"], -32601);

    // No GET stream and no DELETE in this revision.
    let http = client(None);
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let response = http
            .request(method.clone(), proxy.url("/mcp"))
            .header("mcp-protocol-version", VERSION)
            .header("accept", "text/event-stream")
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.status(),
            StatusCode::METHOD_NOT_ALLOWED,
            "{method}"
        );
    }
}

#[tokio::test]
async fn hanging_up_cancels_the_request_upstream() {
    let scratch = Scratch::new();
    let upstream = StreamableServer::start().await;
    let proxy = start(&scratch, &upstream, "");
    let body = call(11, "hang", json!({}));
    let headers = headers_for(&body, &[]);
    let gave_up =
        tokio::time::timeout(Duration::from_millis(1500), post(&proxy, &body, &headers)).await;
    assert!(gave_up.is_err(), "the upstream never answers");
    let deadline = tokio::time::Instant::now() + support::WAIT;
    while upstream.hung_up() == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the upstream stream was not closed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    sealed_chains(&scratch, 1).await;
}

#[tokio::test]
async fn session_era_clients_share_the_endpoint() {
    let scratch = Scratch::new();
    let upstream = StreamableServer::start().await;
    let proxy = start(&scratch, &upstream, "");
    let mut legacy = McpHttp::new(client(None), proxy.url("/mcp"));
    let result = legacy.initialize("2025-11-25", json!({})).await;
    assert_eq!(result["serverInfo"]["name"], "test-server");
    assert!(legacy.session.is_some());
    // A stateless request in between touches no session.
    list_tools(&proxy).await;
    let (reply, _) = legacy
        .request(&json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}))
        .await;
    assert_eq!(reply["result"]["tools"][0]["name"], "echo", "{reply}");
    assert_eq!(legacy.delete().await, StatusCode::NO_CONTENT);
    let upstream_sessions: Vec<String> = upstream
        .seen()
        .iter()
        .map(|s| s.header("mcp-session-id"))
        .filter(|id| !id.is_empty())
        .collect();
    assert!(
        !upstream_sessions.is_empty(),
        "the legacy session kept its id upstream"
    );
    sealed_chains(&scratch, 2).await;
}

#[tokio::test]
async fn a_stdio_route_spawns_its_server_for_the_request() {
    let scratch = Scratch::new();
    let config = scratch.demo_config(&listen_section("http", ""));
    let proxy = NetProxy::start(&config);
    let body = call(12, "echo", json!({"text": "stateless over stdio"}));
    let (status, reply) = send(&proxy, &body, &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        reply["result"]["content"][0]["text"], "stateless over stdio",
        "{reply}"
    );
    // The server got the request as sent, and no handshake the agent did not send.
    let received = scratch.server_received();
    assert_eq!(received, vec![body]);
    sealed_chains(&scratch, 1).await;
    scratch.assert_audit_verifies();
}

/// The Python SDK's 2026-07-28 server (`tests/peers/modern_server.py`) on a
/// free port; killed when dropped.
struct PythonServer {
    child: std::process::Child,
    url: String,
}

impl PythonServer {
    async fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = std::process::Command::new(support::peers_python())
            .arg(support::repo_root().join("tests/peers/modern_server.py"))
            .arg(port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn the Python server");
        let deadline = tokio::time::Instant::now() + support::WAIT;
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the Python server did not start"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Self {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for PythonServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn the_python_sdk_accepts_the_headers_of_a_rewritten_call() {
    let scratch = Scratch::new();
    let upstream = PythonServer::start().await;
    let text = format!(
        "[[upstream]]\nname = \"modern\"\nurl = {:?}\nshutdown_grace_ms = 500\n\n[audit]\npath = {:?}\n\n{}\n{}",
        upstream.url,
        scratch.audit_log().display().to_string(),
        listen_section("http", ""),
        r#"
[[policy.rule]]
name = "pin-region"
hook = "steps/toolCallRequest"
tool = "query"
decision = "modify"
reasoning = "queries run in eu-west"
set = { region = "eu-west" }
"#
    );
    let path = scratch.path("proxy.toml");
    std::fs::write(&path, text).unwrap();
    let proxy = NetProxy::start(&path);
    let (status, listed) = send(&proxy, &request(1, "tools/list", json!({})), &[]).await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_eq!(
        listed["result"]["tools"][0]["inputSchema"]["properties"]["region"]["x-mcp-header"],
        "Region"
    );
    let body = call(2, "query", json!({"region": "us-east", "sql": "select 1"}));
    let (status, reply) = send(&proxy, &body, &[("mcp-param-region", "us-east")]).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    assert_eq!(
        reply["result"]["content"][0]["text"], "eu-west: select 1",
        "{reply}"
    );
    // A header that disagrees with the agent's own body is refused by the
    // proxy before any policy runs.
    let (status, reply) = send(&proxy, &body, &[("mcp-param-region", "eu-west")]).await;
    assert_eq!(
        (status, &reply["error"]["code"]),
        (StatusCode::BAD_REQUEST, &json!(-32020))
    );
}
