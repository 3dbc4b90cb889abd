//! Secret hygiene and bounded labels: with a named bearer token and a
//! remote Guardian's key configured, traffic that includes failures and a flood
//! of invented methods leaves neither secret in the proxy's stderr (at
//! debug level), its `/metrics` or its audit log, and method labels stay
//! bounded (`other`).

mod support;

use support::free_port;

use reqwest::StatusCode;
use serde_json::json;
use support::mcp_http::{client, McpHttp, ACCEPT_BOTH};
use support::{listen_section, tool_call, NetProxy, Scratch};

#[tokio::test]
async fn secrets_stay_out_of_logs_metrics_and_audit_and_labels_stay_bounded() {
    use base64::Engine as _;
    use support::guardian::{TestGuardian, SECRET};

    let scratch = Scratch::new();
    let token = "tok-0f3c9a-very-secret-bearer";
    let tokens = scratch.path("tokens");
    // A named token: its principal goes on every hook and entry, the
    // token itself nowhere.
    std::fs::write(&tokens, format!("{token} alice admin acme\n")).unwrap();
    let guardian = TestGuardian::http(
        &scratch,
        &json!({"rules": [{"method": "steps/toolCallRequest", "tool": "get-env",
            "then": {"action": "deny", "reasoning": "no env"}}]}),
    );
    let metrics_port = free_port();
    let extra = format!(
        "{}\n[metrics]\naddress = \"127.0.0.1:{metrics_port}\"\n",
        listen_section(
            "http",
            &format!("auth_tokens_file = {:?}\n", tokens.display().to_string())
        )
    );
    let config = guardian.proxy_config(&scratch, "", &extra);
    let proxy = NetProxy::start_logging(&config, "debug");
    let url = proxy.url("/mcp");

    let mut mcp =
        McpHttp::new(client(None), url.clone()).header("authorization", &format!("Bearer {token}"));
    mcp.initialize("2025-06-18", json!({})).await;
    let (reply, _) = mcp
        .request(&tool_call(1, "echo", json!({"text": "ok"})))
        .await;
    assert_eq!(reply["result"]["content"][0]["text"], "ok");
    let (reply, _) = mcp.request(&tool_call(2, "get-env", json!({}))).await;
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    // A flood of invented methods.
    for n in 0..40 {
        let method = format!("garbage/{n}-{}", "z".repeat(n));
        let (reply, _) = mcp
            .request(&json!({"jsonrpc":"2.0","id":100 + n,"method":method}))
            .await;
        assert!(reply["error"].is_object(), "{reply}");
    }
    // Failures: a wrong token, no token, a malformed body.
    let wrong = McpHttp::new(client(None), url.clone())
        .header("authorization", "Bearer guessed-token-attempt-42");
    assert_eq!(
        wrong
            .post(&tool_call(3, "echo", json!({"text": "x"})))
            .await
            .status(),
        StatusCode::UNAUTHORIZED
    );
    let anonymous = McpHttp::new(client(None), url);
    assert_eq!(
        anonymous
            .post(&tool_call(4, "echo", json!({"text": "x"})))
            .await
            .status(),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        mcp.post_text("{not json", ACCEPT_BOTH).await.status(),
        StatusCode::BAD_REQUEST
    );

    let metrics = client(None)
        .get(format!("http://127.0.0.1:{metrics_port}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics
        .contains(r#"acs_proxy_messages_total{direction="client_to_server",method="other"}"#));
    assert!(
        metrics.contains(r#"acs_proxy_http_requests_total{route="demo",status="401"} 2"#),
        "{metrics}"
    );
    assert!(!metrics.contains("garbage"), "method labels are bounded");

    let audit = std::fs::read_to_string(scratch.audit_log()).unwrap();
    let stderr = proxy.stderr();
    let secret_forms = [
        token.to_owned(),
        "guessed-token-attempt-42".to_owned(),
        String::from_utf8_lossy(SECRET).into_owned(),
        hex::encode(SECRET),
        base64::engine::general_purpose::STANDARD.encode(SECRET),
    ];
    for secret in &secret_forms {
        for (name, text) in [
            ("stderr", &stderr),
            ("/metrics", &metrics),
            ("audit", &audit),
        ] {
            assert!(!text.contains(secret.as_str()), "{name} holds {secret:?}");
        }
    }
    assert!(
        audit.contains(r#""user_id":"alice""#),
        "the audit names the principal instead"
    );
    assert!(!audit.contains("Bearer "));
    assert!(!stderr
        .to_ascii_lowercase()
        .contains("authorization: bearer"));
    scratch.assert_audit_verifies();
}
