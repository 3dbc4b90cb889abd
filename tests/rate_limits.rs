//! `[[policy.limit]]` through the binary: calls per interval, calls in
//! flight, and per-user quotas that span sessions.

mod support;

use serde_json::{json, Value};
use support::mcp_http::{client, McpHttp};
use support::{listen_section, tool_call, NetProxy, Proxy, Scratch};

fn echoed(reply: &Value) -> &str {
    reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

fn echo_calls_received(scratch: &Scratch) -> usize {
    scratch
        .server_received()
        .iter()
        .filter(|m| m["method"] == "tools/call" && m["params"]["name"] == "echo")
        .count()
}

#[test]
fn the_eleventh_call_of_ten_per_minute_is_refused() {
    let scratch = Scratch::new();
    let config = scratch.demo_config(
        r#"
[[policy.limit]]
name = "echo-per-user"
tool = "echo"
per = "user"
calls = 10
interval_s = 60
"#,
    );
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    for id in 2..12 {
        proxy.send(&tool_call(id, "echo", json!({"text": "ok"})));
        assert_eq!(echoed(&proxy.response(&json!(id))), "ok", "call {id}");
    }
    proxy.send(&tool_call(12, "echo", json!({"text": "one too many"})));
    let refused = proxy.response(&json!(12));
    assert_eq!(refused["error"]["code"], -32012, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("echo-per-user"), "{message}");
    assert_eq!(refused["error"]["data"]["limit"], "echo-per-user");
    let retry_after = refused["error"]["data"]["retry_after_ms"]
        .as_u64()
        .expect("retry_after_ms");
    assert!((1..=6000).contains(&retry_after), "{refused}");
    proxy.send(&tool_call(13, "add", json!({"a": 1, "b": 2})));
    assert_eq!(
        echoed(&proxy.response(&json!(13))),
        "3",
        "other tools are not limited"
    );
    assert!(proxy.finish().success());

    assert_eq!(echo_calls_received(&scratch), 10, "the refused call stayed");
    let entries = scratch.audit_entries();
    let entry = entries
        .iter()
        .find(|e| e["limit"] == "echo-per-user")
        .unwrap_or_else(|| panic!("no entry names the limit: {entries:?}"));
    assert_eq!(entry["decision"], "deny");
    assert_eq!(entry["action"], "blocked");
    assert_eq!(entry["reason_codes"], json!(["rate_limited"]));
    assert_eq!(entry["mcp_id"], 12);
    scratch.assert_audit_verifies();
}

#[test]
fn a_concurrency_limit_refuses_while_a_call_is_in_flight_and_frees_after() {
    let scratch = Scratch::new();
    let config = scratch.demo_config(
        r#"
[[policy.limit]]
name = "one-at-a-time"
hook = "protocols/MCP/tools/call"
per = "session"
concurrent = 1
"#,
    );
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(2, "slow", json!({"ms": 1500, "steps": 1})));
    proxy.send(&tool_call(3, "echo", json!({"text": "too soon"})));
    let refused = proxy.response(&json!(3));
    assert_eq!(refused["error"]["code"], -32012, "{refused}");
    assert_eq!(refused["error"]["data"]["limit"], "one-at-a-time");
    assert!(refused["error"]["data"]["retry_after_ms"].is_u64());
    let slow = proxy.response(&json!(2));
    assert!(slow.get("result").is_some(), "{slow}");
    proxy.send(&tool_call(4, "echo", json!({"text": "now"})));
    assert_eq!(echoed(&proxy.response(&json!(4))), "now");
    // Every answered call gives its place back.
    proxy.send(&tool_call(5, "echo", json!({"text": "again"})));
    assert_eq!(echoed(&proxy.response(&json!(5))), "again");
    // So does a call the agent cancels once the server has it, though the
    // server never answers a cancelled call.
    proxy.send(
        &json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {
        "name": "slow", "arguments": {"ms": 10_000, "steps": 10},
        "_meta": {"progressToken": "p6"}}}),
    );
    proxy.recv_until(|m| m["method"] == "notifications/progress");
    proxy.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 6, "reason": "changed my mind"}}),
    );
    proxy.send(&tool_call(7, "echo", json!({"text": "after cancel"})));
    assert_eq!(echoed(&proxy.response(&json!(7))), "after cancel");
    assert!(proxy.finish().success());
    scratch.assert_audit_verifies();
}

