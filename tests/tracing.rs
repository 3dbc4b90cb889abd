//! OpenTelemetry traces (ACS-Trace) as a collector receives them: a real
//! OTLP receiver (`tests/peers/otlp_receiver.py`, the official
//! `opentelemetry-proto` definitions) decodes what the proxy exports over
//! OTLP/HTTP protobuf and gRPC. Checked: the ACS span names and required
//! attributes of `schemas/trace/otel-mapping.json`, decisions as
//! `acs.decision` events on the step's span, the MCP server span, the
//! Guardian, upstream and session spans and their parent links, trace
//! context continued from the agent (`_meta.traceparent` over stdio, the
//! `traceparent` header over Streamable HTTP) and passed on (to a stdio
//! server in `_meta`, to an HTTP server and a remote Guardian as headers),
//! and a collector that is down costing the calls nothing.

mod support;

use serde_json::{json, Value};
use support::guardian::TestGuardian;
use support::mcp_http::{client, read_reply, ACCEPT_BOTH};
use support::mcp_servers::StreamableServer;
use support::otlp::{by_id, is_child_of, named, one, OtlpReceiver};
use support::{free_port, listen_section, metrics_text, tool_call, NetProxy, Proxy, Scratch};

/// The agent's span, as it sends it in `traceparent`.
const AGENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const AGENT_SPAN: &str = "00f067aa0ba902b7";

fn agent_traceparent() -> String {
    format!("00-{AGENT_TRACE}-{AGENT_SPAN}-01")
}

/// OTLP span kinds.
const SERVER: i64 = 2;
const CLIENT: i64 = 3;
/// OTLP status code `ERROR`.
const STATUS_ERROR: i64 = 2;

fn telemetry(endpoint: &str, protocol: &str) -> String {
    format!(
        "[telemetry]\ntraces = \"otlp\"\nendpoint = {endpoint:?}\nprotocol = {protocol:?}\nservice_name = \"acs-proxy-under-test\"\n"
    )
}

/// A `tools/call` carrying the agent's trace context in `_meta`.
fn traced_call(id: i64, tool: &str, arguments: Value) -> Value {
    let mut call = tool_call(id, tool, arguments);
    call["params"]["_meta"] = json!({"traceparent": agent_traceparent(), "tracestate": "agent=1"});
    call
}

fn attribute<'a>(span: &'a Value, key: &str) -> &'a Value {
    let value = &span["attributes"][key];
    assert!(!value.is_null(), "no {key} on {span:#}");
    value
}

fn decision_events(span: &Value) -> Vec<&Value> {
    span["events"]
        .as_array()
        .map(|events| {
            events
                .iter()
                .filter(|e| e["name"] == "acs.decision")
                .collect()
        })
        .unwrap_or_default()
}

/// The server span of the call with JSON-RPC id `id`.
fn request_span<'a>(spans: &'a [Value], id: &str) -> &'a Value {
    spans
        .iter()
        .find(|span| span["kind"] == SERVER && span["attributes"]["jsonrpc.request.id"] == id)
        .unwrap_or_else(|| panic!("no server span for request {id} in {spans:#?}"))
}

fn children<'a>(spans: &'a [Value], parent: &Value, name: &str) -> Vec<&'a Value> {
    named(spans, name)
        .into_iter()
        .filter(|span| is_child_of(span, parent))
        .collect()
}

