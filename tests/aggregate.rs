//! Several servers behind one endpoint: an `[[aggregate]]` of
//! `@modelcontextprotocol/server-everything`, `@modelcontextprotocol/server-filesystem`
//! and the demo server, driven by the Python `mcp` SDK client over
//! Streamable HTTP and over stdio, and by hand over stdio where a test
//! needs to act between two messages (an upstream killed mid-call).
//!
//! Peers are installed by `.ci/install-peers`; without them these tests
//! fail with a message saying so.

mod support;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{listen_section, NetProxy, Proxy, Scratch};

/// A rule that denies one upstream's tool by the name the agent calls it.
const DEMO_ENV_PRIVATE: &str = r#"[[policy.rule]]
name = "demo-env-private"
hook = "steps/toolCallRequest"
tool = "demo__get-env"
decision = "deny"
reasoning = "the demo server's environment stays private"
"#;

const SAMPLING_TEXT: &str = "sampled for the demo upstream 7f3a";

/// The three upstreams and an aggregate `all` of them, with `extra` after.
fn aggregate_config(scratch: &Scratch, aggregate: &str, extra: &str) -> PathBuf {
    let files = scratch.path("files");
    std::fs::create_dir_all(&files).unwrap();
    std::fs::write(files.join("hello.txt"), "hello from the filesystem\n").unwrap();
    let demo = vec![
        support::demo_server_bin().display().to_string(),
        "--page-size".into(),
        "3".into(),
    ];
    let text = format!(
        "{}{}{}[[aggregate]]\nname = \"all\"\nupstreams = [\"everything\", \"files\", \"demo\"]\n{aggregate}\n\n\
         [audit]\npath = {:?}\nfsync = \"always\"\n\n{extra}\n",
        upstream("everything", &support::server_everything()),
        upstream("files", &support::server_filesystem(&files)),
        upstream("demo", &demo),
        scratch.audit_log().display().to_string(),
    );
    let path = scratch.path("proxy.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn upstream(name: &str, command: &[String]) -> String {
    let command: Vec<String> = command.iter().map(|arg| format!("{arg:?}")).collect();
    format!(
        "[[upstream]]\nname = {name:?}\ncommand = [{}]\nshutdown_grace_ms = 500\n\n",
        command.join(", ")
    )
}

/// Runs `mcp_client.py` with `args`; its JSON report.
fn client(args: &[&str]) -> (Value, String) {
    let output: Output = Command::new(support::peers_python())
        .arg(support::repo_root().join("tests/peers/mcp_client.py"))
        .args(args)
        .output()
        .expect("run mcp_client.py");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "the client failed: {stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    (support::parse(stdout.trim()), stderr)
}

fn call<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["calls"]
        .as_array()
        .and_then(|calls| calls.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no call of {name}: {report:#}"))
}

fn text_of(record: &Value) -> String {
    record["result"]["content"].to_string()
}

fn names(report: &Value, list: &str) -> Vec<String> {
    report["steps"]["all_lists"][list]["names"]
        .as_array()
        .unwrap_or_else(|| panic!("no {list} listed: {report:#}"))
        .iter()
        .filter_map(|n| n.as_str().map(str::to_owned))
        .collect()
}

#[test]
fn three_servers_behind_one_http_endpoint() {
    let scratch = Scratch::new();
    let rules = format!(
        r#"
[[policy.rule]]
name = "read-only-files"
hook = "steps/toolCallRequest"
tool = "write_file"
decision = "deny"
reasoning = "the filesystem is read-only for agents"

{DEMO_ENV_PRIVATE}"#
    );
    let config = aggregate_config(
        &scratch,
        "",
        &format!("{}\n{rules}", listen_section("http", "")),
    );
    // Hook payloads are recorded, so the snapshot's components can be read.
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replacen("\n[audit]\n", "\n[audit]\nrecord_content = true\n", 1),
    )
    .unwrap();
    let proxy = NetProxy::start(&config);
    let hello = scratch.path("files/hello.txt").display().to_string();
    let read_args = json!({ "path": hello }).to_string();
    let write_args = json!({ "path": scratch.path("files/new.txt"), "content": "x" }).to_string();
    // The only route: served at /mcp.
    let (report, stderr) = client(&[
        "--url",
        &proxy.url("/mcp"),
        "--scenario",
        "full",
        "--list-all",
        "--sampling-text",
        SAMPLING_TEXT,
        "--progress-tool",
        "everything__trigger-long-running-operation",
        "--progress-args",
        r#"{"duration": 1, "steps": 3}"#,
        "--sampling-tool",
        "demo__sample",
        "--sampling-args",
        r#"{"prompt": "hello"}"#,
        "--slow-tool",
        "demo__slow",
        "--slow-args",
        r#"{"ms": 10000, "steps": 10}"#,
        "--resource",
        "demo://readme",
        "--prompt",
        "demo__greeting",
        "--prompt-args",
        r#"{"name": "Ada"}"#,
        "--timeout",
        "30",
        "--total-timeout",
        "120",
        "--call",
        "files__read_text_file",
        &read_args,
        "--call",
        "files__write_file",
        &write_args,
        "--call",
        "demo__echo",
        r#"{"text": "through the aggregate"}"#,
        "--call",
        "everything__echo",
        r#"{"message": "from everything"}"#,
        "--call",
        "demo__get-env",
        "{}",
        "--call",
        "everything__get-env",
        "{}",
    ]);
    let context = || {
        format!(
            "report: {report:#}\nclient: {stderr}\nproxy: {}",
            proxy.stderr()
        )
    };
    assert!(report.get("aborted").is_none(), "{}", context());
    assert_eq!(report["server_info"]["name"], "all", "{}", context());

    // Merged lists: every upstream's tools under its prefix; the demo
    // server's (listed three at a time) arrive over several pages.
    let tools = names(&report, "tools");
    for expected in [
        "everything__echo",
        "everything__trigger-sampling-request",
        "files__read_text_file",
        "files__write_file",
        "demo__echo",
        "demo__slow",
        "demo__change-tools",
    ] {
        assert!(
            tools.contains(&expected.to_owned()),
            "{expected} missing: {tools:?}"
        );
    }
    assert!(
        report["steps"]["all_lists"]["tools"]["pages"].as_u64() > Some(1),
        "the demo server's pages were not followed: {}",
        context()
    );
    assert_eq!(
        tools.iter().filter(|t| *t == "demo__echo").count(),
        1,
        "a tool listed twice: {tools:?}"
    );
    let prompts = names(&report, "prompts");
    assert!(
        prompts.contains(&"demo__greeting".to_owned()),
        "{prompts:?}"
    );
    let resources = names(&report, "resources");
    assert!(
        resources.contains(&"demo://readme".to_owned()),
        "{resources:?}"
    );

    // Progress from everything, sampling asked by the demo server.
    let steps = &report["steps"];
    assert!(
        steps["progress"]["progress"]
            .as_array()
            .is_some_and(|p| !p.is_empty()),
        "no progress: {}",
        context()
    );
    assert!(
        steps["sampling"]["result"]
            .to_string()
            .contains(SAMPLING_TEXT),
        "the sampling answer did not reach the demo server: {}",
        context()
    );
    let sampling = report["sampling_requests"].as_array().expect("sampling");
    assert_eq!(sampling.len(), 1, "{}", context());
    assert!(
        sampling[0]["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("demo:")),
        "the sampling request's id does not name its upstream: {}",
        context()
    );
    assert!(
        steps["resource_read"]["result"]
            .to_string()
            .contains("demo"),
        "{}",
        context()
    );
    assert!(
        steps["prompt_get"]["result"].to_string().contains("Ada"),
        "{}",
        context()
    );
    let cancel = &steps["cancel"];
    assert_eq!(cancel["cancelled"], true, "{}", context());
    assert!(cancel["response_after_cancel"].is_null(), "{}", context());

    // Calls routed by prefix and decided per upstream.
    assert!(
        text_of(call(&report, "files__read_text_file")).contains("hello from the filesystem"),
        "{}",
        context()
    );
    let denied = call(&report, "files__write_file");
    assert_eq!(denied["result"]["isError"], true, "{}", context());
    assert!(
        denied["result"].to_string().contains("read-only"),
        "{}",
        context()
    );
    assert!(!scratch.path("files/new.txt").exists());
    assert!(
        text_of(call(&report, "demo__echo")).contains("through the aggregate"),
        "{}",
        context()
    );
    assert!(
        text_of(call(&report, "everything__echo")).contains("from everything"),
        "{}",
        context()
    );

    // A rule naming the agent's name selects one upstream's tool only.
    let demo_env = call(&report, "demo__get-env");
    assert_eq!(demo_env["result"]["isError"], true, "{}", context());
    assert!(
        demo_env["result"].to_string().contains("stays private"),
        "{}",
        context()
    );
    let everything_env = call(&report, "everything__get-env");
    assert_ne!(everything_env["result"]["isError"], true, "{}", context());

    // Each upstream has its own audit chain, whose every entry names it.
    // The virtual server's own chain is sealed once the client's session
    // has ended and every upstream's with it.
    wait_for("the virtual server's session end", || {
        scratch
            .audit_entries()
            .iter()
            .any(|e| e["step_type"] == "steps/sessionEnd" && !e["upstream"].is_string())
    });
    let entries = scratch.audit_entries();
    for upstream in ["everything", "files", "demo"] {
        let starts = entries
            .iter()
            .filter(|e| e["step_type"] == "steps/sessionStart" && e["upstream"] == upstream)
            .count();
        assert_eq!(starts, 1, "no session start names {upstream}");
    }
    // The virtual server's own session names no upstream: it starts, sends
    // the one snapshot of every upstream, and ends.
    let own: Vec<&Value> = entries
        .iter()
        .filter(|e| !e["upstream"].is_string())
        .collect();
    let steps: Vec<&str> = own.iter().filter_map(|e| e["step_type"].as_str()).collect();
    assert_eq!(
        steps,
        ["steps/sessionStart", "agbom/snapshot", "steps/sessionEnd"],
        "{own:#?}"
    );
    assert!(own.iter().all(|e| e["session_id"] == own[0]["session_id"]));
    assert_one_snapshot_of_every_upstream(&entries);
    let denial = entries
        .iter()
        .find(|e| e["decision"] == "deny" && e["rule"] == "read-only-files")
        .expect("the denial is audited");
    assert_eq!(denial["upstream"], "files", "{denial:#}");
}

/// The audit log holds one `agbom/snapshot`, whose components are every
/// upstream (each its own `mcp_server`) and their tools.
fn assert_one_snapshot_of_every_upstream(entries: &[Value]) {
    let snapshots: Vec<&Value> = entries
        .iter()
        .filter(|e| e["step_type"] == "agbom/snapshot")
        .collect();
    assert_eq!(snapshots.len(), 1, "{snapshots:#?}");
    let components = snapshots[0]["hook_params"]["payload"]["components"]
        .as_array()
        .unwrap_or_else(|| panic!("no components recorded: {:#}", snapshots[0]));
    let component = |id: &str| {
        components
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("no component {id}: {components:#?}"))
    };
    for (upstream, tool) in [
        ("everything", "echo"),
        ("files", "read_text_file"),
        ("demo", "echo"),
    ] {
        let server = component(&format!("mcp_server:{upstream}"));
        assert_eq!(server["type"], "mcp_server");
        assert_eq!(server["route"], upstream);
        let tool_id = format!("tool:{upstream}/{tool}");
        assert!(
            server["mcp_server_fields"]["tools"]
                .as_array()
                .is_some_and(|tools| tools.iter().any(|t| *t == tool_id.as_str())),
            "{server:#}"
        );
        assert_eq!(component(&tool_id)["name"], tool);
    }
}

const PER_UPSTREAM: &str = r#"
package acs

import rego.v1

call if input.method == "steps/toolCallRequest"

decision := {"decision": "deny", "reasoning": "everything's environment stays private"} if {
    call
    input.context.route == "everything"
    input.params.payload.tool.name == "get-env"
}

decision := {"decision": "deny", "reasoning": "lookups are not for this agent"} if {
    call
    input.context.aggregate == "all"
    input.context.called_as == "demo__lookup-user"
}
"#;

#[test]
fn stdio_aggregate_decides_per_upstream_and_keeps_resource_uris() {
    let scratch = Scratch::new();
    std::fs::write(scratch.path("policy.rego"), PER_UPSTREAM).unwrap();
    let config = aggregate_config(
        &scratch,
        "",
        "[policy]\nengine = \"rego\"\nrego = [\"policy.rego\"]\n",
    );
    let proxy = support::proxy_bin().display().to_string();
    let config = config.display().to_string();
    let document = "demo://resource/static/document/architecture.md";
    let (report, stderr) = client(&[
        "--scenario",
        "calls",
        "--list-all",
        "--subscribe",
        document,
        "--await-notification",
        "notifications/resources/updated",
        "--call",
        "everything__get-env",
        "{}",
        "--call",
        "demo__get-env",
        "{}",
        "--call",
        "demo__lookup-user",
        r#"{"name": "Ada"}"#,
        "--call",
        "everything__toggle-subscriber-updates",
        "{}",
        "--",
        &proxy,
        "--config",
        &config,
    ]);
    let context = || format!("report: {report:#}\nclient: {stderr}");
    assert!(report.get("aborted").is_none(), "{}", context());
    let denied = call(&report, "everything__get-env");
    assert_eq!(denied["result"]["isError"], true, "{}", context());
    assert!(
        denied["result"].to_string().contains("stays private"),
        "{}",
        context()
    );
    let allowed = call(&report, "demo__get-env");
    assert_ne!(allowed["result"]["isError"], true, "{}", context());
    assert!(text_of(allowed).contains("DEMO_MODE"), "{}", context());
    let by_agent_name = call(&report, "demo__lookup-user");
    assert_eq!(by_agent_name["result"]["isError"], true, "{}", context());

    // Resources keep their URIs; a subscription reaches the upstream that
    // listed the URI and its updates come back unchanged.
    let resources = names(&report, "resources");
    assert!(resources.contains(&document.to_owned()), "{resources:?}");
    assert!(
        report["steps"]["subscribe"]["result"].is_object(),
        "{}",
        context()
    );
    let updated = &report["steps"]["awaited"]["notification"];
    assert_eq!(updated["params"]["uri"], document, "{}", context());
    scratch.assert_audit_verifies();
}

#[test]
fn a_routed_call_keeps_the_agents_id_where_the_upstream_writes_it_back_unchanged() {
    let scratch = Scratch::new();
    let config = aggregate_config(&scratch, "", "");
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    proxy.response(&json!(2));
    let calls = [
        (json!(17), "plain"),
        (json!("call-8"), "string"),
        (json!("café-9"), "beyond ASCII"),
    ];
    for (id, text) in calls {
        let mut call = support::tool_call(0, "demo__echo", json!({ "text": text }));
        call["id"] = id.clone();
        proxy.send(&call);
        let answer = proxy.response(&id);
        assert!(answer.to_string().contains(text), "{answer:#}");
    }
    assert!(proxy.finish().success());
    scratch.assert_audit_verifies();
    // The demo upstream's own chain names the ids the agent used, except
    // the one a JSON writer may escape, which went under an id of the
    // gateway's.
    let entries = scratch.audit_entries();
    let ids: Vec<&Value> = support::entries_of(&entries, "steps/toolCallRequest")
        .into_iter()
        .filter(|e| e["upstream"] == "demo")
        .map(|e| &e["mcp_id"])
        .collect();
    assert!(ids.contains(&&json!(17)), "{ids:?}");
    assert!(ids.contains(&&json!("call-8")), "{ids:?}");
    assert!(
        ids.iter().any(|id| id
            .as_str()
            .is_some_and(|id| id.starts_with("acs-aggregate-"))),
        "{ids:?}"
    );
}

/// The demo server child of the proxy `parent`.
fn demo_child(parent: u32) -> Option<u32> {
    let children =
        std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children")).ok()?;
    children
        .split_whitespace()
        .filter_map(|pid| pid.parse::<u32>().ok())
        .find(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmdline| cmdline.contains("acs-proxy-demo-server"))
        })
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + support::WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_upstream_killed_mid_call_loses_its_tools_and_the_others_keep_serving() {
    let scratch = Scratch::new();
    // The dead upstream stays down for the length of the test.
    let config = aggregate_config(
        &scratch,
        "restart_backoff_ms = 60000\nrestart_max_backoff_ms = 60000",
        "",
    );
    let mut proxy = Proxy::start(&config);
    let init = proxy.initialize(json!({}));
    assert_eq!(init["result"]["serverInfo"]["name"], "all", "{init:#}");
    proxy.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let listed = proxy.response(&json!(2));
    assert!(listed.to_string().contains("demo__echo"), "{listed:#}");

    proxy.send(&support::tool_call(3, "demo__slow", json!({"ms": 20000})));
    let mut demo = None;
    wait_for("the demo server", || {
        demo = demo_child(proxy.pid());
        demo.is_some()
    });
    // Give the call time to reach the server before it is killed.
    std::thread::sleep(Duration::from_millis(500));
    let pid = nix::unistd::Pid::from_raw(demo.unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();

    let (failed, before) = proxy.recv_until(|m| m["id"] == 3);
    assert_eq!(failed["error"]["code"], -32011, "{failed:#}");
    let mut seen = before;
    proxy.send(&support::tool_call(
        4,
        "everything__echo",
        json!({"message": "still here"}),
    ));
    let (echo, more) = proxy.recv_until(|m| m["id"] == 4);
    seen.extend(more);
    assert!(echo.to_string().contains("still here"), "{echo:#}");
    proxy.send(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}));
    let (listed, more) = proxy.recv_until(|m| m["id"] == 5);
    seen.extend(more);
    assert!(
        seen.iter()
            .any(|m| m["method"] == "notifications/tools/list_changed"),
        "no list_changed: {seen:#?}"
    );
    let text = listed.to_string();
    assert!(
        !text.contains("demo__"),
        "the dead upstream's tools are still listed: {text}"
    );
    assert!(text.contains("files__read_text_file"), "{text}");
    proxy.send(&support::tool_call(
        6,
        "demo__echo",
        json!({"text": "gone"}),
    ));
    let gone = proxy.response(&json!(6));
    assert_eq!(gone["error"]["code"], -32011, "{gone:#}");
    assert!(proxy.finish().success());
    scratch.assert_audit_verifies();
    // The Guardian was told the upstream's components are gone.
    let entries = scratch.audit_entries();
    assert!(
        entries
            .iter()
            .any(|e| e["step_type"] == "agbom/changed" && e["upstream"] == "demo"),
        "no agbom/changed for the dead upstream"
    );
}

