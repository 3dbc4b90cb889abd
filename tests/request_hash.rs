//! Every hook's audit entry carries the §8.1 `request_hash` of the exact
//! `params` its hook had, whoever links the entry: the appender itself
//! (`fsync = "always"`) or the audit writer after the message has moved on
//! (`"batch"`, `"never"`), where a short message's hooks are digested, and
//! whether the message was short or long enough to be digested at once.

mod support;

use serde_json::{json, Value};
use support::{tool_call, Proxy, Scratch};

/// Runs a short and a long call through a proxy whose audit log is synced
/// as `fsync` says and records content, and returns the log's entries.
fn entries_with(fsync: &str) -> Vec<Value> {
    let scratch = Scratch::new();
    let config = scratch.demo_config_recording_content("");
    let text = std::fs::read_to_string(&config).expect("read config");
    assert!(text.contains("fsync = \"always\""), "{text}");
    let text = text.replacen("fsync = \"always\"", &format!("fsync = \"{fsync}\""), 1);
    std::fs::write(&config, text).expect("write config");

    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    let long = "long ".repeat(4_000);
    for (id, text) in [(1, "short"), (2, long.as_str())] {
        proxy.send(&tool_call(id, "echo", json!({ "text": text })));
        let reply = proxy.response(&json!(id));
        assert_eq!(reply["result"]["content"][0]["text"], text, "{fsync}");
    }
    assert!(proxy.finish().success());
    scratch.assert_audit_verifies();
    scratch.audit_entries()
}

#[test]
fn request_hash_is_the_digest_of_the_hook_params_however_the_entry_is_linked() {
    for fsync in ["batch", "never", "always"] {
        let entries = entries_with(fsync);
        let hooks: Vec<&Value> = entries
            .iter()
            .filter(|entry| entry.get("hook_params").is_some())
            .collect();
        for step in ["steps/toolCallRequest", "steps/toolCallResult"] {
            let lengths: Vec<usize> = hooks
                .iter()
                .filter(|entry| entry["step_type"] == step)
                .map(|entry| entry["hook_params"].to_string().len())
                .collect();
            assert!(
                lengths.iter().any(|&len| len < 1_000) && lengths.iter().any(|&len| len > 16_000),
                "{fsync}: a short and a long {step}: {lengths:?}"
            );
        }
        for entry in &hooks {
            assert_eq!(
                entry["request_hash"],
                acs_proxy::jcs::value_digest(&entry["hook_params"]),
                "{fsync}: {} {}",
                entry["step_type"],
                entry["entry_id"]
            );
        }
    }
}
