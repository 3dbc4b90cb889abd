//! A real MCP client over Streamable HTTP: the Python `mcp` SDK
//! (`tests/peers/mcp_client.py --url`) talks to acs-proxy's HTTP listener,
//! which spawns `@modelcontextprotocol/server-everything` over stdio for
//! the session. Progress, sampling (a server→client request), resources,
//! prompts, cancellation and a denied call all cross the HTTP side; the
//! client ends the session with DELETE and the chain is sealed.
//!
//! Peers are installed by `.ci/install-peers`; without them this test
//! fails with a message saying so.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{audit_chains, listen_section, NetProxy, Scratch};

const SAMPLING_TEXT: &str = "sampled over streamable http 41c2";

#[test]
fn python_sdk_over_streamable_http_to_server_everything() {
    let python = support::peers_python();
    let scratch = Scratch::new();
    let tokens = scratch.path("tokens");
    std::fs::write(&tokens, "py-client-token\n").unwrap();
    let rules = r#"
[[policy.rule]]
name = "no-environment-dump"
hook = "steps/toolCallRequest"
tool = "get-env"
decision = "deny"
reasoning = "dumping the server environment would expose credentials"
"#;
    let config = scratch.config(
        &support::server_everything(),
        &format!(
            "{}\n{rules}",
            listen_section(
                "http",
                &format!("auth_tokens_file = {:?}\n", tokens.display().to_string())
            )
        ),
    );
    let proxy = NetProxy::start(&config);
    let started = Instant::now();
    let output = Command::new(python)
        .arg(support::repo_root().join("tests/peers/mcp_client.py"))
        .args(["--url", &proxy.url("/mcp")])
        .args(["--header", "Authorization", "Bearer py-client-token"])
        .args(["--scenario", "full", "--sampling-text", SAMPLING_TEXT])
        .args(["--timeout", "30", "--total-timeout", "120"])
        .args(["--call", "get-env", "{}"])
        .args(["--call", "echo", r#"{"message":"through http"}"#])
        .output()
        .expect("run mcp_client.py");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the client failed: {stderr}\nproxy: {}",
        proxy.stderr()
    );
    let report: Value = support::parse(String::from_utf8_lossy(&output.stdout).trim());
    let context = || format!("report: {report:#}\nclient stderr: {stderr}");
    assert!(report.get("aborted").is_none(), "{}", context());
    assert_eq!(report["protocol_version"], "2025-11-25", "{}", context());
    let steps = &report["steps"];
    for step in [
        "initialize",
        "tools_list",
        "progress",
        "sampling",
        "resource_read",
        "prompt_get",
    ] {
        assert!(
            steps[step]["result"].is_object(),
            "step {step} failed: {}",
            context()
        );
    }
    assert!(
        steps["progress"]["progress"]
            .as_array()
            .is_some_and(|p| !p.is_empty()),
        "no progress over HTTP: {}",
        context()
    );
    assert!(
        steps["sampling"]["result"]
            .to_string()
            .contains(SAMPLING_TEXT),
        "the sampling answer did not come back: {}",
        context()
    );
    assert_eq!(
        report["sampling_requests"].as_array().map(Vec::len),
        Some(1)
    );
    let cancel = &steps["cancel"];
    assert_eq!(cancel["cancelled"], true, "{}", context());
    assert!(cancel["response_after_cancel"].is_null(), "{}", context());
    assert!(cancel["ping_after"]["result"].is_object(), "{}", context());
    let calls = report["calls"].as_array().expect("calls");
    let env = calls
        .iter()
        .find(|c| c["name"] == "get-env")
        .expect("get-env");
    assert_eq!(env["result"]["isError"], true, "{}", context());
    assert!(env["result"].to_string().contains("expose credentials"));
    let echo = calls.iter().find(|c| c["name"] == "echo").expect("echo");
    assert!(
        echo["result"].to_string().contains("through http"),
        "{}",
        context()
    );

    // The client sent DELETE on exit: the session's chain is sealed.
    let deadline = Instant::now() + support::WAIT;
    loop {
        let chains = audit_chains(&scratch);
        if chains.len() == 1 && chains[0].1 {
            break;
        }
        assert!(Instant::now() < deadline, "chain not sealed: {chains:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("python client over HTTP took {:?}", started.elapsed());
}