#[test]
fn a_killed_upstream_comes_back_in_the_same_session() {
    let scratch = Scratch::new();
    let config = aggregate_config(
        &scratch,
        "restart_backoff_ms = 200\nrestart_max_backoff_ms = 1000",
        "",
    );
    // Hook payloads are recorded, so the reasons of the changes can be read.
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replacen("\n[audit]\n", "\n[audit]\nrecord_content = true\n", 1),
    )
    .unwrap();
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    assert!(proxy.response(&json!(2)).to_string().contains("demo__echo"));
    let mut first = None;
    wait_for("the demo server", || {
        first = demo_child(proxy.pid());
        first.is_some()
    });
    let first = first.unwrap();
    let pid = nix::unistd::Pid::from_raw(first as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();

    // The loss, then the return, each announced with a `list_changed`.
    let is_list_changed = |m: &Value| m["method"] == "notifications/tools/list_changed";
    proxy.recv_until(is_list_changed);
    let mut id = 10;
    let mut announced = false;
    loop {
        if !announced {
            proxy.recv_until(is_list_changed);
        }
        proxy.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}));
        let (listed, before) = proxy.recv_until(|m| m["id"] == id);
        if listed.to_string().contains("demo__echo") {
            break;
        }
        announced = before.iter().any(is_list_changed);
        id += 1;
    }
    let second = demo_child(proxy.pid()).expect("a new demo server");
    assert_ne!(first, second);
    proxy.send(&support::tool_call(
        3,
        "demo__echo",
        json!({"text": "back again"}),
    ));
    let echo = proxy.response(&json!(3));
    assert!(echo.to_string().contains("back again"), "{echo:#}");
    assert!(proxy.finish().success());
    scratch.assert_audit_verifies();

    // The Guardian was told, by each of the upstream's two sessions, that
    // its components went and came back.
    let entries = scratch.audit_entries();
    let changes: Vec<&Value> = entries
        .iter()
        .filter(|e| e["step_type"] == "agbom/changed" && e["upstream"] == "demo")
        .collect();
    let with_reason = |reason: &str| {
        changes
            .iter()
            .find(|e| e.to_string().contains(reason))
            .unwrap_or_else(|| panic!("no agbom/changed for {reason}: {changes:#?}"))
    };
    let (loss, back) = (
        with_reason("server_exited"),
        with_reason("server_restarted"),
    );
    assert_ne!(loss["session_id"], back["session_id"]);
    assert!(back.to_string().contains("tool:demo/echo"), "{back:#}");
}

