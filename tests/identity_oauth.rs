//! The listener as an OAuth 2.1 resource server (`[listen.oauth]`), through
//! the built binary on Streamable HTTP, with `oauth2-mock-server` as the
//! authorization server (real JWKS, real signed tokens) and real MCP
//! upstreams: the demo server, and a recording Streamable HTTP server for
//! what reaches the upstream.

mod support;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use reqwest::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use reqwest::StatusCode;
use serde_json::{json, Value};

use support::mcp_http::{client, McpHttp};
use support::mcp_servers::StreamableServer;
use support::oauth::AuthorizationServer;
use support::{entries_of, free_port, tool_call, NetProxy, Scratch};

const SCOPE: &str = "mcp:tools";
const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// The `[listen]` section on `port`, with `[listen.oauth]` trusting `idp`
/// for the audience `http://127.0.0.1:PORT/mcp`, requiring `mcp:tools`.
fn listen_oauth(port: u16, idp: &AuthorizationServer, extra: &str) -> String {
    format!(
        "[listen]\ntransport = \"http\"\naddress = \"127.0.0.1:{port}\"\n\n\
         [listen.oauth]\nissuer = {:?}\njwks_url = {:?}\naudience = \"http://127.0.0.1:{port}/mcp\"\n\
         required_scopes = [{SCOPE:?}]\njwks_refresh_min_interval_s = 0\nresource_name = \"Demo tools\"\n{extra}\n",
        idp.issuer,
        idp.jwks_url(),
    )
}

/// A proxy in front of the demo server recording hook content in its
/// audit log, with `[listen.oauth]` trusting `idp`.
fn demo_proxy(scratch: &Scratch, idp: &AuthorizationServer, extra: &str) -> (NetProxy, u16) {
    let port = free_port();
    let config = scratch.demo_config_recording_content(&listen_oauth(port, idp, extra));
    (NetProxy::start_logging(&config, "debug"), port)
}

/// Claims of a token for this proxy, for `sub`, with the required scope.
fn claims(port: u16, sub: &str) -> Value {
    json!({
        "sub": sub, "aud": format!("http://127.0.0.1:{port}/mcp"), "scope": format!("{SCOPE} other"),
        "roles": ["reader", "ops"], "tenant": "acme", "client_id": "agent-app",
    })
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

fn metadata_url(port: u16, path: &str) -> String {
    format!("http://127.0.0.1:{port}{WELL_KNOWN}{path}")
}

/// POSTs `initialize` with `authorization` (none when `None`).
async fn initialize_with(url: &str, authorization: Option<&str>) -> reqwest::Response {
    let mut request = client(None)
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(
            json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
                "protocolVersion":"2025-06-18","capabilities":{},
                "clientInfo":{"name":"oauth-test","version":"1"}}})
            .to_string(),
        );
    if let Some(authorization) = authorization {
        request = request.header(AUTHORIZATION, authorization);
    }
    request.send().await.expect("POST")
}

fn challenge(response: &reqwest::Response) -> String {
    response
        .headers()
        .get(WWW_AUTHENTICATE)
        .map(|value| value.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

/// A token's three parts, decoded where they are JSON.
fn split(token: &str) -> (Value, Value, String) {
    let mut parts = token.split('.');
    let mut json_part =
        || serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts.next().unwrap()).unwrap()).unwrap();
    let header = json_part();
    let claims = json_part();
    (header, claims, parts.next().unwrap().to_owned())
}

fn encode(value: &Value) -> String {
    URL_SAFE_NO_PAD.encode(value.to_string())
}