#[test]
fn a_stdio_session_is_traced_as_the_acs_mapping_says() {
    let scratch = Scratch::new();
    let receiver = OtlpReceiver::start(&scratch, false);
    let config = scratch.demo_config(&format!(
        "{}\n[[policy.rule]]\nname = \"no-env\"\nhook = \"steps/toolCallRequest\"\ntool = \"get-env\"\ndecision = \"deny\"\nreasoning = \"environment dumps leak credentials\"\n",
        telemetry(&receiver.http_endpoint(), "http/protobuf")
    ));
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&traced_call(7, "echo", json!({"text": "traced"})));
    assert_eq!(
        proxy.response(&json!(7))["result"]["content"][0]["text"],
        "traced"
    );
    proxy.send(&tool_call(8, "get-env", json!({})));
    assert_eq!(proxy.response(&json!(8))["result"]["isError"], true);
    assert!(proxy.finish().success());
    let spans = receiver.spans_when(|spans| !named(spans, "acs.session.end").is_empty());
    assert!(spans
        .iter()
        .all(|s| s["service_name"] == "acs-proxy-under-test"));
    assert!(spans.iter().all(|s| s["transport"] == "http/protobuf"));

    // The session: acs.session with its id, its end as a child.
    let audit_session = scratch.audit_entries()[0]["session_id"].clone();
    let session = one(&spans, "acs.session");
    assert_eq!(attribute(session, "acs.session.id"), &audit_session);
    assert_eq!(decision_events(session).len(), 1, "sessionStart's decision");
    let end = one(&spans, "acs.session.end");
    assert!(is_child_of(end, session));
    assert_eq!(attribute(end, "acs.session.reason"), "completed");
    assert!(
        named(&spans, "acs.agbom")
            .iter()
            .all(|agbom| is_child_of(agbom, session)
                && agbom["attributes"]["acs.agbom.format"] == "canonical"),
        "agbom spans sit under the session"
    );

    // The traced call continues the agent's trace.
    let call = request_span(&spans, "7");
    assert_eq!(call["name"], "tools/call echo");
    assert_eq!(call["trace_id"], AGENT_TRACE);
    assert_eq!(call["parent_span_id"], AGENT_SPAN);
    assert_eq!(attribute(call, "mcp.method.name"), "tools/call");
    assert_eq!(attribute(call, "mcp.session.id"), &audit_session);
    assert_eq!(attribute(call, "gen_ai.tool.name"), "echo");
    // The wrapped hooks (protocols/MCP/tools/call, request and response)
    // have no span of their own: their decisions are events on the
    // request's span.
    let wrapped = decision_events(call);
    assert_eq!(wrapped.len(), 2, "{call:#}");
    for event in wrapped {
        assert_eq!(event["attributes"]["acs.decision"], "allow");
        assert_eq!(event["attributes"]["acs.evaluator"], "embedded");
    }

    // steps/toolCallRequest → gen_ai.tool.call, with its decision event
    // and the Guardian's span under it.
    let step = children(&spans, call, "gen_ai.tool.call");
    assert_eq!(step.len(), 1, "{spans:#?}");
    let step = step[0];
    assert_eq!(attribute(step, "gen_ai.tool.name"), "echo");
    assert_eq!(attribute(step, "acs.capability"), "mcp.tool");
    assert_eq!(attribute(step, "acs.tool.provider"), "demo");
    let decided = decision_events(step);
    assert_eq!(decided.len(), 1);
    assert_eq!(decided[0]["attributes"]["acs.decision"], "allow");
    assert_eq!(decided[0]["attributes"]["acs.evaluator"], "embedded");
    let evaluation = children(&spans, step, "acs.guardian.evaluate");
    assert_eq!(evaluation.len(), 1);
    assert_eq!(attribute(evaluation[0], "acs.guardian.kind"), "embedded");
    assert_eq!(attribute(evaluation[0], "acs.decision"), "allow");

    // The trip upstream: a client span whose context the server received
    // in `_meta` (the agent's own traceparent replaced by it).
    let upstream: Vec<&Value> = children(&spans, call, "tools/call echo")
        .into_iter()
        .filter(|span| span["kind"] == CLIENT)
        .collect();
    assert_eq!(upstream.len(), 1, "{spans:#?}");
    let received = scratch
        .server_received()
        .into_iter()
        .find(|m| m["id"] == 7)
        .expect("the call reached the server");
    assert_eq!(
        received["params"]["_meta"]["traceparent"],
        format!(
            "00-{AGENT_TRACE}-{}-01",
            upstream[0]["span_id"].as_str().unwrap()
        )
    );
    assert_eq!(received["params"]["_meta"]["tracestate"], "agent=1");

    // steps/toolCallResult → gen_ai.tool.result, under the request.
    let result = children(&spans, call, "gen_ai.tool.result");
    assert_eq!(result.len(), 1);
    assert_eq!(attribute(result[0], "gen_ai.tool.name"), "echo");
    assert_eq!(attribute(result[0], "acs.exit_status"), "success");
    assert_eq!(
        attribute(result[0], "acs.request_id_ref"),
        attribute(step, "acs.request_id")
    );

    // The untraced call starts under the session; its deny is an event on
    // its step and the request's span is failed.
    let denied = request_span(&spans, "8");
    assert!(is_child_of(denied, session), "{denied:#}");
    assert_eq!(denied["status"]["code"], STATUS_ERROR);
    let step = children(&spans, denied, "gen_ai.tool.call");
    assert_eq!(step.len(), 1);
    let decided = decision_events(step[0]);
    assert_eq!(decided[0]["attributes"]["acs.decision"], "deny");
    assert_eq!(
        decided[0]["attributes"]["acs.reasoning"],
        "environment dumps leak credentials"
    );
    assert!(
        children(&spans, denied, "tools/call get-env")
            .iter()
            .all(|span| span["kind"] != CLIENT),
        "a denied call never goes upstream"
    );
    for span in &spans {
        let parent = &span["parent_span_id"];
        if parent != "" && parent != AGENT_SPAN {
            assert!(by_id(&spans, parent).is_some(), "orphan: {span:#}");
        }
    }
}

