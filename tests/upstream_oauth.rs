//! OAuth 2.1 client credentials for a network upstream (`[upstream.oauth]`),
//! through the built binary: the proxy obtains its own access token from a
//! real authorization server (oauth2-mock-server) and sends it to the
//! upstream on every request, replaces it before it expires, gets a fresh
//! one when the upstream answers 401, and never forwards the agent's own
//! `Authorization`. A token endpoint that refuses the proxy fails the
//! session's start with a clear reason.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use acs_proxy::config::{ClientAuth, UpstreamConfig, UpstreamOAuth, UpstreamTransport};
use acs_proxy::transport::upstream;
use base64::Engine;
use bytes::Bytes;
use futures_util::StreamExt;
use reqwest::StatusCode;
use serde_json::{json, Value};
use support::mcp_http::{self, McpHttp};
use support::mcp_servers::{LegacySseServer, StreamableServer, WsServer};
use support::oauth::AuthorizationServer;
use support::{tool_call, NetProxy, Scratch};

const AGENT_TOKEN: &str = "agent-own-token-never-forwarded";
const CLIENT_SECRET: &str = "proxy-client-secret";

/// A config with one route to `upstream_url` authenticating at
/// `token_url`, and an HTTP listener that wants [`AGENT_TOKEN`].
fn config(scratch: &Scratch, upstream_url: &str, token_url: &str) -> PathBuf {
    std::fs::write(scratch.path("client-secret"), format!("{CLIENT_SECRET}\n")).unwrap();
    std::fs::write(scratch.path("agent-tokens"), format!("{AGENT_TOKEN}\n")).unwrap();
    let text = format!(
        r#"[[upstream]]
name = "remote"
url = "{upstream_url}"
shutdown_grace_ms = 500

[upstream.oauth]
token_url = "{token_url}"
client_id = "acs-proxy"
client_secret_file = "client-secret"
scopes = ["mcp:tools", "mcp:read"]
resource = "{upstream_url}"
refresh_before_s = 1

[listen]
transport = "http"
address = "127.0.0.1:0"
auth_tokens_file = "agent-tokens"

[audit]
path = {audit:?}
"#,
        audit = scratch.audit_log().display().to_string()
    );
    let path = scratch.path("proxy.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn agent(proxy: &NetProxy) -> McpHttp {
    McpHttp::new(mcp_http::client(None), proxy.url("/mcp"))
        .header("authorization", &format!("Bearer {AGENT_TOKEN}"))
}

async fn call(mcp: &McpHttp, id: i64) {
    let (reply, _) = mcp.request(&tool_call(id, "echo", json!({}))).await;
    assert!(reply["result"]["content"].is_array(), "{reply}");
}

/// The access tokens the endpoint issued, in order.
fn issued(idp: &mut AuthorizationServer) -> Vec<String> {
    idp.token_requests()
        .iter()
        .map(|r| r["access_token"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn the_upstream_sees_the_proxys_own_token_renewed_before_expiry_and_after_a_401() {
    let scratch = Scratch::new();
    let upstream = StreamableServer::start().await;
    let mut idp = AuthorizationServer::start(0);
    // A 2 s token is handed out for 1 s (refresh_before_s = 1).
    idp.set_endpoint_ttl(2);
    let proxy = NetProxy::start(&config(&scratch, &upstream.url, &idp.token_url()));
    let mut mcp = agent(&proxy);
    mcp.initialize("2025-11-25", json!({})).await;
    call(&mcp, 2).await;

    let requests = idp.token_requests();
    assert_eq!(
        requests.len(),
        1,
        "one token serves the session: {requests:#?}"
    );
    let form: Vec<(String, String)> = form_urlencoded_pairs(requests[0]["body"].clone());
    assert!(form.contains(&("grant_type".into(), "client_credentials".into())));
    assert!(form.contains(&("scope".into(), "mcp:tools mcp:read".into())));
    assert!(form.contains(&("resource".into(), upstream.url.clone())));
    let basic = requests[0]["authorization"].as_str().unwrap();
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(basic.strip_prefix("Basic ").unwrap())
        .unwrap();
    assert_eq!(decoded, format!("acs-proxy:{CLIENT_SECRET}").as_bytes());

    let first = format!("Bearer {}", issued(&mut idp)[0]);
    let seen = upstream.seen();
    assert!(!seen.is_empty());
    for request in &seen {
        assert_eq!(
            request.header("authorization"),
            first,
            "{} {}",
            request.method,
            request.uri
        );
    }

    // Past the token's use-by time: the next request brings a new one.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    call(&mcp, 3).await;
    let tokens = issued(&mut idp);
    assert!(tokens.len() >= 2, "{tokens:?}");
    let second = format!("Bearer {}", tokens[tokens.len() - 1]);
    assert_ne!(second, first);
    let last_post = upstream
        .seen()
        .into_iter()
        .rev()
        .find(|r| r.method == "POST")
        .unwrap();
    assert_eq!(last_post.header("authorization"), second);

    // The upstream revokes the current token: the call is sent again with
    // a fresh one and still succeeds.
    upstream.refuse_authorization(&second);
    let before = issued(&mut idp).len();
    call(&mcp, 4).await;
    let tokens = issued(&mut idp);
    assert!(tokens.len() > before, "a 401 brings a fresh token");
    let posts_of_call: Vec<String> = upstream
        .seen()
        .into_iter()
        .filter(|r| r.method == "POST" && String::from_utf8_lossy(&r.body).contains("\"id\":4"))
        .map(|r| r.header("authorization"))
        .collect();
    assert_eq!(
        posts_of_call.len(),
        2,
        "refused, then sent again: {posts_of_call:?}"
    );
    assert_eq!(posts_of_call[0], second);
    assert_eq!(
        posts_of_call[1],
        format!("Bearer {}", tokens[tokens.len() - 1])
    );

    // Never the agent's token, never the client secret.
    for request in upstream.seen() {
        for (name, value) in &request.headers {
            let value = value.to_str().unwrap_or_default();
            assert!(
                !value.contains(AGENT_TOKEN),
                "{name} carried the agent's token"
            );
            assert!(
                !value.contains(CLIENT_SECRET),
                "{name} carried the client secret"
            );
        }
    }
    let stderr = proxy.stderr();
    assert!(!stderr.contains(CLIENT_SECRET) && !stderr.contains(&tokens[0]));
}

#[tokio::test]
async fn a_token_endpoint_that_refuses_the_proxy_fails_the_session_start() {
    let scratch = Scratch::new();
    let upstream = StreamableServer::start().await;
    let idp = AuthorizationServer::start(0);
    // No token endpoint there: HTTP 404.
    let token_url = format!("{}/no-such-endpoint", idp.issuer);
    let proxy = NetProxy::start(&config(&scratch, &upstream.url, &token_url));
    let mcp = agent(&proxy);
    let response = mcp
        .post(
            &json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
            "protocolVersion":"2025-11-25","capabilities":{},
            "clientInfo":{"name":"oauth-test","version":"1"}}}),
        )
        .await;
    assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
    let body: Value = mcp_http::json_body(response).await;
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("token endpoint") && message.contains("HTTP 404"),
        "{message}"
    );
    assert!(!message.contains(CLIENT_SECRET));
    assert!(upstream.seen().is_empty(), "nothing reached the upstream");
}

