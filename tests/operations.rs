//! The command line and the operations surface: metrics and health,
//! `audit verify`, `config check`, the zero-config form and the README demo.

mod support;

use support::free_port;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use support::{tool_call, Proxy, Scratch};

fn http_get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    Some(response)
}

fn wait_for_http(port: u16, path: &str) -> String {
    let deadline = Instant::now() + support::WAIT;
    loop {
        if let Some(response) = http_get(port, path) {
            return response;
        }
        assert!(Instant::now() < deadline, "nothing served on port {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn metrics_and_health_are_served() {
    let scratch = Scratch::new();
    let port = free_port();
    let config = scratch.demo_config(&format!(
        "[metrics]\naddress = \"127.0.0.1:{port}\"\n\n[[policy.rule]]\nname = \"no-env\"\nhook = \"steps/toolCallRequest\"\ntool = \"get-env\"\ndecision = \"deny\"\nreasoning = \"no\"\n"
    ));
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(2, "get-env", json!({})));
    proxy.response(&json!(2));
    proxy.send(&tool_call(3, "echo", json!({"text": "x"})));
    proxy.response(&json!(3));
    assert!(wait_for_http(port, "/healthz").starts_with("HTTP/1.1 200"));
    assert!(wait_for_http(port, "/readyz").starts_with("HTTP/1.1 200"));
    let metrics = wait_for_http(port, "/metrics");
    for needle in [
        "acs_proxy_messages_total{direction=\"client_to_server\",method=\"tools/call\"}",
        "acs_proxy_decisions_total{decision=\"deny\",hook=\"steps/toolCallRequest\",source=\"embedded\"} 1",
        "acs_proxy_decision_seconds_bucket{outcome=\"deny\",source=\"embedded\",le=",
        "acs_proxy_audit_entries_total",
        "acs_proxy_sessions_active{route=\"demo\"} 1",
        "acs_proxy_tool_call_duration_seconds_count{route=\"demo\",tool=\"echo\"} 1",
        "acs_proxy_upstream_up{route=\"demo\"} 1",
        "acs_proxy_upstream_errors_total{kind=\"connect\",route=\"demo\"} 0",
    ] {
        assert!(metrics.contains(needle), "missing {needle} in:\n{metrics}");
    }
    assert!(
        !metrics.contains("sk-demo"),
        "no payload content in metrics"
    );
    let probe = Command::new(support::proxy_bin())
        .args(["healthcheck", &format!("127.0.0.1:{port}")])
        .output()
        .unwrap();
    assert!(
        probe.status.success(),
        "{}",
        String::from_utf8_lossy(&probe.stderr)
    );
    assert!(proxy.finish().success());
    let probe = Command::new(support::proxy_bin())
        .args(["healthcheck", &format!("127.0.0.1:{port}")])
        .output()
        .unwrap();
    assert!(!probe.status.success(), "nothing listens any more");
}

/// Tool names label the latency histogram only when the server lists the
/// tool, and only up to `[metrics] max_tool_labels` of them.
#[test]
fn tool_latency_labels_are_bounded_by_the_inventory_and_the_limit() {
    let scratch = Scratch::new();
    let port = free_port();
    let config = scratch.demo_config(&format!(
        "[metrics]\naddress = \"127.0.0.1:{port}\"\nmax_tool_labels = 1\n"
    ));
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(2, "echo", json!({"text": "x"})));
    proxy.response(&json!(2));
    proxy.send(&tool_call(3, "add", json!({"a": 1, "b": 2})));
    proxy.response(&json!(3));
    proxy.send(&tool_call(4, "no-such-tool", json!({})));
    proxy.response(&json!(4));
    let metrics = wait_for_http(port, "/metrics");
    let tool_series: Vec<&str> = metrics
        .lines()
        .filter(|line| line.starts_with("acs_proxy_tool_call_duration_seconds_count"))
        .collect();
    assert_eq!(
        tool_series,
        [
            "acs_proxy_tool_call_duration_seconds_count{route=\"demo\",tool=\"echo\"} 1",
            "acs_proxy_tool_call_duration_seconds_count{route=\"demo\",tool=\"other\"} 2",
        ],
        "{metrics}"
    );
    assert!(proxy.finish().success());
}

#[test]
fn audit_verify_names_the_first_tampered_line() {
    let scratch = Scratch::new();
    let mut proxy = Proxy::start(&scratch.demo_config(""));
    proxy.initialize(json!({}));
    proxy.send(&tool_call(2, "echo", json!({"text": "x"})));
    proxy.response(&json!(2));
    assert!(proxy.finish().success());
    scratch.assert_audit_verifies();

    let log = scratch.audit_log();
    let original = std::fs::read_to_string(&log).unwrap();
    let mut lines: Vec<String> = original.lines().map(str::to_owned).collect();
    assert!(lines.len() > 4);
    lines[3] = lines[3]
        .replacen("\"forwarded\"", "\"blocked\"", 1)
        .replacen("\"recorded\"", "\"blocked\"", 1);
    std::fs::write(&log, lines.join("\n") + "\n").unwrap();
    let output = Command::new(support::proxy_bin())
        .args(["audit", "verify"])
        .arg(&log)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("line 4"), "{stderr}");

    let mut lines: Vec<&str> = original.lines().collect();
    lines.remove(2);
    std::fs::write(&log, lines.join("\n") + "\n").unwrap();
    let output = Command::new(support::proxy_bin())
        .args(["audit", "verify"])
        .arg(&log)
        .output()
        .unwrap();
    assert!(!output.status.success(), "a deleted entry must be detected");
}