#[test]
fn an_approval_wait_is_a_child_span_of_the_step_that_asked() {
    let scratch = Scratch::new();
    let receiver = OtlpReceiver::start(&scratch, false);
    let config = scratch.demo_config(&format!(
        "{}\n[[policy.rule]]\nname = \"confirm-add\"\nhook = \"steps/toolCallRequest\"\ntool = \"add\"\ndecision = \"ask\"\nreasoning = \"additions need a human\"\nask = {{ question = \"Allow this addition?\", timeout_seconds = 10 }}\n",
        telemetry(&receiver.http_endpoint(), "http/protobuf")
    ));
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({"elicitation": {}}));
    proxy.send(&traced_call(9, "add", json!({"a": 9, "b": 1})));
    let (ask, _) = proxy.recv_until(|m| m["method"] == "elicitation/create");
    proxy.send(&json!({"jsonrpc": "2.0", "id": ask["id"],
        "result": {"action": "accept", "content": {"approve": true}}}));
    assert_eq!(
        proxy.response(&json!(9))["result"]["content"][0]["text"],
        "10"
    );
    assert!(proxy.finish().success());
    let spans = receiver.spans_when(|spans| !named(spans, "acs.session.end").is_empty());
    let call = request_span(&spans, "9");
    let step = children(&spans, call, "gen_ai.tool.call");
    assert_eq!(step.len(), 1, "{spans:#?}");
    let wait = children(&spans, step[0], "acs.approval.wait");
    assert_eq!(
        wait.len(),
        1,
        "one approval wait under the step: {spans:#?}"
    );
    assert_eq!(attribute(wait[0], "acs.decision"), "ask");
    assert_eq!(wait[0]["trace_id"], AGENT_TRACE);
}

#[test]
fn with_tracing_off_a_traceparent_in_meta_is_forwarded_byte_for_byte() {
    let scratch = Scratch::new();
    let config = scratch.demo_config("");
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    let call = traced_call(3, "echo", json!({"text": "untouched"}));
    proxy.send(&call);
    assert_eq!(
        proxy.response(&json!(3))["result"]["content"][0]["text"],
        "untouched"
    );
    assert!(proxy.finish().success());
    assert!(
        scratch.server_lines().contains(&call.to_string()),
        "the server received other bytes"
    );
}

#[test]
fn spans_go_over_grpc_and_the_trace_continues_in_a_remote_guardian() {
    let scratch = Scratch::new();
    let receiver = OtlpReceiver::start(&scratch, true);
    let guardian = TestGuardian::http(&scratch, &json!({}));
    let config = guardian.proxy_config(&scratch, "", &telemetry(&receiver.grpc_endpoint(), "grpc"));
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    proxy.send(&traced_call(4, "echo", json!({"text": "remote"})));
    assert_eq!(
        proxy.response(&json!(4))["result"]["content"][0]["text"],
        "remote"
    );
    assert!(proxy.finish().success());
    let spans = receiver.spans_when(|spans| !named(spans, "acs.session.end").is_empty());
    assert!(!spans.is_empty() && spans.iter().all(|s| s["transport"] == "grpc"));

    let call = request_span(&spans, "4");
    let step = children(&spans, call, "gen_ai.tool.call");
    assert_eq!(step.len(), 1);
    assert_eq!(
        decision_events(step[0])[0]["attributes"]["acs.evaluator"],
        "remote"
    );
    let evaluation = children(&spans, step[0], "acs.guardian.evaluate");
    assert_eq!(evaluation.len(), 1);
    assert_eq!(evaluation[0]["kind"], CLIENT);
    assert_eq!(attribute(evaluation[0], "acs.guardian.kind"), "remote");
    // The Guardian saw the evaluation's span as the caller of its request.
    let expected = format!(
        "00-{AGENT_TRACE}-{}-01",
        evaluation[0]["span_id"].as_str().unwrap()
    );
    let records = guardian.records();
    assert!(
        records
            .iter()
            .any(|record| record["traceparent"] == expected.as_str()
                && record["envelope"]["method"] == "steps/toolCallRequest"),
        "the Guardian did not receive {expected}: {records:#?}"
    );
}

