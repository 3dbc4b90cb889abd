//! Monitor mode through the binary: the would-be decision is audited and
//! counted while the call goes through, and the log still verifies.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{free_port, tool_call, Proxy, Scratch};

const DENY_ECHO: &str = r#"
[[policy.rule]]
name = "no-echo"
hook = "steps/toolCallRequest"
tool = "echo"
decision = "deny"
reasoning = "echo would be blocked"
reason_codes = ["trial"]
"#;

/// The body of `GET path` on the metrics listener, once it answers.
fn scrape(port: u16, path: &str) -> String {
    let deadline = Instant::now() + support::WAIT;
    loop {
        if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) {
            let request =
                format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
            let mut response = String::new();
            if stream.write_all(request.as_bytes()).is_ok()
                && stream.read_to_string(&mut response).is_ok()
            {
                return response;
            }
        }
        assert!(Instant::now() < deadline, "nothing served on port {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn echoed(reply: &Value) -> &str {
    reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

fn call_entries(entries: &[Value]) -> Vec<&Value> {
    entries
        .iter()
        .filter(|e| e["step_type"] == "steps/toolCallRequest")
        .collect()
}

#[test]
fn a_policy_in_monitor_mode_records_a_deny_and_lets_the_call_through() {
    let scratch = Scratch::new();
    let port = free_port();
    let config = scratch.demo_config(&format!(
        "[metrics]\naddress = \"127.0.0.1:{port}\"\n\n[policy]\nmode = \"monitor\"\n{DENY_ECHO}"
    ));
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(2, "echo", json!({"text": "passes"})));
    let reply = proxy.response(&json!(2));
    assert_eq!(echoed(&reply), "passes", "{reply}");
    let metrics = scrape(port, "/metrics");
    assert!(
        metrics.contains("acs_proxy_policy_monitored_total{decision=\"deny\"} 1"),
        "{metrics}"
    );
    assert!(proxy.finish().success());

    assert!(
        scratch
            .server_received()
            .iter()
            .any(|m| m["method"] == "tools/call" && m["params"]["name"] == "echo"),
        "the monitored call reached the server"
    );
    let entries = scratch.audit_entries();
    let calls = call_entries(&entries);
    assert_eq!(calls.len(), 1, "{entries:?}");
    let entry = calls[0];
    assert_eq!(entry["decision"], "allow");
    assert_eq!(entry["action"], "forwarded");
    assert_eq!(entry["enforced"], false);
    assert_eq!(
        entry["monitored"],
        json!({"decision": "deny", "rule": "no-echo", "reasoning": "echo would be blocked", "reason_codes": ["trial"]})
    );
    let others: Vec<_> = entries
        .iter()
        .filter(|e| e["step_type"] != "steps/toolCallRequest")
        .collect();
    assert!(
        others.iter().all(|e| e.get("monitored").is_none()),
        "nothing else was monitored: {others:?}"
    );
    scratch.assert_audit_verifies();
}

#[test]
fn a_rule_in_monitor_mode_is_recorded_while_enforced_rules_still_apply() {
    let scratch = Scratch::new();
    let rules = format!(
        "{}\n{}",
        DENY_ECHO.replace(
            "decision = \"deny\"",
            "mode = \"monitor\"\ndecision = \"deny\""
        ),
        r#"
[[policy.rule]]
name = "no-env"
hook = "steps/toolCallRequest"
tool = "get-env"
decision = "deny"
reasoning = "the environment stays private"
"#
    );
    let mut proxy = Proxy::start(&scratch.demo_config(&rules));
    proxy.initialize(json!({}));
    proxy.send(&tool_call(2, "echo", json!({"text": "passes"})));
    assert_eq!(echoed(&proxy.response(&json!(2))), "passes");
    proxy.send(&tool_call(3, "get-env", json!({})));
    let denied = proxy.response(&json!(3));
    assert_eq!(denied["result"]["isError"], true, "{denied}");
    assert!(proxy.finish().success());

    let entries = scratch.audit_entries();
    let calls = call_entries(&entries);
    assert_eq!(calls.len(), 2, "{entries:?}");
    assert_eq!(calls[0]["decision"], "allow");
    assert_eq!(calls[0]["enforced"], false);
    assert_eq!(calls[0]["monitored"]["rule"], "no-echo");
    assert_eq!(calls[1]["decision"], "deny");
    assert_eq!(calls[1]["rule"], "no-env");
    assert!(calls[1].get("enforced").is_none(), "{}", calls[1]);
    scratch.assert_audit_verifies();
}