#[test]
fn config_check_accepts_the_sample_and_names_the_broken_rule() {
    for sample in ["proxy.toml", "examples/stdio.toml", "docker/gateway.toml"] {
        let sample = support::repo_root().join(sample);
        let output = Command::new(support::proxy_bin())
            .args(["config", "check"])
            .arg(&sample)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let scratch = Scratch::new();
    let broken = scratch.path("broken.toml");
    std::fs::write(
        &broken,
        "[policy]\ndefault = \"allow\"\n\n[[policy.rule]]\nname = \"ok\"\nhook = \"*\"\ndecision = \"allow\"\n\n[[policy.rule]]\nname = \"bad-regex\"\nhook = \"*\"\nmatch = { pointer = \"/x\", regex = \"(unclosed\" }\ndecision = \"deny\"\nreasoning = \"r\"\n",
    )
    .unwrap();
    let output = Command::new(support::proxy_bin())
        .args(["config", "check"])
        .arg(&broken)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("broken.toml:9") && stderr.contains("bad-regex"),
        "{stderr}"
    );

    std::fs::write(&broken, "[audit]\nfsnyc = \"always\"\n").unwrap();
    let output = Command::new(support::proxy_bin())
        .args(["config", "check"])
        .arg(&broken)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&output.stderr).contains("fsnyc"));
}

#[test]
fn zero_config_form_relays_and_audits() {
    let scratch = Scratch::new();
    let audit = scratch.path("zero.jsonl");
    let mut proxy = Proxy::start_with(&[
        "--audit".into(),
        audit.display().to_string(),
        "--".into(),
        support::demo_server_bin().display().to_string(),
    ]);
    proxy.initialize(json!({}));
    proxy.send(&tool_call(2, "echo", json!({"text": "zero"})));
    assert_eq!(
        proxy.response(&json!(2))["result"]["content"][0]["text"],
        "zero"
    );
    assert!(proxy.finish().success());
    let output = Command::new(support::proxy_bin())
        .args(["audit", "verify"])
        .arg(&audit)
        .output()
        .unwrap();
    assert!(output.status.success());
}

#[test]
fn the_readme_demo_denies_one_tool_and_redacts_one_pattern() {
    let scratch = Scratch::new();
    let sample = std::fs::read_to_string(support::repo_root().join("examples/stdio.toml")).unwrap();
    let config = scratch.path("proxy.toml");
    std::fs::write(&config, sample).unwrap();
    let stdout = run_demo_session(
        Command::new(support::proxy_bin())
            .args(["--config"])
            .arg(&config)
            .args(["--audit"])
            .arg(scratch.audit_log())
            .arg("--")
            .arg(support::demo_server_bin()),
    );
    assert_demo_outcome(&stdout);
    scratch.assert_audit_verifies();
}