/// A demo upstream `steady` and an upstream `late` that fails its first
/// start and serves from the second on, with a short restart backoff and
/// `extra` after.
fn late_start_config(scratch: &Scratch, extra: &str) -> PathBuf {
    let demo = support::demo_server_bin().display().to_string();
    let started_once = scratch.path("started-once");
    let script = format!(
        "if [ -e {0:?} ]; then exec {demo:?}; else touch {0:?}; exit 3; fi",
        started_once.display().to_string()
    );
    let text = format!(
        "{}{}[[aggregate]]\nname = \"all\"\nupstreams = [\"steady\", \"late\"]\n\
         restart_backoff_ms = 100\nrestart_max_backoff_ms = 500\n\n[audit]\npath = {:?}\n\n{extra}\n",
        upstream("steady", std::slice::from_ref(&demo)),
        upstream("late", &["sh".into(), "-c".into(), script]),
        scratch.audit_log().display().to_string(),
    );
    let config = scratch.path("proxy.toml");
    std::fs::write(&config, text).unwrap();
    config
}

/// The demo server children of the proxy `parent`.
fn demo_children(parent: u32) -> usize {
    let children = std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children"))
        .unwrap_or_default();
    children
        .split_whitespace()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmdline| cmdline.contains("acs-proxy-demo-server"))
        })
        .count()
}