/// The legacy HTTP+SSE and WebSocket clients carry the token too: on the
/// event-stream GET and every POST, and on the WebSocket upgrade.
#[tokio::test]
async fn legacy_sse_and_websocket_upstreams_carry_the_token() {
    let scratch = Scratch::new();
    let mut idp = AuthorizationServer::start(0);
    std::fs::write(scratch.path("client-secret"), CLIENT_SECRET).unwrap();
    let token_url = idp.token_url();
    let route = |url: &str, transport| {
        let mut config = UpstreamConfig::for_command(vec![]);
        config.name = "remote".into();
        config.url = Some(url.into());
        config.transport = Some(transport);
        config.oauth = Some(UpstreamOAuth {
            token_url: token_url.clone(),
            client_id: "acs-proxy".into(),
            client_secret_file: scratch.path("client-secret"),
            scopes: Vec::new(),
            audience: Some("mcp-servers".into()),
            resource: None,
            refresh_before_s: 60,
            client_auth: ClientAuth::ClientSecretPost,
        });
        config
    };

    let sse = LegacySseServer::start().await;
    let mut upstream = upstream::connect(&route(&sse.url, UpstreamTransport::Sse), 1 << 20, 8)
        .await
        .unwrap();
    let request = r#"{"jsonrpc":"2.0","id":"x1","method":"tools/call","params":{"name":"echo","arguments":{}}}"#;
    upstream.writer.send(Bytes::from(request)).await.unwrap();
    let reply = tokio::time::timeout(Duration::from_secs(10), upstream.frames.next()).await;
    assert!(matches!(reply, Ok(Some(Ok(_)))), "{reply:?}");
    let bearer = format!("Bearer {}", issued(&mut idp)[0]);
    let seen = sse.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen.iter().all(|r| r.header("authorization") == bearer));

    let ws = WsServer::start(true).await;
    let _ws_upstream = upstream::connect(&route(&ws.url, UpstreamTransport::Ws), 1 << 20, 8)
        .await
        .unwrap();
    let headers = ws.upgrade_headers().unwrap();
    // The same route name, but another client: a token of its own.
    let tokens = issued(&mut idp);
    assert_eq!(
        headers["authorization"],
        format!("Bearer {}", tokens[tokens.len() - 1]).as_str()
    );

    let requests = idp.token_requests();
    let body = &requests[0]["body"];
    assert_eq!(body["client_id"], "acs-proxy");
    assert_eq!(body["client_secret"], CLIENT_SECRET);
    assert_eq!(body["audience"], "mcp-servers");
    assert!(requests[0]["authorization"].is_null());
}

/// The form members oauth2-mock-server parsed from the token request.
fn form_urlencoded_pairs(body: Value) -> Vec<(String, String)> {
    body.as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
        .collect()
}
