//! End to end with real peers on both sides: the Python `mcp` SDK client
//! (`tests/peers/mcp_client.py`) spawns the built `acs-proxy` as its stdio
//! MCP server, and the proxy spawns `@modelcontextprotocol/server-everything`
//! as its upstream. Nothing is simulated: every message crosses real pipes
//! between three processes written against two different SDKs.
//!
//! The client prints one JSON report of what it sent and received; the
//! tests check that report, the proxy's exit status and its audit log.
//!
//! Peers are installed by `.ci/install-peers`; without them these tests fail
//! with a message saying so.

mod support;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::policies::DENY_AND_REDACT_RULES;
use support::{entries_of, Scratch};

/// The longest one client run may take before the test kills it. The
/// client's own `--total-timeout` (below) fires first.
const CLIENT_DEADLINE: Duration = Duration::from_secs(180);

/// Per-request timeout inside the client (seconds).
const REQUEST_TIMEOUT: &str = "30";

/// Whole-scenario timeout inside the client (seconds).
const SCENARIO_TIMEOUT: &str = "120";

/// What the sampling callback answers; must come back inside the tool result.
const SAMPLING_TEXT: &str = "e2e sampled reply 7f3c";

/// An SSN-shaped number the redaction rule must remove.
const SSN: &str = "123-45-6789";

/// A value put in the environment of the whole process tree: if the denied
/// `get-env` call ever reached server-everything, its result would carry it.
const CANARY_VAR: &str = "ACS_E2E_CANARY";
const CANARY_VALUE: &str = "canary-5d1e0b7a-env-must-not-leak";

const DENY_REASONING: &str = "dumping the server environment would expose credentials";
const REDACT_REASONING: &str = "US social security numbers are removed from tool output";
const ASK_REASONING: &str = "sums need a human's approval";

/// The hook pipeline is pinned so the audit assertions do not depend on defaults.
const HOOKS: &str = "[hooks]\ntools_call = \"both\"\ninventory = true\n";

const DEFAULT_ALLOW: &str = "[policy]\ndefault = \"allow\"\n";

const ASK_RULE: &str = r#"
[policy]
default = "allow"

[[policy.rule]]
name = "ask-before-sum"
hook = "steps/toolCallRequest"
tool = "get-sum"
decision = "ask"
reasoning = "sums need a human's approval"
"#;

/// One finished run of the Python client through the proxy.
struct Run {
    /// The client's JSON report.
    report: Value,
    /// The client's stderr, which also carries the proxy's and the server's.
    stderr: String,
    /// What the wrapper recorded as the proxy's exit status, if it got to.
    proxy_exit: Option<String>,
    /// Wall time of the run.
    elapsed: Duration,
}

impl Run {
    /// The calls made with `--call`, in order.
    fn calls(&self) -> &[Value] {
        self.report["calls"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// The `--call` record for this tool.
    fn call(&self, name: &str) -> &Value {
        self.calls()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no {name} call in the report:\n{}", self.context()))
    }

    /// A scenario step's record.
    fn step(&self, name: &str) -> &Value {
        let step = &self.report["steps"][name];
        assert!(
            step.is_object(),
            "step {name} missing from the report:\n{}",
            self.context()
        );
        assert!(
            step.get("skipped").is_none(),
            "step {name} was skipped: {step}\n{}",
            self.context()
        );
        step
    }

    /// A step's (or call's) `result`, failing with the record when it has none.
    fn result_of<'a>(&self, record: &'a Value) -> &'a Value {
        let result = &record["result"];
        assert!(
            result.is_object(),
            "expected a result, got {record}\n{}",
            self.context()
        );
        result
    }

    /// Messages the client received, as JSON text each.
    fn received_texts(&self) -> Vec<String> {
        self.report["received"]
            .as_array()
            .expect("received is a list")
            .iter()
            .map(Value::to_string)
            .collect()
    }