#[test]
fn an_upstream_that_did_not_start_joins_the_session_later() {
    let scratch = Scratch::new();
    let config = late_start_config(&scratch, "");
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&support::tool_call(
        2,
        "late__echo",
        json!({"text": "early"}),
    ));
    let is_list_changed = |m: &Value| m["method"] == "notifications/tools/list_changed";
    let (early, before) = proxy.recv_until(|m| m["id"] == 2);
    // Unless it already came back, the call found it down.
    if early.get("error").is_some() {
        assert_eq!(early["error"]["code"], -32011, "{early:#}");
        if !before.iter().any(is_list_changed) {
            proxy.recv_until(is_list_changed);
        }
    }
    proxy.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}));
    let listed = proxy.response(&json!(3)).to_string();
    assert!(
        listed.contains("late__echo") && listed.contains("steady__echo"),
        "{listed}"
    );
    proxy.send(&support::tool_call(
        4,
        "late__echo",
        json!({"text": "joined"}),
    ));
    let joined = proxy.response(&json!(4));
    assert!(joined.to_string().contains("joined"), "{joined:#}");
    assert!(proxy.finish().success());
    scratch.assert_audit_verifies();
}

#[test]
fn a_return_the_guardian_refuses_stays_out() {
    let scratch = Scratch::new();
    let config = late_start_config(
        &scratch,
        "[[policy.rule]]\nname = \"frozen\"\nhook = \"agbom/changed\"\n\
         decision = \"deny\"\nreasoning = \"no new components\"\n",
    );
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    // The return is decided, denied, and its server shut down.
    wait_for("the refused return", || {
        scratch.audit_entries().iter().any(|e| {
            e["step_type"] == "agbom/changed" && e["upstream"] == "late" && e["decision"] == "deny"
        })
    });
    wait_for("the refused server to be shut down", || {
        demo_children(proxy.pid()) == 1
    });
    proxy.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let listed = proxy.response(&json!(2)).to_string();
    assert!(
        listed.contains("steady__echo") && !listed.contains("late__"),
        "{listed}"
    );
    proxy.send(&support::tool_call(3, "late__echo", json!({"text": "x"})));
    assert_eq!(proxy.response(&json!(3))["error"]["code"], -32011);
    assert!(proxy.finish().success());
    scratch.assert_audit_verifies();
}