/// An agent starts its MCP server in a working directory of its own
/// choosing: the stdio example, unchanged and with no path overridden,
/// runs from an unrelated one. It is copied into a tree shaped like the
/// repository, whose `target/release` holds this build's demo server, so
/// the test needs no release build and leaves the checkout's
/// `acs-audit.jsonl` alone.
#[test]
fn the_stdio_example_runs_from_another_working_directory() {
    let scratch = Scratch::new();
    let checkout = scratch.path("checkout");
    let examples = checkout.join("examples");
    let release = checkout.join("target/release");
    std::fs::create_dir_all(&examples).unwrap();
    std::fs::create_dir_all(&release).unwrap();
    let config = examples.join("stdio.toml");
    std::fs::copy(support::repo_root().join("examples/stdio.toml"), &config).unwrap();
    std::os::unix::fs::symlink(
        support::demo_server_bin(),
        release.join("acs-proxy-demo-server"),
    )
    .unwrap();
    let elsewhere = scratch.path("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();

    let stdout = run_demo_session(
        Command::new(support::proxy_bin())
            .arg("--config")
            .arg(&config)
            .current_dir(&elsewhere),
    );
    assert_demo_outcome(&stdout);
    assert_log_verifies(&checkout.join("acs-audit.jsonl"));
    let stray: Vec<_> = std::fs::read_dir(&elsewhere).unwrap().collect();
    assert!(
        stray.is_empty(),
        "written to the working directory: {stray:?}"
    );
}

/// Feeds `examples/demo-session.jsonl` to the proxy `command` starts, as
/// the README does, and returns what the agent saw.
fn run_demo_session(command: &mut Command) -> String {
    let session = std::fs::read(support::repo_root().join("examples/demo-session.jsonl")).unwrap();
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&session).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// What the README promises of the demo session: `get-env` denied, the
/// SSN redacted, no secret through.
fn assert_demo_outcome(stdout: &str) {
    assert!(
        stdout.contains("Blocked by policy: dumping the server environment"),
        "{stdout}"
    );
    assert!(stdout.contains("ssn: [REDACTED SSN]"), "{stdout}");
    assert!(
        !stdout.contains("123-45-6789") && !stdout.contains("sk-demo"),
        "{stdout}"
    );
}

fn assert_log_verifies(log: &Path) {
    let output = Command::new(support::proxy_bin())
        .args(["audit", "verify"])
        .arg(log)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}: {}",
        log.display(),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `config check` shows each path as the proxy would use it: relative ones
/// against the file's directory, whatever the working directory; bare
/// program names as looked up on `PATH`; absolute ones as written.
#[test]
fn config_check_prints_the_resolved_paths() {
    let check = |file: &Path, cwd: &Path| {
        let output = Command::new(support::proxy_bin())
            .args(["config", "check"])
            .arg(file)
            .current_dir(cwd)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let stdout = String::from_utf8(output.stdout).unwrap();
        stdout
            .lines()
            .skip(1)
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let root = support::repo_root();
    let elsewhere = Scratch::new();
    let from_elsewhere = check(&root.join("examples/stdio.toml"), &elsewhere.path(""));
    let examples = root.join("examples").display().to_string();
    assert_eq!(
        from_elsewhere,
        [
            format!("  upstream.demo.command: {examples}/../target/release/acs-proxy-demo-server"),
            format!("  audit.path: {examples}/../acs-audit.jsonl"),
        ]
    );
    // As the README runs it: a path relative to the working directory.
    let from_root = check(Path::new("examples/stdio.toml"), &root);
    let physical = std::fs::canonicalize(&root).unwrap();
    let examples = physical.join("examples").display().to_string();
    assert_eq!(
        from_root,
        [
            format!("  upstream.demo.command: {examples}/../target/release/acs-proxy-demo-server"),
            format!("  audit.path: {examples}/../acs-audit.jsonl"),
        ]
    );
    assert_eq!(
        check(&root.join("docker/gateway.toml"), &elsewhere.path("")),
        [
            "  upstream.demo.command: acs-proxy-demo-server (looked up on PATH)",
            "  audit.path: /var/lib/acs-proxy/acs-audit.jsonl",
        ]
    );
}

#[test]
fn readyz_follows_the_remote_guardians_ping() {
    use support::guardian::TestGuardian;
    let scratch = Scratch::new();
    let mut guardian = TestGuardian::http(&scratch, &json!({}));
    let port = free_port();
    let config = guardian.proxy_config(
        &scratch,
        "ping_interval_ms = 100\n",
        &format!("[metrics]\naddress = \"127.0.0.1:{port}\"\n"),
    );
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    let ready = |want: &str| {
        let deadline = Instant::now() + support::WAIT;
        loop {
            let status = wait_for_http(port, "/readyz");
            if status.starts_with(want) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "readyz never became {want}: {status}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    ready("HTTP/1.1 200");
    assert!(guardian
        .records()
        .iter()
        .any(|r| r["envelope"]["method"] == "system/ping"));
    guardian.stop();
    ready("HTTP/1.1 503");
    assert!(
        wait_for_http(port, "/healthz").starts_with("HTTP/1.1 200"),
        "the process is still up"
    );
    assert!(proxy.finish().success());
}

#[tokio::test]
async fn the_sample_gateway_serves_mcp_over_http_and_enforces_its_policy() {
    use support::mcp_http::{client, McpHttp};
    let scratch = Scratch::new();
    let sample = std::fs::read_to_string(support::repo_root().join("proxy.toml")).unwrap();
    let config = sample
        .replace("address = \"127.0.0.1:8080\"", "address = \"127.0.0.1:0\"")
        .replace("address = \"127.0.0.1:9464\"", "address = \"127.0.0.1:0\"")
        .replace(
            "\"target/release/acs-proxy-demo-server\"",
            &format!("{:?}", support::demo_server_bin().display().to_string()),
        )
        .replace(
            "\"acs-audit.jsonl\"",
            &format!("{:?}", scratch.audit_log().display().to_string()),
        );
    let path = scratch.path("proxy.toml");
    std::fs::write(&path, config).unwrap();
    let mut proxy = support::NetProxy::start(&path);
    let mut mcp = McpHttp::new(client(None), proxy.url("/mcp"));
    mcp.initialize("2025-06-18", json!({})).await;
    let (denied, _) = mcp.request(&tool_call(2, "get-env", json!({}))).await;
    assert_eq!(denied["result"]["isError"], true, "{denied}");
    let (redacted, _) = mcp
        .request(&tool_call(3, "lookup-user", json!({"name": "Ada"})))
        .await;
    assert!(
        redacted.to_string().contains("[REDACTED SSN]"),
        "{redacted}"
    );
    mcp.delete().await;
    assert!(proxy.terminate().success());
    scratch.assert_audit_verifies();
}
