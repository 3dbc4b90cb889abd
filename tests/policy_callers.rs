//! Rules keyed on the caller (`user`, `role`, `tenant`) through the
//! binary: the stdio caller from `[hooks]`, and named static tokens over
//! HTTP.

mod support;

use serde_json::{json, Value};
use support::mcp_http::{client, McpHttp};
use support::{listen_section, tool_call, NetProxy, Proxy, Scratch};

/// `restart`-like privilege on `echo`: the ops role may, anyone else is
/// denied by a later rule.
const OPS_ONLY_ECHO: &str = r#"
[[policy.rule]]
name = "ops-may-echo"
tool = "echo"
role = "ops*"
decision = "allow"

[[policy.rule]]
name = "echo-is-for-ops"
hook = "steps/toolCallRequest"
tool = "echo"
decision = "deny"
reasoning = "echo is reserved to the ops role"
"#;

fn text_of(reply: &Value) -> &str {
    reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

/// One stdio run as the caller `[hooks]` names; the reply to one echo.
fn echo_over_stdio_as(hooks: &str) -> (Value, Vec<Value>) {
    let scratch = Scratch::new();
    let config = scratch.demo_config(&format!("[hooks]\n{hooks}\n{OPS_ONLY_ECHO}"));
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(2, "echo", json!({"text": "hi"})));
    let reply = proxy.response(&json!(2));
    assert!(proxy.finish().success());
    scratch.assert_audit_verifies();
    (reply, scratch.audit_entries())
}

fn entry_of_call(entries: &[Value]) -> &Value {
    entries
        .iter()
        .find(|e| e["step_type"] == "steps/toolCallRequest")
        .unwrap_or_else(|| panic!("no steps/toolCallRequest entry: {entries:?}"))
}

#[test]
fn a_role_rule_lets_one_configured_user_call_and_denies_another() {
    let (reply, entries) =
        echo_over_stdio_as("user_id = \"carol\"\nroles = [\"dev\", \"ops-oncall\"]\n");
    assert_eq!(text_of(&reply), "hi", "{reply}");
    let entry = entry_of_call(&entries);
    assert_eq!(entry["decision"], "allow");
    assert_eq!(entry["rule"], "ops-may-echo");

    let (reply, entries) = echo_over_stdio_as("user_id = \"dave\"\nroles = [\"dev\"]\n");
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    assert!(
        text_of(&reply).contains("reserved to the ops role"),
        "{reply}"
    );
    let entry = entry_of_call(&entries);
    assert_eq!(entry["decision"], "deny");
    assert_eq!(entry["rule"], "echo-is-for-ops");
}

#[test]
fn a_tenant_rule_needs_the_callers_tenant() {
    let rules = r#"
[policy]
default = "deny"
[[policy.rule]]
name = "acme-only"
tenant = "acme"
decision = "allow"
"#;
    for (hooks, allowed) in [
        ("user_id = \"u\"\ntenant = \"acme\"\n", true),
        ("user_id = \"u\"\ntenant = \"other\"\n", false),
        ("user_id = \"u\"\n", false),
    ] {
        let scratch = Scratch::new();
        let mut proxy = Proxy::start(&scratch.demo_config(&format!("[hooks]\n{hooks}\n{rules}")));
        proxy.send(&json!({"jsonrpc":"2.0","id":1,"method":"ping"}));
        let reply = proxy.response(&json!(1));
        assert_eq!(reply.get("error").is_none(), allowed, "{hooks}: {reply}");
        proxy.close_stdin();
        proxy.wait();
    }
}

#[tokio::test]
async fn named_tokens_with_different_roles_get_different_answers() {
    let scratch = Scratch::new();
    let tokens = scratch.path("tokens");
    std::fs::write(
        &tokens,
        "# token  principal  roles  tenant\ntok-carol carol dev,ops acme\ntok-dave dave dev acme\n",
    )
    .unwrap();
    let listen = listen_section(
        "http",
        &format!("auth_tokens_file = {:?}\n", tokens.display().to_string()),
    );
    let config = scratch.demo_config(&format!("{listen}\n{OPS_ONLY_ECHO}"));
    let proxy = NetProxy::start(&config);

    let mut carol =
        McpHttp::new(client(None), proxy.url("/mcp")).header("authorization", "Bearer tok-carol");
    carol.initialize("2025-06-18", json!({})).await;
    let (reply, _) = carol
        .request(&tool_call(2, "echo", json!({"text": "from carol"})))
        .await;
    assert_eq!(text_of(&reply), "from carol", "{reply}");

    let mut dave =
        McpHttp::new(client(None), proxy.url("/mcp")).header("authorization", "Bearer tok-dave");
    dave.initialize("2025-06-18", json!({})).await;
    let (reply, _) = dave
        .request(&tool_call(2, "echo", json!({"text": "from dave"})))
        .await;
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    assert!(
        text_of(&reply).contains("reserved to the ops role"),
        "{reply}"
    );

    let received: Vec<Value> = scratch
        .server_received()
        .into_iter()
        .filter(|m| m["method"] == "tools/call")
        .collect();
    assert_eq!(received.len(), 1, "only carol's call reaches the server");
    assert_eq!(received[0]["params"]["arguments"]["text"], "from carol");
}