#[test]
fn a_prefix_conflict_is_refused_at_start_up() {
    let scratch = Scratch::new();
    let config = aggregate_config(&scratch, "prefix = \"never\"", "");
    let output = Command::new(support::proxy_bin())
        .arg("--config")
        .arg(&config)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "started despite a conflict: {stderr}"
    );
    assert!(stderr.contains("prefix = \"never\""), "{stderr}");
    // server-everything and the demo server both offer `echo` and `get-env`.
    assert!(
        stderr.contains("of upstream \"everything\"") && stderr.contains("of upstream \"demo\""),
        "the conflict does not name both tools: {stderr}"
    );
}

#[test]
fn without_a_conflict_never_keeps_the_servers_names() {
    let scratch = Scratch::new();
    // Only the filesystem server's tools and the demo server's `slow`: no two share a name.
    let config = aggregate_config(
        &scratch,
        "prefix = \"never\"\ntools = [\"files__*\", \"demo__slow\"]",
        "",
    );
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    let mut names = Vec::new();
    let mut cursor: Option<Value> = None;
    for id in 2..20 {
        let mut request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": {}});
        if let Some(cursor) = &cursor {
            request["params"]["cursor"] = cursor.clone();
        }
        proxy.send(&request);
        let page = proxy.response(&json!(id));
        for tool in page["result"]["tools"].as_array().expect("tools") {
            names.push(tool["name"].as_str().unwrap().to_owned());
        }
        cursor = page["result"].get("nextCursor").cloned();
        if cursor.is_none() {
            break;
        }
    }
    assert!(names.contains(&"read_text_file".to_owned()), "{names:?}");
    assert!(names.contains(&"slow".to_owned()), "{names:?}");
    assert!(
        !names.iter().any(|n| n == "echo" || n.contains("__")),
        "{names:?}"
    );
    proxy.send(&support::tool_call(30, "slow", json!({"ms": 1})));
    let slow = proxy.response(&json!(30));
    assert!(slow["result"].is_object(), "{slow:#}");
    assert!(proxy.finish().success());
}