#[tokio::test]
async fn each_user_has_a_quota_that_spans_their_sessions() {
    let scratch = Scratch::new();
    let tokens = scratch.path("tokens");
    std::fs::write(&tokens, "tok-alice alice dev\ntok-bob bob dev\n").unwrap();
    let listen = listen_section(
        "http",
        &format!("auth_tokens_file = {:?}\n", tokens.display().to_string()),
    );
    let config = scratch.demo_config(&format!(
        "{listen}\n[[policy.limit]]\nname = \"two-per-user\"\ntool = \"echo\"\nper = \"user\"\ncalls = 2\ninterval_s = 3600\n"
    ));
    let proxy = NetProxy::start(&config);
    let session_of = |token: &str| {
        McpHttp::new(client(None), proxy.url("/mcp"))
            .header("authorization", &format!("Bearer {token}"))
    };

    let mut alice = session_of("tok-alice");
    alice.initialize("2025-06-18", json!({})).await;
    for id in [2, 3] {
        let (reply, _) = alice
            .request(&tool_call(id, "echo", json!({"text": "a"})))
            .await;
        assert_eq!(echoed(&reply), "a", "{reply}");
    }
    let mut alice_again = session_of("tok-alice");
    alice_again.initialize("2025-06-18", json!({})).await;
    let (refused, _) = alice_again
        .request(&tool_call(2, "echo", json!({"text": "a"})))
        .await;
    assert_eq!(refused["error"]["code"], -32012, "{refused}");
    assert_eq!(refused["error"]["data"]["limit"], "two-per-user");

    let mut bob = session_of("tok-bob");
    bob.initialize("2025-06-18", json!({})).await;
    let (reply, _) = bob
        .request(&tool_call(2, "echo", json!({"text": "b"})))
        .await;
    assert_eq!(echoed(&reply), "b", "bob has his own quota: {reply}");
    assert_eq!(echo_calls_received(&scratch), 3);
}

/// Denies `echo` once the caller's bucket of `echo-quota` is down to one
/// call: the policy sees where the caller stands before the limit refuses.
const LOW_QUOTA_REGO: &str = r#"
package acs

import rego.v1

default decision := {"decision": "allow"}

decision := {"decision": "deny", "reasoning": sprintf("%d echo calls left; saving them", [quota.remaining]), "reason_codes": ["quota_low"]} if {
    input.method == "steps/toolCallRequest"
    some quota in input.context.limits
    quota.name == "echo-quota"
    quota.remaining < 2
}
"#;

#[test]
fn a_rego_policy_reads_the_callers_limits_and_denies_when_few_calls_are_left() {
    let scratch = Scratch::new();
    std::fs::write(scratch.path("policy.rego"), LOW_QUOTA_REGO).unwrap();
    let config = scratch.demo_config(
        r#"
[policy]
engine = "rego"
rego = ["policy.rego"]

[[policy.limit]]
name = "echo-quota"
tool = "echo"
per = "session"
calls = 5
interval_s = 3600
"#,
    );
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    // Each call takes its token before the policy sees the bucket: 4, 3
    // and 2 left are fine; 1 and 0 are denied; the 6th is over the limit.
    for id in 2..5 {
        proxy.send(&tool_call(id, "echo", json!({"text": "ok"})));
        assert_eq!(echoed(&proxy.response(&json!(id))), "ok", "call {id}");
    }
    for (id, left) in [(5, 1), (6, 0)] {
        proxy.send(&tool_call(id, "echo", json!({"text": "ok"})));
        let denied = proxy.response(&json!(id));
        assert_eq!(denied["result"]["isError"], true, "{denied}");
        let text = denied["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("");
        assert!(
            text.contains(&format!("{left} echo calls left")),
            "{denied}"
        );
    }
    proxy.send(&tool_call(7, "echo", json!({"text": "ok"})));
    let refused = proxy.response(&json!(7));
    assert_eq!(refused["error"]["code"], -32012, "{refused}");
    proxy.send(&tool_call(8, "add", json!({"a": 1, "b": 2})));
    assert_eq!(echoed(&proxy.response(&json!(8))), "3", "no limit on add");
    assert!(proxy.finish().success());
    assert_eq!(echo_calls_received(&scratch), 3);
    scratch.assert_audit_verifies();
}