#[tokio::test]
async fn a_valid_token_opens_a_session_bound_to_its_subject_and_named_in_every_hook() {
    let scratch = Scratch::new();
    let mut idp = AuthorizationServer::start(0);
    let (proxy, port) = demo_proxy(&scratch, &idp, "");
    let url = proxy.url("/mcp");

    let token = idp.token(claims(port, "alice"), Some("k1"));
    let mut mcp = McpHttp::new(client(None), url.clone()).header("authorization", &bearer(&token));
    mcp.initialize("2025-06-18", json!({})).await;
    let (reply, _) = mcp
        .request(&tool_call(2, "echo", json!({"text": "hello"})))
        .await;
    assert_eq!(reply["result"]["content"][0]["text"], "hello", "{reply}");

    // A fresh token for the same subject keeps the session.
    let mut refreshed = claims(port, "alice");
    refreshed["jti"] = json!("refreshed");
    let fresh = idp.token(refreshed, Some("k1"));
    assert_ne!(fresh, token);
    mcp.extra
        .insert(AUTHORIZATION, bearer(&fresh).parse().unwrap());
    let (reply, _) = mcp
        .request(&tool_call(3, "echo", json!({"text": "again"})))
        .await;
    assert_eq!(reply["result"]["content"][0]["text"], "again", "{reply}");

    // Another subject cannot use it: 404, as for an unknown session.
    let mallory = idp.token(claims(port, "mallory"), Some("k1"));
    mcp.extra
        .insert(AUTHORIZATION, bearer(&mallory).parse().unwrap());
    let response = mcp.post(&tool_call(4, "echo", json!({"text": "x"}))).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    drop(proxy);

    let entries = scratch.audit_entries();
    let start = entries_of(&entries, "steps/sessionStart");
    let calls = entries_of(&entries, "steps/toolCallRequest");
    assert!(!start.is_empty() && calls.len() >= 2);
    for entry in start.into_iter().chain(calls) {
        let params = &entry["hook_params"];
        assert_eq!(
            params["metadata"]["user_context"],
            json!({"user_id": "alice", "roles": ["reader", "ops"], "authentication_method": "oauth2"}),
            "{entry}"
        );
        assert_eq!(params["tenant_id"], "acme", "{entry}");
    }
    let start = entries_of(&entries, "steps/sessionStart")[0];
    assert_eq!(
        start["hook_params"]["payload"]["user_identity"],
        json!({"type": "oauth_subject", "issuer": idp.issuer, "subject": "alice",
               "client_id": "agent-app", "roles": ["reader", "ops"], "tenant_id": "acme"})
    );
}

/// The whole flow with nothing minted by hand: a client asks the
/// authorization server's token endpoint for a token for this resource
/// (client credentials, RFC 8707 `resource`-style `aud`), then runs a
/// session with it; every request after the first reuses the token.
#[tokio::test]
async fn a_token_from_the_token_endpoint_runs_a_session() {
    let scratch = Scratch::new();
    let mut idp = AuthorizationServer::start(0);
    let (proxy, port) = demo_proxy(&scratch, &idp, "");
    idp.set_endpoint_claims(json!({"sub": "ci-agent", "roles": ["reader"]}));
    let audience = format!("http://127.0.0.1:{port}/mcp");
    let form = form_urlencoded::Serializer::new(String::new())
        .append_pair("grant_type", "client_credentials")
        .append_pair("scope", SCOPE)
        .append_pair("aud", &audience)
        .finish();
    let answer: Value = client(None)
        .post(idp.token_url())
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form)
        .send()
        .await
        .expect("token request")
        .text()
        .await
        .map(|text| serde_json::from_str(&text).expect("a JSON token answer"))
        .expect("token answer");
    let token = answer["access_token"].as_str().expect("an access token");
    let mut mcp =
        McpHttp::new(client(None), proxy.url("/mcp")).header("authorization", &bearer(token));
    mcp.initialize("2025-06-18", json!({})).await;
    for id in 2..5 {
        let (reply, _) = mcp
            .request(&tool_call(id, "echo", json!({"text": "via the endpoint"})))
            .await;
        assert_eq!(
            reply["result"]["content"][0]["text"], "via the endpoint",
            "{reply}"
        );
    }
    drop(proxy);
    let entries = scratch.audit_entries();
    let calls = entries_of(&entries, "steps/toolCallRequest");
    assert_eq!(calls.len(), 3);
    for call in calls {
        assert_eq!(call["user_id"], "ci-agent", "{call}");
        assert_eq!(call["authentication_method"], "oauth2", "{call}");
    }
}