#[tokio::test]
async fn streamable_http_continues_the_header_trace_and_passes_it_to_an_http_server() {
    let scratch = Scratch::new();
    let receiver = OtlpReceiver::start(&scratch, false);
    let upstream = StreamableServer::start().await;
    let text = format!(
        "[[upstream]]\nname = \"net\"\nurl = {:?}\nshutdown_grace_ms = 500\n\n[audit]\npath = {:?}\n\n{}\n{}",
        upstream.url,
        scratch.audit_log().display().to_string(),
        listen_section("http", ""),
        telemetry(&receiver.http_endpoint(), "http/protobuf"),
    );
    let path = scratch.path("proxy.toml");
    std::fs::write(&path, text).unwrap();
    let mut proxy = NetProxy::start(&path);

    let version = "2026-07-28";
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "query", "arguments": {"sql": "select 1"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": version,
                  "io.modelcontextprotocol/clientInfo": {"name": "traced-agent", "version": "1"},
                  "io.modelcontextprotocol/clientCapabilities": {}}}});
    let response = client(None)
        .post(proxy.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", ACCEPT_BOTH)
        .header("mcp-protocol-version", version)
        .header("mcp-method", "tools/call")
        .header("mcp-name", "query")
        .header("traceparent", agent_traceparent())
        .header("tracestate", "agent=2")
        .body(body.to_string())
        .send()
        .await
        .expect("POST");
    assert!(response.status().is_success(), "{}", response.status());
    let (reply, _) = read_reply(response, &json!(9)).await;
    assert_eq!(reply["result"]["content"][0]["text"], "queried", "{reply}");
    proxy.terminate();

    let spans = receiver.spans_when(|spans| !named(spans, "acs.session.end").is_empty());
    let call = request_span(&spans, "9");
    assert_eq!(call["trace_id"], AGENT_TRACE);
    assert_eq!(call["parent_span_id"], AGENT_SPAN);
    let upstream_span = children(&spans, call, "tools/call query")
        .into_iter()
        .find(|span| span["kind"] == CLIENT)
        .expect("the upstream span");
    let seen = upstream
        .seen()
        .into_iter()
        .find(|seen| seen.rpc_method().as_deref() == Some("tools/call"))
        .expect("the call reached the server");
    assert_eq!(
        seen.header("traceparent"),
        format!(
            "00-{AGENT_TRACE}-{}-01",
            upstream_span["span_id"].as_str().unwrap()
        )
    );
    assert_eq!(seen.header("tracestate"), "agent=2");
}

#[test]
fn a_collector_that_is_down_costs_the_calls_nothing_and_drops_are_counted() {
    let scratch = Scratch::new();
    let metrics = free_port();
    let closed = free_port();
    let config = scratch.demo_config(&format!(
        "{}queue_size = 4\n\n[metrics]\naddress = \"127.0.0.1:{metrics}\"\n",
        telemetry(&format!("http://127.0.0.1:{closed}"), "http/protobuf")
    ));
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    let mut failed = 0;
    for id in 1..=20 {
        proxy.send(&tool_call(id, "echo", json!({"text": "still answered"})));
        if proxy.response(&json!(id))["result"]["content"][0]["text"] != "still answered" {
            failed += 1;
        }
    }
    assert_eq!(failed, 0, "calls failed while the collector was down");
    let deadline = std::time::Instant::now() + support::WAIT;
    let dropped = loop {
        let text = metrics_text(metrics);
        let dropped: f64 = text
            .lines()
            .filter(|line| line.starts_with("acs_proxy_trace_spans_dropped_total{"))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        if dropped > 0.0 || std::time::Instant::now() > deadline {
            break dropped;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(dropped > 0.0, "no dropped spans were counted");
    assert!(proxy.finish().success());
}
