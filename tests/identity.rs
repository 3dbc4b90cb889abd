//! Who is calling, end to end: the caller a listener authenticated (a named
//! static token over Streamable HTTP, the OS user over stdio) is in every
//! hook a remote Guardian receives (`metadata.user_context`,
//! `params.tenant_id`, `user_identity` on `steps/sessionStart`), on every
//! audit entry of the session, and bound to the session; the token itself
//! is nowhere.

mod support;

use reqwest::StatusCode;
use serde_json::{json, Value};
use support::guardian::TestGuardian;
use support::mcp_http::{client, McpHttp};
use support::{listen_section, tool_call, NetProxy, Proxy, Scratch};

const ALICE_TOKEN: &str = "alice-4f0c2a9e7b1d4c8e9a3b5f6d7e8c9b0a";
const BOB_TOKEN: &str = "bob-0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a";

/// A tokens file naming two principals, and the `[listen]` keys using it.
fn named_tokens(scratch: &Scratch) -> String {
    let tokens = scratch.path("tokens");
    std::fs::write(
        &tokens,
        format!(
            "# token  principal  roles  tenant\n{ALICE_TOKEN} alice admin,ops acme\n{BOB_TOKEN} bob - globex\n"
        ),
    )
    .unwrap();
    format!("auth_tokens_file = {:?}\n", tokens.display().to_string())
}

fn session_as(proxy: &NetProxy, token: &str) -> McpHttp {
    McpHttp::new(client(None), proxy.url("/mcp"))
        .header("authorization", &format!("Bearer {token}"))
}

#[tokio::test]
async fn a_named_token_is_the_caller_of_every_hook_and_every_entry() {
    let scratch = Scratch::new();
    let guardian = TestGuardian::http(&scratch, &json!({}));
    let listen = listen_section("http", &named_tokens(&scratch));
    let config = guardian.proxy_config(&scratch, "", &listen);
    let mut proxy = NetProxy::start(&config);

    let mut alice = session_as(&proxy, ALICE_TOKEN);
    alice.initialize("2025-06-18", json!({})).await;
    let (reply, _) = alice
        .request(&tool_call(2, "echo", json!({"text": "hi"})))
        .await;
    assert_eq!(reply["result"]["content"][0]["text"], "hi", "{reply}");

    // Bob may not use Alice's session: it does not exist for him.
    let mut bob = session_as(&proxy, BOB_TOKEN);
    bob.session = alice.session.clone();
    bob.version = alice.version.clone();
    let response = bob
        .post(&tool_call(3, "echo", json!({"text": "mine now"})))
        .await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);

    assert_eq!(alice.delete().await, StatusCode::NO_CONTENT);
    support::audit_chains_once(&scratch, |chains| chains.iter().any(|(_, sealed)| *sealed));
    let stderr = proxy.stderr();
    proxy.terminate();

    let hooks = guardian.hook_records();
    assert!(!hooks.is_empty());
    for record in &hooks {
        let params = &record["envelope"]["params"];
        assert_eq!(
            params["metadata"]["user_context"],
            json!({"user_id": "alice", "roles": ["admin", "ops"], "authentication_method": "api_token"}),
            "{record}"
        );
        assert_eq!(params["tenant_id"], "acme", "{record}");
    }
    let start = hooks
        .iter()
        .find(|r| r["envelope"]["method"] == "steps/sessionStart")
        .expect("a sessionStart hook");
    assert_eq!(
        start["envelope"]["params"]["payload"]["user_identity"],
        json!({"type": "api_token", "name": "alice", "roles": ["admin", "ops"], "tenant_id": "acme"})
    );

    let (edge, entries): (Vec<Value>, Vec<Value>) =
        scratch.audit_entries().into_iter().partition(|entry| {
            entry["session_id"]
                .as_str()
                .is_some_and(|id| id.starts_with("edge-"))
        });
    let refused = &edge[0];
    assert_eq!(
        refused["user_id"], "bob",
        "the 404 names who asked: {refused}"
    );
    assert!(!entries.is_empty());
    for entry in &entries {
        assert_eq!(entry["user_id"], "alice", "{entry}");
        assert_eq!(entry["authentication_method"], "api_token", "{entry}");
        assert_eq!(entry["tenant_id"], "acme", "{entry}");
    }
    scratch.assert_audit_verifies();

    let audit = std::fs::read_to_string(scratch.audit_log()).unwrap();
    let record = std::fs::read_to_string(scratch.path("guardian-record.jsonl")).unwrap_or_default();
    for token in [ALICE_TOKEN, BOB_TOKEN] {
        assert!(!audit.contains(token), "a token in the audit log");
        assert!(!record.contains(token), "a token sent to the Guardian");
        assert!(!stderr.contains(token), "a token in the logs");
    }
}

#[test]
fn over_stdio_the_caller_is_the_os_user_or_the_configured_one() {
    let uid = nix_uid();
    let scratch = Scratch::new();
    let config = scratch.demo_config_recording_content("");
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(1, "echo", json!({"text": "x"})));
    proxy.response(&json!(1));
    assert!(proxy.finish().success());
    let entries = scratch.audit_entries();
    let start = support::entries_of(&entries, "steps/sessionStart")[0];
    let identity = &start["hook_params"]["payload"]["user_identity"];
    assert_eq!(identity["type"], "posix_uid", "{start}");
    assert_eq!(identity["uid"], uid);
    for entry in &entries {
        assert_eq!(entry["authentication_method"], "posix", "{entry}");
        if let Some(params) = entry.get("hook_params") {
            assert_eq!(
                params["metadata"]["user_context"]["authentication_method"],
                "posix"
            );
        }
    }

    let scratch = Scratch::new();
    let config = scratch.demo_config_recording_content(
        "[hooks]\nuser_id = \"ci-bot\"\nroles = [\"deployer\"]\ntenant = \"acme\"\n",
    );
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    assert!(proxy.finish().success());
    let entries = scratch.audit_entries();
    for entry in &entries {
        assert_eq!(entry["user_id"], "ci-bot", "{entry}");
        assert_eq!(entry["tenant_id"], "acme", "{entry}");
        if let Some(params) = entry.get("hook_params") {
            assert_eq!(
                params["metadata"]["user_context"],
                json!({"user_id": "ci-bot", "roles": ["deployer"], "authentication_method": "configured"})
            );
            assert_eq!(params["tenant_id"], "acme");
        }
    }
    scratch.assert_audit_verifies();
}

/// The real user id of this process (`/proc/self/status`, `Uid:` line).
fn nix_uid() -> Value {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let uid: u32 = status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|uid| uid.parse().ok())
        .unwrap();
    Value::from(uid)
}