#[tokio::test]
async fn every_supported_algorithm_is_accepted() {
    let scratch = Scratch::new();
    let mut idp = AuthorizationServer::start(0);
    for (alg, kid) in [("PS256", "kps"), ("ES256", "kes"), ("EdDSA", "ked")] {
        idp.generate_key(alg, kid);
    }
    let (proxy, port) = demo_proxy(&scratch, &idp, "");
    let url = proxy.url("/mcp");
    for kid in ["k1", "kps", "kes", "ked"] {
        let token = idp.token(claims(port, "alice"), Some(kid));
        let response = initialize_with(&url, Some(&bearer(&token))).await;
        assert_eq!(response.status(), StatusCode::OK, "{kid}");
    }
}

#[tokio::test]
async fn missing_and_hostile_tokens_get_401_and_a_missing_scope_403() {
    let scratch = Scratch::new();
    let mut idp = AuthorizationServer::start(0);
    let (proxy, port) = demo_proxy(&scratch, &idp, "");
    let url = proxy.url("/mcp");
    let metadata = metadata_url(port, "/mcp");

    let response = initialize_with(&url, None).await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        challenge(&response),
        format!("Bearer resource_metadata=\"{metadata}\", scope=\"{SCOPE}\"")
    );

    let valid = idp.token(claims(port, "alice"), Some("k1"));
    let (header, body, signature) = split(&valid);
    let message = format!("{}.{}", encode(&header), encode(&body));
    let now = body["iat"].as_u64().unwrap();
    let with = |name: &str, value: Value| {
        let mut claims = claims(port, "alice");
        claims[name] = value;
        claims
    };
    // alg none, no signature.
    let none = format!(
        "{}.{}.",
        encode(&json!({"alg": "none", "typ": "JWT", "kid": "k1"})),
        encode(&body)
    );
    // HS256 keyed with the public key's modulus.
    let jwks = idp.jwks();
    let modulus = URL_SAFE_NO_PAD
        .decode(jwks["keys"][0]["n"].as_str().unwrap())
        .unwrap();
    let hmac_header = encode(&json!({"alg": "HS256", "typ": "JWT", "kid": "k1"}));
    let hmac_message = format!("{hmac_header}.{}", encode(&body));
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &modulus);
    let hmac = format!(
        "{hmac_message}.{}",
        URL_SAFE_NO_PAD.encode(ring::hmac::sign(&key, hmac_message.as_bytes()))
    );
    // A kid the issuer never published.
    let mut ghost_header = header.clone();
    ghost_header["kid"] = json!("ghost");
    let ghost = format!("{}.{}.{signature}", encode(&ghost_header), encode(&body));
    // The claims changed under the original signature.
    let tampered = format!(
        "{}.{}.{signature}",
        encode(&header),
        encode(&with("sub", json!("admin")))
    );
    let mut flipped = signature.clone().into_bytes();
    flipped[10] = if flipped[10] == b'A' { b'B' } else { b'A' };
    let bad_signature = format!("{message}.{}", String::from_utf8(flipped).unwrap());

    let hostile = [
        ("alg none", none),
        ("HS256 with the public key", hmac),
        ("unknown kid", ghost),
        ("tampered claims", tampered),
        ("bad signature", bad_signature),
        (
            "expired",
            idp.token(with("exp", json!(now - 3600)), Some("k1")),
        ),
        (
            "not yet valid",
            idp.token(with("nbf", json!(now + 3600)), Some("k1")),
        ),
        (
            "another audience",
            idp.token(with("aud", json!("http://127.0.0.1:1/mcp")), Some("k1")),
        ),
        (
            "another issuer",
            idp.token(with("iss", json!("http://evil.example")), Some("k1")),
        ),
        ("not a JWT", "opaque-token-value".to_owned()),
    ];
    for (what, token) in hostile {
        let response = initialize_with(&url, Some(&bearer(&token))).await;
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{what}");
        assert_eq!(
            challenge(&response),
            format!(
                "Bearer error=\"invalid_token\", resource_metadata=\"{metadata}\", scope=\"{SCOPE}\""
            ),
            "{what}"
        );
    }

    let unscoped = idp.token(with("scope", json!("other")), Some("k1"));
    let response = initialize_with(&url, Some(&bearer(&unscoped))).await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert_eq!(
        challenge(&response),
        format!("Bearer error=\"insufficient_scope\", scope=\"{SCOPE}\", resource_metadata=\"{metadata}\"")
    );

    // No token ever reaches the log.
    let log = proxy.stderr();
    assert!(
        !log.contains(&valid) && !log.contains(&unscoped),
        "a token was logged"
    );
    assert!(!log.contains(&signature), "a signature was logged");
    drop(proxy);
    let audit = std::fs::read_to_string(scratch.audit_log()).unwrap_or_default();
    assert!(
        audit.contains("invalid_token") || audit.contains("401"),
        "refusals are audited"
    );
    for secret in [&valid, &unscoped, &signature] {
        assert!(!audit.contains(secret.as_str()), "a token in the audit log");
    }
}