    /// Messages the client received with this method.
    fn received_method(&self, method: &str) -> Vec<&Value> {
        self.report["received"]
            .as_array()
            .expect("received is a list")
            .iter()
            .filter(|m| m["method"] == method)
            .collect()
    }

    /// Every response (no `method`) the client received with this id.
    fn responses_to(&self, id: &Value) -> Vec<&Value> {
        self.report["received"]
            .as_array()
            .expect("received is a list")
            .iter()
            .filter(|m| m.get("method").is_none() && m.get("id") == Some(id))
            .collect()
    }

    /// The messages the client sent that answer a request with this id.
    fn sent_replies_to(&self, id: &Value) -> Vec<&Value> {
        self.report["sent"]
            .as_array()
            .expect("sent is a list")
            .iter()
            .filter(|m| m.get("method").is_none() && m.get("id") == Some(id))
            .collect()
    }

    /// The id the client gave its `tools/call` of this tool (the first one).
    fn sent_call_id(&self, tool: &str) -> Value {
        self.report["sent"]
            .as_array()
            .expect("sent is a list")
            .iter()
            .find(|m| m["method"] == "tools/call" && m["params"]["name"] == tool)
            .map(|m| m["id"].clone())
            .unwrap_or_else(|| panic!("no tools/call of {tool} sent:\n{}", self.context()))
    }

    /// The client's stderr, for failure messages (the report is too long to dump whole).
    fn context(&self) -> String {
        format!("client stderr:\n{}", self.stderr)
    }

    /// The proxy exited with status 0 and the client finished its scenario.
    fn assert_clean(&self) {
        assert!(
            self.report.get("aborted").is_none(),
            "the client's scenario was cut short: {}\n{}",
            self.report["aborted"],
            self.context()
        );
        assert_eq!(
            self.proxy_exit.as_deref(),
            Some("0"),
            "acs-proxy did not exit cleanly (no recorded status means it was killed \
             together with its wrapper, e.g. by the SDK's shutdown escalation)\n{}",
            self.context()
        );
    }
}