#[test]
fn upstreams_that_fail_or_hang_at_start_are_left_out() {
    let scratch = Scratch::new();
    let demo = vec![support::demo_server_bin().display().to_string()];
    let text = format!(
        "{}{}{}[[aggregate]]\nname = \"all\"\nupstreams = [\"broken\", \"silent\", \"demo\"]\nstartup_timeout_ms = 1500\n\n\
         [audit]\npath = {:?}\n",
        upstream("broken", &["sh".into(), "-c".into(), "exit 3".into()]),
        upstream("silent", &["sleep".into(), SILENT_SECONDS.into()]),
        upstream("demo", &demo),
        scratch.audit_log().display().to_string(),
    );
    let config = scratch.path("proxy.toml");
    std::fs::write(&config, text).unwrap();
    let mut proxy = Proxy::start(&config);
    let init = proxy.initialize(json!({}));
    assert!(
        init["result"]["capabilities"]["tools"].is_object(),
        "{init:#}"
    );
    proxy.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let listed = proxy.response(&json!(2)).to_string();
    assert!(listed.contains("demo__echo"), "{listed}");
    assert!(
        !listed.contains("silent__") && !listed.contains("broken__"),
        "{listed}"
    );
    proxy.send(&support::tool_call(
        3,
        "demo__echo",
        json!({"text": "alone"}),
    ));
    assert!(proxy.response(&json!(3)).to_string().contains("alone"));
    proxy.send(&support::tool_call(4, "silent__anything", json!({})));
    assert_eq!(proxy.response(&json!(4))["error"]["code"], -32011);
    assert!(proxy.finish().success());
    // The server that missed its start-up deadline was shut down, not left behind.
    let left = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| std::fs::read(entry.ok()?.path().join("cmdline")).ok())
        .any(|cmdline| String::from_utf8_lossy(&cmdline).contains(SILENT_SECONDS));
    assert!(!left, "the silent upstream outlived the session");
}

/// How long the silent upstream sleeps: odd enough to find it by.
const SILENT_SECONDS: &str = "31.4159";

#[test]
fn with_no_upstream_started_initialize_is_refused() {
    let scratch = Scratch::new();
    let text = format!(
        "{}[[aggregate]]\nname = \"all\"\nupstreams = [\"broken\"]\n\n[audit]\npath = {:?}\n",
        upstream("broken", &["sh".into(), "-c".into(), "exit 3".into()]),
        scratch.audit_log().display().to_string(),
    );
    let config = scratch.path("proxy.toml");
    std::fs::write(&config, text).unwrap();
    let mut proxy = Proxy::start(&config);
    // Only `initialize`: the proxy exits on refusing it, so an
    // `initialized` after it could meet a closed pipe.
    proxy.send(
        &json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "integration-test", "version": "1"}}}),
    );
    let refused = proxy.response(&json!("init"));
    assert_eq!(refused["error"]["code"], -32011, "{refused:#}");
    assert!(
        refused.to_string().contains("virtual server"),
        "{refused:#}"
    );
    assert_eq!(proxy.wait().code(), Some(3));
}

/// Every page of `method`'s `key` items (a list request per page).
fn list_all(proxy: &mut Proxy, first_id: i64, method: &str, key: &str) -> Vec<Value> {
    let mut items = Vec::new();
    let mut cursor: Option<Value> = None;
    for id in first_id..first_id + 20 {
        let mut request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {}});
        if let Some(cursor) = &cursor {
            request["params"]["cursor"] = cursor.clone();
        }
        proxy.send(&request);
        let page = proxy.response(&json!(id));
        items.extend(page["result"][key].as_array().cloned().unwrap_or_default());
        cursor = page["result"].get("nextCursor").cloned();
        if cursor.is_none() {
            break;
        }
    }
    items
}