#[tokio::test]
async fn the_protected_resource_metadata_is_served_per_endpoint_without_a_token() {
    let scratch = Scratch::new();
    let idp = AuthorizationServer::start(0);
    let (proxy, port) = demo_proxy(&scratch, &idp, "");
    let expected = json!({
        "resource": format!("http://127.0.0.1:{port}/mcp"),
        "authorization_servers": [idp.issuer],
        "scopes_supported": [SCOPE],
        "bearer_methods_supported": ["header"],
        "resource_name": "Demo tools",
    });
    let http = client(None);
    for path in ["", "/mcp", "/mcp/demo"] {
        let response = http
            .get(proxy.url(&format!("{WELL_KNOWN}{path}")))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        assert_eq!(
            response.headers()["content-type"],
            "application/json",
            "{path}"
        );
        let body: Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
        assert_eq!(body, expected, "{path}");
    }
    let post = http
        .post(proxy.url(&format!("{WELL_KNOWN}/mcp")))
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), StatusCode::METHOD_NOT_ALLOWED);

    // Each endpoint's challenge names its own metadata path.
    let response = initialize_with(&proxy.url("/mcp/demo"), None).await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert!(
        challenge(&response).contains(&format!(
            "resource_metadata=\"{}\"",
            metadata_url(port, "/mcp/demo")
        )),
        "{}",
        challenge(&response)
    );
}

#[tokio::test]
async fn rotated_keys_are_picked_up_and_cached_keys_outlive_a_jwks_outage() {
    let scratch = Scratch::new();
    let mut idp = AuthorizationServer::start(0);
    let (proxy, port) = demo_proxy(&scratch, &idp, "");
    let url = proxy.url("/mcp");

    let first = idp.token(claims(port, "alice"), Some("k1"));
    let mut mcp = McpHttp::new(client(None), url.clone()).header("authorization", &bearer(&first));
    mcp.initialize("2025-06-18", json!({})).await;

    // The issuer rotates to k2 mid-session: its token is accepted in the
    // same session (the JWKS is fetched again for the new kid).
    idp.generate_key("RS256", "k2");
    let rotated = idp.token(claims(port, "alice"), Some("k2"));
    mcp.extra
        .insert(AUTHORIZATION, bearer(&rotated).parse().unwrap());
    let (reply, _) = mcp
        .request(&tool_call(2, "echo", json!({"text": "rotated"})))
        .await;
    assert_eq!(reply["result"]["content"][0]["text"], "rotated", "{reply}");

    // The JWKS endpoint goes down: cached keys still validate.
    idp.generate_key("RS256", "k3");
    let unseen = idp.token(claims(port, "alice"), Some("k3"));
    idp.set_jwks_down(true);
    for token in [&first, &rotated] {
        mcp.extra
            .insert(AUTHORIZATION, bearer(token).parse().unwrap());
        let (reply, _) = mcp
            .request(&tool_call(3, "echo", json!({"text": "cached"})))
            .await;
        assert_eq!(reply["result"]["content"][0]["text"], "cached", "{reply}");
    }
    // A kid it never fetched fails closed while the endpoint is down.
    mcp.extra
        .insert(AUTHORIZATION, bearer(&unseen).parse().unwrap());
    let response = mcp.post(&tool_call(4, "echo", json!({"text": "x"}))).await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert!(challenge(&response).contains("error=\"invalid_token\""));

    // Back up: the new key is fetched on its next use.
    idp.set_jwks_down(false);
    let (reply, _) = mcp
        .request(&tool_call(5, "echo", json!({"text": "k3"})))
        .await;
    assert_eq!(reply["result"]["content"][0]["text"], "k3", "{reply}");
}

