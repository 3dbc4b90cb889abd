//! What tracing costs per MCP call: `cargo bench --bench tracing`.
//!
//! One `tools/call` through the proxy (`hooks.tools_call = "both"`) makes
//! these spans: the request's server span with the two wrapped hooks'
//! decision events, `gen_ai.tool.call` with its Guardian span and decision,
//! the upstream client span whose context is written into the forwarded
//! message's `_meta`, and `gen_ai.tool.result` with its Guardian span and
//! decision. `per_call/off` runs that instrumentation with tracing off (the
//! one check it makes), `per_call/on_sampled` with tracing on, every trace
//! sampled, spans exported over OTLP/HTTP to an in-process collector that
//! answers 200 (export runs on its own thread; spans it cannot take in time
//! are dropped and counted, as in the proxy).

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use acs_proxy::hooks::decision::Decision;
use acs_proxy::hooks::tool_call::{ToolCallRequest, ToolCallResult};
use acs_proxy::hooks::{HookRequest, Metadata};
use acs_proxy::jsonrpc::MessageTree;
use acs_proxy::metrics::TRACE_SPANS_DROPPED;
use acs_proxy::telemetry::settings::{Exporter, Protocol};
use acs_proxy::telemetry::{self, spans, TelemetryConfig, Trace};
use acs_proxy::transport::client_tls::TlsSettings;
use criterion::Criterion;
use serde_json::{json, Value};
use uuid::Uuid;

fn metadata() -> Metadata {
    Metadata {
        agent_id: "bench-agent".into(),
        session_id: Uuid::from_u128(0x0123_4567_89ab_4cde_8f01_2345_6789_abcd),
        environment: None,
        user: None,
    }
}

fn call() -> Value {
    json!({"jsonrpc": "2.0", "id": 4242, "method": "tools/call",
           "params": {"name": "echo", "arguments": {"text": "the quick brown fox"}}})
}

/// The spans of one call, as the relay makes them.
fn one_call(
    session: &Trace,
    request_hook: &HookRequest,
    result_hook: &HookRequest,
    metadata: &Metadata,
    allow: &Decision,
    message: &mut Value,
) {
    let request = spans::request(None, session, "tools/call", "session", "4242", Some("echo"));
    spans::decision(&request, allow, "embedded");
    for hook in [request_hook, result_hook] {
        let step = spans::step(&request, hook, metadata);
        let evaluation = spans::guardian(&step, &hook.method, "embedded");
        evaluation.annotate(|| vec![opentelemetry::KeyValue::new("acs.decision", "allow")]);
        evaluation.end();
        spans::decision(&step, allow, "embedded");
        step.end();
        if std::ptr::eq(hook, request_hook) {
            let upstream = spans::upstream(&request, "tools/call", Some("echo"), "demo");
            if let Some(carrier) = upstream.carrier() {
                carrier.write_meta(message);
            }
            upstream.end();
            spans::decision(&request, allow, "embedded");
        }
    }
    request.end();
}

fn bench(c: &mut Criterion, name: &str, session: &Trace) {
    let metadata = metadata();
    let message = call();
    let provider: Arc<str> = Arc::from("demo");
    let request_payload = ToolCallRequest::read(
        &Arc::new(MessageTree::from_value(message.clone())),
        &provider,
    )
    .expect("payload");
    let request_hook = HookRequest::new("steps/toolCallRequest", request_payload, None);
    let response = json!({"jsonrpc": "2.0", "id": 4242,
        "result": {"content": [{"type": "text", "text": "the quick brown fox"}]}});
    let result = ToolCallResult::read(
        &Arc::new(MessageTree::from_value(response)),
        Arc::from("echo"),
        &provider,
        None,
        1,
    );
    let result_hook = HookRequest::new("steps/toolCallResult", result, None);
    let mut group = c.benchmark_group("tracing");
    group.measurement_time(Duration::from_secs(3));
    group.sample_size(30);
    let allow = Decision::allow();
    group.bench_function(name, |b| {
        let mut message = message.clone();
        b.iter(|| {
            one_call(
                black_box(session),
                &request_hook,
                &result_hook,
                &metadata,
                &allow,
                &mut message,
            )
        })
    });
    group.finish();
}

/// An OTLP/HTTP collector that takes every export and answers 200.
async fn sink() -> String {
    let router = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(|_body: axum::body::Bytes| async { "" }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the sink");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{addr}")
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c, "per_call/off", &Trace::off());

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let endpoint = runtime.block_on(sink());
    let config = TelemetryConfig {
        traces: Some(Exporter::Otlp),
        endpoint: Some(endpoint),
        protocol: Some(Protocol::HttpProtobuf),
        sampler: Some(acs_proxy::telemetry::settings::SamplerName::AlwaysOn),
        ..TelemetryConfig::default()
    };
    let tls = TlsSettings::default().client_config().expect("TLS");
    let http = reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .build()
        .expect("client");
    runtime
        .block_on(async { telemetry::init(&config, http) })
        .expect("tracing on");
    let session_hook = HookRequest::new("steps/sessionStart", json!({}), None);
    let session = spans::session(&session_hook, &metadata());
    bench(&mut c, "per_call/on_sampled", &session);
    runtime.block_on(telemetry::shutdown());
    for reason in ["queue_full", "export_failed"] {
        println!(
            "spans dropped ({reason}): {}",
            TRACE_SPANS_DROPPED.with_label_values(&[reason]).get()
        );
    }
    c.final_summary();
}