#[test]
fn a_uri_two_upstreams_share_is_served_to_each_under_its_own_name() {
    let scratch = Scratch::new();
    let text = format!(
        "{}{}[[aggregate]]\nname = \"all\"\nupstreams = [\"everything\", \"twin\"]\n\n\
         [audit]\npath = {:?}\n",
        upstream("everything", &support::server_everything()),
        upstream("twin", &support::server_everything()),
        scratch.audit_log().display().to_string(),
    );
    let config = scratch.path("proxy.toml");
    std::fs::write(&config, text).unwrap();
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    let document = "demo://resource/static/document/architecture.md";
    let gated = format!("acs-proxy://twin/{document}");

    // The first upstream keeps the URI; the other's copy names it.
    let resources = list_all(&mut proxy, 2, "resources/list", "resources");
    let uris: Vec<&str> = resources.iter().filter_map(|r| r["uri"].as_str()).collect();
    assert!(uris.contains(&document), "{uris:?}");
    assert!(uris.contains(&gated.as_str()), "{uris:?}");
    let templates = list_all(
        &mut proxy,
        30,
        "resources/templates/list",
        "resourceTemplates",
    );
    let templates: Vec<&str> = templates
        .iter()
        .filter_map(|t| t["uriTemplate"].as_str())
        .collect();
    let template = "demo://resource/dynamic/text/{resourceId}";
    assert!(templates.contains(&template), "{templates:?}");
    assert!(
        templates.contains(&format!("acs-proxy://twin/{template}").as_str()),
        "{templates:?}"
    );

    // Reading the gateway URI (listed, or a template's expansion) reaches
    // the upstream it names; the contents come back under the agent's URI.
    proxy.send(
        &json!({"jsonrpc": "2.0", "id": 50, "method": "resources/read",
        "params": {"uri": gated}}),
    );
    let read = proxy.response(&json!(50));
    assert_eq!(read["result"]["contents"][0]["uri"], gated, "{read:#}");
    let expanded = "acs-proxy://twin/demo://resource/dynamic/text/1";
    proxy.send(
        &json!({"jsonrpc": "2.0", "id": 51, "method": "resources/read",
        "params": {"uri": expanded}}),
    );
    let read = proxy.response(&json!(51));
    assert_eq!(read["result"]["contents"][0]["uri"], expanded, "{read:#}");
    proxy.send(
        &json!({"jsonrpc": "2.0", "id": 52, "method": "resources/read",
        "params": {"uri": document}}),
    );
    let read = proxy.response(&json!(52));
    assert_eq!(read["result"]["contents"][0]["uri"], document, "{read:#}");

    // An upstream's refusal comes back as it is: an error, and no result.
    proxy.send(
        &json!({"jsonrpc": "2.0", "id": 55, "method": "resources/read",
        "params": {"uri": "acs-proxy://twin/demo://no/such/resource"}}),
    );
    let refused = proxy.response(&json!(55));
    assert!(
        refused.get("error").is_some() && refused.get("result").is_none(),
        "{refused:#}"
    );

    // A subscription to the gateway URI: the twin's updates come back under it.
    proxy.send(
        &json!({"jsonrpc": "2.0", "id": 53, "method": "resources/subscribe",
        "params": {"uri": gated}}),
    );
    assert!(proxy.response(&json!(53))["result"].is_object());
    proxy.send(&support::tool_call(
        54,
        "twin__toggle-subscriber-updates",
        json!({}),
    ));
    let (updated, _) = proxy.recv_until(|m| m["method"] == "notifications/resources/updated");
    assert_eq!(updated["params"]["uri"], gated, "{updated:#}");
    assert!(proxy.finish().success());

    // Each read was decided and audited in the session of the upstream that served it.
    let readers: std::collections::BTreeSet<String> = scratch
        .audit_entries()
        .iter()
        .filter(|e| e["mcp_method"] == "resources/read")
        .filter_map(|e| e["upstream"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        readers.into_iter().collect::<Vec<_>>(),
        ["everything", "twin"]
    );
    scratch.assert_audit_verifies();
}

#[test]
fn limits_and_hidden_tools_see_the_name_the_agent_uses() {
    let scratch = Scratch::new();
    let policy = format!(
        r#"
[integrity]
hide_denied_tools = true

{DEMO_ENV_PRIVATE}
[[policy.limit]]
name = "one-demo-echo"
tool = "demo__echo"
per = "session"
calls = 1
interval_s = 3600
"#
    );
    let config = aggregate_config(&scratch, "", &policy);
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));

    // Hidden by the agent's name: only that upstream's get-env.
    let tools = list_all(&mut proxy, 2, "tools/list", "tools");
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(!names.contains(&"demo__get-env"), "{names:?}");
    assert!(names.contains(&"everything__get-env"), "{names:?}");
    assert!(names.contains(&"demo__echo"), "{names:?}");

    // Limited by the agent's name: the demo server's echo, not everything's.
    let echo = |id: i64, tool: &str| {
        let arguments = if tool.starts_with("demo") {
            json!({"text": "hi"})
        } else {
            json!({"message": "hi"})
        };
        support::tool_call(id, tool, arguments)
    };
    proxy.send(&echo(30, "demo__echo"));
    assert!(proxy.response(&json!(30))["result"].is_object());
    proxy.send(&echo(31, "demo__echo"));
    let limited = proxy.response(&json!(31));
    assert_eq!(limited["error"]["code"], -32012, "{limited:#}");
    assert_eq!(
        limited["error"]["data"]["limit"], "one-demo-echo",
        "{limited:#}"
    );
    for id in [32, 33] {
        proxy.send(&echo(id, "everything__echo"));
        let reply = proxy.response(&json!(id));
        assert!(reply["result"].is_object(), "{reply:#}");
    }
    assert!(proxy.finish().success());
}

#[test]
fn a_batch_is_routed_member_by_member_and_answered_as_one() {
    let scratch = Scratch::new();
    let config = aggregate_config(&scratch, "", "");
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&json!([
        support::tool_call(10, "demo__echo", json!({"text": "first in the batch"})),
        {"jsonrpc": "2.0", "id": 11, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
        support::tool_call(12, "everything__echo", json!({"message": "second in the batch"})),
        {"jsonrpc": "2.0", "id": 13, "method": "initialize", "params": {}},
        {"jsonrpc": "2.0", "id": 14, "method": "tools/list"},
    ]));
    let (replies, _) = proxy.recv_until(Value::is_array);
    let replies = replies.as_array().unwrap();
    let by_id = |id: i64| {
        replies
            .iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("no reply to {id}: {replies:#?}"))
    };
    assert_eq!(replies.len(), 5, "{replies:#?}");
    assert!(by_id(10).to_string().contains("first in the batch"));
    assert_eq!(by_id(11)["result"], json!({}));
    assert!(by_id(12).to_string().contains("second in the batch"));
    assert_eq!(by_id(13)["error"]["code"], -32600);
    assert!(by_id(14).to_string().contains("files__read_text_file"));
    // Alone again afterwards.
    proxy.send(&json!({"jsonrpc": "2.0", "id": 15, "method": "ping"}));
    assert_eq!(proxy.response(&json!(15))["result"], json!({}));
    assert!(proxy.finish().success());
}