/// Reads a pipe to the end on a thread.
fn drain(mut pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Runs `mcp_client.py CLIENT_ARGS -- <proxy>` with the full environment.
///
/// The proxy is started through `sh` only so its exit status can be seen:
/// the SDK spawns the server, closes its stdin at the end and reaps it
/// without reporting how it exited. `sh` waits for `acs-proxy --config
/// CONFIG` and writes its status to a file; if the SDK had to kill the
/// process group, the file is never written and [`Run::assert_clean`] fails.
fn run_client(scratch: &Scratch, config: &Path, client_args: &[&str]) -> Run {
    let client = support::repo_root().join("tests/peers/mcp_client.py");
    let exit_file: PathBuf = scratch.path("proxy-exit-status");
    let started = Instant::now();
    let mut child = Command::new(support::peers_python())
        .arg(&client)
        .args(client_args)
        .args([
            "--timeout",
            REQUEST_TIMEOUT,
            "--total-timeout",
            SCENARIO_TIMEOUT,
        ])
        .arg("--")
        .args([
            "/bin/sh",
            "-c",
            r#"out=$1; shift; "$@"; echo $? > "$out""#,
            "sh",
        ])
        .arg(&exit_file)
        .arg(support::proxy_bin())
        .arg("--config")
        .arg(config)
        // Everything else is inherited: the client passes its whole
        // environment on to the proxy, and the proxy to server-everything.
        .env(CANARY_VAR, CANARY_VALUE)
        .current_dir(support::repo_root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the Python MCP client");
    let stdout = drain(child.stdout.take().expect("stdout"));
    let stderr = drain(child.stderr.take().expect("stderr"));
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if started.elapsed() > CLIENT_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            let stderr = stderr.join().unwrap_or_default();
            panic!(
                "the Python client did not finish within {CLIENT_DEADLINE:?}; stderr:\n{stderr}"
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let elapsed = started.elapsed();
    let stdout = stdout.join().expect("stdout reader");
    let stderr = stderr.join().expect("stderr reader");
    assert!(
        status.success(),
        "the Python client crashed ({status}); stderr:\n{stderr}\nstdout:\n{stdout}"
    );
    let report: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|err| {
        panic!("the client's report is not JSON ({err}):\n{stdout}\nstderr:\n{stderr}")
    });
    let proxy_exit = std::fs::read_to_string(&exit_file)
        .ok()
        .map(|s| s.trim().to_owned());
    eprintln!("client run took {elapsed:?}");
    Run {
        report,
        stderr,
        proxy_exit,
        elapsed,
    }
}

/// The text of the first content block of a tool result.
fn first_text(result: &Value) -> &str {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content in {result}"))
}

/// All text content of a tool result, joined.
fn all_text(result: &Value) -> String {
    result["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// The single audit entry matching `wanted`.
fn one_entry<'a>(entries: &'a [Value], what: &str, wanted: impl Fn(&Value) -> bool) -> &'a Value {
    let found: Vec<&Value> = entries.iter().filter(|e| wanted(e)).collect();
    assert_eq!(
        found.len(),
        1,
        "expected exactly one audit entry for {what}, found {}: {found:#?}",
        found.len()
    );
    found[0]
}

/// The chain is whole and sealed: `audit verify` passes and says so, it is
/// one session, numbered 1..n, opened by `steps/sessionStart` and closed by
/// `steps/sessionEnd`.
fn assert_sealed_chain(scratch: &Scratch, entries: &[Value]) {
    scratch.assert_audit_verifies();
    let output = Command::new(support::proxy_bin())
        .args(["audit", "verify"])
        .arg(scratch.audit_log())
        .output()
        .expect("run audit verify");
    let verdict = String::from_utf8_lossy(&output.stdout);
    assert!(
        verdict.contains("1 session chain")
            && verdict.contains("sealed")
            && !verdict.contains("not sealed"),
        "audit verify does not report one sealed chain:\n{verdict}"
    );

    assert!(entries.len() > 2, "audit log too short: {entries:#?}");
    assert_eq!(
        entries[0]["step_type"], "steps/sessionStart",
        "first entry: {}",
        entries[0]
    );
    assert!(
        entries[0]["previous_hash"].is_null(),
        "chain root: {}",
        entries[0]
    );
    let last = entries.last().expect("entries");
    assert_eq!(last["step_type"], "steps/sessionEnd", "last entry: {last}");
    assert_eq!(
        entries_of(entries, "steps/sessionEnd").len(),
        1,
        "one sessionEnd per session"
    );
    let session = &entries[0]["session_id"];
    for (index, entry) in entries.iter().enumerate() {
        assert_eq!(&entry["session_id"], session, "one session chain: {entry}");
        assert_eq!(
            entry["entry_id"],
            (index + 1).to_string(),
            "numbering: {entry}"
        );
        if index > 0 {
            assert_eq!(
                entry["previous_hash"],
                entries[index - 1]["entry_hash"],
                "link at entry {}",
                index + 1
            );
        }
    }
}

#[test]
fn python_client_through_proxy_to_server_everything() {
    let scratch = Scratch::new();
    let config = scratch.config(
        &support::server_everything(),
        &format!("{HOOKS}\n{DEFAULT_ALLOW}{DENY_AND_REDACT_RULES}"),
    );
    let echo_args = format!(r#"{{"message": "my ssn is {SSN}, keep it safe"}}"#);
    let run = run_client(
        &scratch,
        &config,
        &[
            "--scenario",
            "full",
            "--elicitation",
            "none",
            "--sampling-text",
            SAMPLING_TEXT,
            // A slow call that, if its cancellation were lost on the way,
            // would complete (and be answered) within the grace below.
            "--slow-args",
            r#"{"duration": 3, "steps": 3}"#,
            "--cancel-after",
            "5",
            "--cancel-grace",
            "3",
            "--call",
            "get-env",
            "{}",
            "--call",
            "echo",
            &echo_args,
        ],
    );
    run.assert_clean();

    // --- initialize -----------------------------------------------------
    let init = run.step("initialize");
    assert!(
        init["result"]["capabilities"]["tools"].is_object(),
        "initialize result: {init}"
    );
    assert!(
        run.report["protocol_version"].is_string(),
        "no protocol version negotiated"
    );
    assert_eq!(
        run.report["server_info"]["name"], "mcp-servers/everything",
        "the client talks to server-everything through the proxy"
    );

    // --- tools/list -----------------------------------------------------
    let tools_list = run.step("tools_list");
    let names: Vec<&str> = run.result_of(tools_list)["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for tool in [
        "echo",
        "get-env",
        "get-sum",
        "trigger-long-running-operation",
        "trigger-sampling-request",
    ] {
        assert!(
            names.contains(&tool),
            "{tool} missing from tools/list: {names:?}"
        );
    }

    // --- tools/call with progress ----------------------------------------
    let progress = run.step("progress");
    assert_eq!(
        progress["request"]["params"]["name"],
        "trigger-long-running-operation"
    );
    let result = run.result_of(progress);
    assert_ne!(result["isError"], true, "progress call failed: {result}");
    assert!(
        first_text(result).contains("Long running operation completed"),
        "progress call result: {result}"
    );
    let seen = progress["progress"].as_array().expect("progress list");
    assert!(
        seen.len() >= 3,
        "the client's progress callback saw {} notifications, expected 3: {progress}",
        seen.len()
    );
    assert_eq!(seen.last().expect("progress")["progress"], 3.0, "{seen:?}");
    let progress_id = run.sent_call_id("trigger-long-running-operation");
    let token = run.report["sent"]
        .as_array()
        .expect("sent")
        .iter()
        .find(|m| m["id"] == progress_id && m["method"] == "tools/call")
        .map(|m| m["params"]["_meta"]["progressToken"].clone())
        .expect("the progress call carried a progressToken");
    let for_token = run
        .received_method("notifications/progress")
        .into_iter()
        .filter(|n| n["params"]["progressToken"] == token)
        .count();
    assert!(
        for_token >= 3,
        "{for_token} notifications/progress with token {token} reached the client"
    );

    // --- server → client sampling ----------------------------------------
    let sampling_requests = run.received_method("sampling/createMessage");
    assert_eq!(
        sampling_requests.len(),
        1,
        "one sampling/createMessage should reach the client: {sampling_requests:?}"
    );
    let sampling_id = &sampling_requests[0]["id"];
    let replies = run.sent_replies_to(sampling_id);
    assert_eq!(
        replies.len(),
        1,
        "the client answers the sampling request once: {replies:?}"
    );
    assert_eq!(replies[0]["result"]["content"]["text"], SAMPLING_TEXT);
    let sampling = run.step("sampling");
    let result = run.result_of(sampling);
    assert_ne!(result["isError"], true, "sampling call failed: {result}");
    assert!(
        all_text(result).contains(SAMPLING_TEXT),
        "the client's sampling reply should come back inside the tool result: {result}"
    );

    // --- resources/read --------------------------------------------------
    let read = run.step("resource_read");
    let uri = read["request"]["params"]["uri"].clone();
    assert!(uri.is_string(), "resource_read request: {read}");
    let contents = run.result_of(read)["contents"]
        .as_array()
        .expect("contents");
    assert!(!contents.is_empty(), "empty resources/read result: {read}");
    assert_eq!(contents[0]["uri"], uri);
    assert!(
        contents[0]["text"].as_str().is_some_and(|t| !t.is_empty())
            || contents[0]["blob"].as_str().is_some_and(|b| !b.is_empty()),
        "resource has no content: {}",
        contents[0]
    );

    // --- prompts/get -----------------------------------------------------
    let prompt = run.step("prompt_get");
    let messages = run.result_of(prompt)["messages"]
        .as_array()
        .expect("messages");
    assert!(
        !messages.is_empty(),
        "prompts/get returned no messages: {prompt}"
    );
    assert!(
        messages[0]["content"]["text"].as_str().is_some(),
        "{prompt}"
    );

    // --- cancellation ----------------------------------------------------
    let cancel = run.step("cancel");
    let cancelled_id = cancel["request_id"].clone();
    assert!(!cancelled_id.is_null(), "cancel step: {cancel}");
    assert_eq!(
        cancel["cancelled"], true,
        "the slow call finished before it was cancelled: {cancel}"
    );
    assert_eq!(
        cancel["cancel_notification"]["params"]["requestId"], cancelled_id,
        "the SDK sent notifications/cancelled: {cancel}"
    );
    assert!(
        cancel["response_after_cancel"].is_null(),
        "a response arrived for the cancelled request: {cancel}"
    );
    // Over the whole run (the slow call would have completed long before
    // the end), nothing ever answered the cancelled request.
    let late = run.responses_to(&cancelled_id);
    assert!(
        late.is_empty(),
        "the cancelled request was answered: {late:?}"
    );
    assert!(
        cancel["ping_after"]["result"].is_object(),
        "ping after the cancellation failed: {}",
        cancel["ping_after"]
    );

    // --- denied call -----------------------------------------------------
    let denied = run.call("get-env");
    let result = run.result_of(denied);
    assert_eq!(
        result["isError"], true,
        "the denied call is an error result: {result}"
    );
    let text = first_text(result);
    assert!(
        text.contains(DENY_REASONING),
        "denial text lacks the reasoning: {text}"
    );
    let decision = &result["_meta"]["io.acs-proxy/decision"];
    assert_eq!(decision["decision"], "deny", "{result}");
    assert_eq!(decision["reasoning"], DENY_REASONING, "{result}");
    let received = run.received_texts();
    assert!(
        received.iter().all(|m| !m.contains(CANARY_VALUE)),
        "the server environment reached the client despite the denial"
    );

    // --- redacted call ---------------------------------------------------
    let redacted = run.call("echo");
    let result = run.result_of(redacted);
    assert_ne!(result["isError"], true, "echo failed: {result}");
    let text = all_text(result);
    assert!(
        text.contains("[REDACTED SSN]"),
        "echo result not redacted: {text}"
    );
    assert!(!text.contains(SSN), "the SSN reached the client: {text}");
    assert!(
        text.contains("keep it safe"),
        "redaction removed more than the number: {text}"
    );
    assert!(
        received.iter().all(|m| !m.contains(SSN)),
        "the SSN appears in a message the client received"
    );

    // --- audit log -------------------------------------------------------
    let entries = scratch.audit_entries();
    assert_sealed_chain(&scratch, &entries);
    for step_type in [
        "agbom/snapshot",
        "protocols/MCP/initialize",
        "protocols/MCP/tools/list",
        "protocols/MCP/tools/call",
        "steps/toolCallRequest",
        "steps/toolCallResult",
        "protocols/MCP/sampling/createMessage",
        "protocols/MCP/resources/read",
        "protocols/MCP/prompts/get",
        "protocols/MCP/notifications/cancelled",
        "protocols/MCP/ping",
    ] {
        assert!(
            !entries_of(&entries, step_type).is_empty(),
            "no {step_type} entry in the audit log"
        );
    }
    let snapshot = entries_of(&entries, "agbom/snapshot");
    assert_eq!(snapshot.len(), 1, "one inventory snapshot: {snapshot:?}");

    let deny_id = run.sent_call_id("get-env");
    let deny = one_entry(&entries, "the get-env denial", |e| {
        e["step_type"] == "steps/toolCallRequest" && e["mcp_id"] == deny_id
    });
    assert_eq!(deny["decision"], "deny", "{deny}");
    assert_eq!(deny["rule"], "no-environment-dump", "{deny}");
    assert_eq!(deny["reasoning"], DENY_REASONING, "{deny}");
    assert_eq!(deny["action"], "blocked", "{deny}");
    assert_eq!(
        decision["audit_entry_id"], deny["entry_id"],
        "the denial names the audit entry that records it"
    );
    assert!(
        entries
            .iter()
            .all(|e| !(e["step_type"] == "steps/toolCallResult" && e["mcp_id"] == deny_id)),
        "a blocked call has no result step"
    );

    let echo_id = run.sent_call_id("echo");
    let modify = one_entry(&entries, "the echo redaction", |e| {
        e["step_type"] == "steps/toolCallResult" && e["mcp_id"] == echo_id
    });
    assert_eq!(modify["decision"], "modify", "{modify}");
    assert_eq!(modify["rule"], "redact-ssn", "{modify}");
    assert_eq!(modify["reasoning"], REDACT_REASONING, "{modify}");
    assert_eq!(modify["action"], "rewritten", "{modify}");

    // The cancelled call was let through (and then cancelled), not blocked.
    let cancelled_request = one_entry(&entries, "the cancelled call's request step", |e| {
        e["step_type"] == "steps/toolCallRequest" && e["mcp_id"] == cancelled_id
    });
    assert_eq!(
        cancelled_request["action"], "forwarded",
        "{cancelled_request}"
    );

    // By default arguments and results are kept as digests only.
    let log = std::fs::read_to_string(scratch.audit_log()).expect("audit log");
    assert!(!log.contains(SSN), "the audit log stores the SSN in clear");
    assert!(
        !log.contains(SAMPLING_TEXT),
        "the audit log stores message content"
    );

    eprintln!(
        "full scenario: {:?}, {} audit entries",
        run.elapsed,
        entries.len()
    );
}

#[test]
fn ask_rule_is_approved_through_elicitation_or_denied_without_an_approver() {
    let sum_args = r#"{"a": 2, "b": 3}"#;
    let extra = format!("{HOOKS}\n{ASK_RULE}");

    // --- an approver who says yes ----------------------------------------
    let scratch = Scratch::new();
    let config = scratch.config(&support::server_everything(), &extra);
    let run = run_client(
        &scratch,
        &config,
        &[
            "--scenario",
            "calls",
            "--elicitation",
            "accept",
            "--call",
            "get-sum",
            sum_args,
        ],
    );
    run.assert_clean();

    let elicitations = run.received_method("elicitation/create");
    assert_eq!(
        elicitations.len(),
        1,
        "the proxy asks the client exactly once: {elicitations:?}\n{}",
        run.context()
    );
    let ask = elicitations[0];
    let message = ask["params"]["message"]
        .as_str()
        .expect("elicitation message");
    assert!(message.contains(ASK_REASONING), "question: {message}");
    assert!(
        message.contains("get-sum"),
        "the question names the tool: {message}"
    );
    assert_eq!(
        ask["params"]["requestedSchema"]["properties"]["approve"]["type"], "boolean",
        "{ask}"
    );
    let answers = run.sent_replies_to(&ask["id"]);
    assert_eq!(answers.len(), 1, "the client answers once: {answers:?}");
    assert_eq!(answers[0]["result"]["action"], "accept", "{}", answers[0]);
    assert_eq!(
        answers[0]["result"]["content"]["approve"], true,
        "{}",
        answers[0]
    );

    let call = run.call("get-sum");
    let result = run.result_of(call);
    assert_ne!(
        result["isError"], true,
        "the approved call failed: {result}"
    );
    assert_eq!(first_text(result), "The sum of 2 and 3 is 5.", "{result}");

    let entries = scratch.audit_entries();
    assert_sealed_chain(&scratch, &entries);
    let sum_id = run.sent_call_id("get-sum");
    let held = one_entry(&entries, "the held get-sum request", |e| {
        e["step_type"] == "steps/toolCallRequest" && e["mcp_id"] == sum_id
    });
    assert_eq!(held["decision"], "ask", "{held}");
    assert_eq!(held["rule"], "ask-before-sum", "{held}");
    assert_eq!(held["action"], "held", "{held}");
    let approval = one_entry(&entries, "the approval", |e| {
        e["step_type"] == "enforcement" && e["mcp_id"] == sum_id
    });
    assert_eq!(approval["decision"], "allow", "{approval}");
    assert_eq!(approval["action"], "forwarded", "{approval}");
    assert!(
        approval["detail"]
            .as_str()
            .is_some_and(|d| d.contains("approved")),
        "the approval is recorded as such: {approval}"
    );
    let position = |entry: &Value| entries.iter().position(|e| e == entry).expect("entry");
    assert!(position(held) < position(approval), "held before approved");
    one_entry(&entries, "the approved call's result", |e| {
        e["step_type"] == "steps/toolCallResult"
            && e["mcp_id"] == sum_id
            && e["action"] == "forwarded"
    });
    eprintln!("ask/accept: {:?}", run.elapsed);

    // --- no approver: the client does not declare elicitation ------------
    let scratch = Scratch::new();
    let config = scratch.config(&support::server_everything(), &extra);
    let run = run_client(
        &scratch,
        &config,
        &[
            "--scenario",
            "calls",
            "--elicitation",
            "none",
            "--call",
            "get-sum",
            sum_args,
        ],
    );
    run.assert_clean();
    assert!(
        run.received_method("elicitation/create").is_empty(),
        "no elicitation may be sent to a client without the capability"
    );
    let call = run.call("get-sum");
    let result = run.result_of(call);
    assert_eq!(
        result["isError"], true,
        "without an approver the call is denied: {result}"
    );
    let decision = &result["_meta"]["io.acs-proxy/decision"];
    assert_eq!(decision["decision"], "deny", "{result}");
    assert!(
        decision["reason_codes"]
            .as_array()
            .is_some_and(|codes| codes.iter().any(|c| c == "approver_unavailable")),
        "reason codes lack approver_unavailable: {result}"
    );
    assert!(
        first_text(result).contains(ASK_REASONING),
        "the denial text carries the rule's reasoning: {result}"
    );
    assert!(
        !all_text(result).contains("The sum of"),
        "the denied call reached the server: {result}"
    );

    let entries = scratch.audit_entries();
    assert_sealed_chain(&scratch, &entries);
    let sum_id = run.sent_call_id("get-sum");
    let held = one_entry(&entries, "the held get-sum request", |e| {
        e["step_type"] == "steps/toolCallRequest" && e["mcp_id"] == sum_id
    });
    assert_eq!(held["decision"], "ask", "{held}");
    assert_eq!(held["rule"], "ask-before-sum", "{held}");
    let denial = one_entry(&entries, "the approver_unavailable denial", |e| {
        e["step_type"] == "enforcement" && e["mcp_id"] == sum_id
    });
    assert_eq!(denial["decision"], "deny", "{denial}");
    assert_eq!(denial["action"], "blocked", "{denial}");
    assert!(
        denial["reason_codes"]
            .as_array()
            .is_some_and(|codes| codes.iter().any(|c| c == "approver_unavailable")),
        "{denial}"
    );
    assert_eq!(
        decision["audit_entry_id"], denial["entry_id"],
        "the denial names the audit entry that records it"
    );
    assert!(
        entries
            .iter()
            .all(|e| !(e["step_type"] == "steps/toolCallResult" && e["mcp_id"] == sum_id)),
        "a denied call has no result step"
    );
    eprintln!("ask/none: {:?}", run.elapsed);
}