#[tokio::test]
async fn keys_unreachable_at_startup_fail_closed_until_they_load() {
    let scratch = Scratch::new();
    let mut idp = AuthorizationServer::start(0);
    idp.set_jwks_down(true);
    let (proxy, port) = demo_proxy(&scratch, &idp, "");
    let url = proxy.url("/mcp");
    let token = idp.token(claims(port, "alice"), Some("k1"));
    let response = initialize_with(&url, Some(&bearer(&token))).await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    idp.set_jwks_down(false);
    let response = initialize_with(&url, Some(&bearer(&token))).await;
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test]
async fn the_agents_token_never_reaches_the_upstream() {
    let scratch = Scratch::new();
    let mut idp = AuthorizationServer::start(0);
    let upstream = StreamableServer::start().await;
    let port = free_port();
    let config = scratch.path("proxy.toml");
    std::fs::write(
        &config,
        format!(
            "[[upstream]]\nname = \"remote\"\nurl = {:?}\nshutdown_grace_ms = 500\n\
             headers = {{ \"x-configured\" = \"by-operator\" }}\n\n\
             [audit]\npath = {:?}\n\n{}",
            upstream.url,
            scratch.audit_log().display().to_string(),
            listen_oauth(port, &idp, "")
        ),
    )
    .unwrap();
    let proxy = NetProxy::start(&config);
    let token = idp.token(claims(port, "alice"), Some("k1"));
    let mut mcp = McpHttp::new(client(None), proxy.url("/mcp"))
        .header("authorization", &bearer(&token))
        .header("cookie", "agent-session=1");
    mcp.initialize("2025-11-25", json!({})).await;
    let (reply, _) = mcp
        .request(&json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}))
        .await;
    assert!(reply.get("result").is_some(), "{reply}");

    let seen = upstream.seen();
    assert!(
        seen.len() >= 2,
        "{} requests reached the upstream",
        seen.len()
    );
    for request in &seen {
        assert_eq!(request.header("authorization"), "", "{:?}", request.headers);
        assert_eq!(request.header("x-configured"), "by-operator");
        for value in request.headers.values() {
            assert!(
                !value.to_str().unwrap_or("").contains(&token),
                "the token reached the upstream"
            );
        }
    }
}

/// A token remembered from an earlier request is still refused once it
/// expires: the memory of accepted tokens never outlives `exp`.
#[tokio::test]
async fn a_remembered_token_is_refused_once_it_expires() {
    let scratch = Scratch::new();
    let mut idp = AuthorizationServer::start(0);
    let (proxy, port) = demo_proxy(&scratch, &idp, "leeway_s = 0");
    let url = proxy.url("/mcp");
    let token = idp.token_expiring(claims(port, "alice"), Some("k1"), 2);
    let mut mcp = McpHttp::new(client(None), url).header("authorization", &bearer(&token));
    mcp.initialize("2025-06-18", json!({})).await;
    let (reply, _) = mcp
        .request(&tool_call(2, "echo", json!({"text": "in time"})))
        .await;
    assert_eq!(reply["result"]["content"][0]["text"], "in time", "{reply}");
    tokio::time::sleep(std::time::Duration::from_millis(3200)).await;
    let response = mcp
        .post(&tool_call(3, "echo", json!({"text": "late"})))
        .await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert!(challenge(&response).contains("error=\"invalid_token\""));
}