#[tokio::test]
async fn a_call_over_http_continues_the_agents_header_trace_in_its_upstream() {
    const AGENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    const AGENT_SPAN: &str = "00f067aa0ba902b7";
    let scratch = Scratch::new();
    let receiver = support::otlp::OtlpReceiver::start(&scratch, false);
    let demo = vec![support::demo_server_bin().display().to_string()];
    let text = format!(
        "{}{}[[aggregate]]\nname = \"all\"\nupstreams = [\"demo\", \"twin\"]\n\n\
         [audit]\npath = {:?}\n\n{}\n\
         [telemetry]\ntraces = \"otlp\"\nendpoint = {:?}\nprotocol = \"http/protobuf\"\n",
        upstream("demo", &demo),
        upstream("twin", &demo),
        scratch.audit_log().display().to_string(),
        listen_section("http", ""),
        receiver.http_endpoint(),
    );
    let config = scratch.path("proxy.toml");
    std::fs::write(&config, text).unwrap();
    let mut proxy = NetProxy::start(&config);
    let mut agent =
        support::mcp_http::McpHttp::new(support::mcp_http::client(None), proxy.url("/mcp"))
            .header("traceparent", &format!("00-{AGENT_TRACE}-{AGENT_SPAN}-01"));
    agent.initialize("2025-06-18", json!({})).await;
    let (reply, _) = agent
        .request(&support::tool_call(
            9,
            "twin__echo",
            json!({"text": "traced"}),
        ))
        .await;
    assert!(reply.to_string().contains("traced"), "{reply}");
    proxy.terminate();

    // The twin's relay session serves the call under the agent's span.
    let spans = receiver.spans_when(|spans| {
        spans
            .iter()
            .any(|s| s["name"] == "tools/call echo" && s["kind"] == 2)
    });
    let call = spans
        .iter()
        .find(|s| s["name"] == "tools/call echo" && s["kind"] == 2)
        .unwrap();
    assert_eq!(call["trace_id"], AGENT_TRACE, "{call:#}");
    assert_eq!(call["parent_span_id"], AGENT_SPAN, "{call:#}");
}

#[tokio::test]
async fn a_batch_over_http_is_answered_as_one() {
    let scratch = Scratch::new();
    let demo = vec![support::demo_server_bin().display().to_string()];
    let text = format!(
        "{}{}[[aggregate]]\nname = \"all\"\nupstreams = [\"demo\", \"twin\"]\n\n\
         [audit]\npath = {:?}\n\n{}\n",
        upstream("demo", &demo),
        upstream("twin", &demo),
        scratch.audit_log().display().to_string(),
        listen_section("http", ""),
    );
    let config = scratch.path("proxy.toml");
    std::fs::write(&config, text).unwrap();
    let mut proxy = NetProxy::start(&config);
    let mut agent =
        support::mcp_http::McpHttp::new(support::mcp_http::client(None), proxy.url("/mcp"));
    agent.initialize("2025-03-26", json!({})).await;
    let batch = json!([
        support::tool_call(40, "demo__echo", json!({"text": "a"})),
        support::tool_call(41, "twin__echo", json!({"text": "b"})),
    ]);
    let response = agent
        .post_text(&batch.to_string(), "application/json")
        .await;
    assert!(response.status().is_success(), "{}", response.status());
    let replies = support::mcp_http::json_body(response).await;
    let replies = replies.as_array().expect("an array");
    let texts: Vec<String> = [40, 41]
        .iter()
        .map(|id| {
            let reply = replies.iter().find(|r| r["id"] == *id).expect("a reply");
            reply["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(texts, ["a", "b"]);
    proxy.terminate();
}

/// Two demo servers behind an aggregate over stdio, with `extra` after.
fn twin_demo_config(scratch: &Scratch, extra: &str) -> PathBuf {
    let demo = vec![support::demo_server_bin().display().to_string()];
    let text = format!(
        "{}{}[[aggregate]]\nname = \"all\"\nupstreams = [\"demo\", \"twin\"]\n\n\
         [audit]\npath = {:?}\n\n{extra}\n",
        upstream("demo", &demo),
        upstream("twin", &demo),
        scratch.audit_log().display().to_string(),
    );
    let config = scratch.path("proxy.toml");
    std::fs::write(&config, text).unwrap();
    config
}

#[test]
fn the_guardian_refusing_the_virtual_servers_session_or_inventory_refuses_the_agent() {
    // The session itself: initialize is refused, no upstream is started.
    let scratch = Scratch::new();
    let config = twin_demo_config(
        &scratch,
        "[[policy.rule]]\nname = \"no-virtual\"\nhook = \"steps/sessionStart\"\n\
         decision = \"deny\"\nreasoning = \"no virtual servers here\"\n",
    );
    let mut proxy = Proxy::start(&config);
    let refused = proxy.initialize(json!({}));
    assert_eq!(refused["error"]["code"], -32010, "{refused:#}");
    assert!(
        refused.to_string().contains("no virtual servers here"),
        "{refused:#}"
    );
    proxy.wait();
    assert!(
        !scratch
            .audit_entries()
            .iter()
            .any(|e| e["upstream"].is_string()),
        "an upstream was started"
    );

    // The inventory: every request is refused, none reaches an upstream.
    let scratch = Scratch::new();
    let config = twin_demo_config(
        &scratch,
        "[[policy.rule]]\nname = \"banned\"\nhook = \"agbom/snapshot\"\n\
         decision = \"deny\"\nreasoning = \"a banned component\"\n",
    );
    let mut proxy = Proxy::start(&config);
    assert!(proxy.initialize(json!({}))["result"].is_object());
    proxy.send(&support::tool_call(2, "twin__echo", json!({"text": "x"})));
    let refused = proxy.response(&json!(2));
    assert_eq!(refused["error"]["code"], -32010, "{refused:#}");
    assert!(
        refused.to_string().contains("a banned component"),
        "{refused:#}"
    );
    proxy.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}));
    assert_eq!(proxy.response(&json!(3))["error"]["code"], -32010);
    assert!(proxy.finish().success());
    assert!(
        !scratch
            .audit_entries()
            .iter()
            .any(|e| e["mcp_method"] == "tools/call"),
        "the call reached an upstream"
    );
}
