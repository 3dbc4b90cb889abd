//! Micro benchmarks of the per-message work on the proxy's hot path.
//!
//! `cargo bench --bench micro` (add a filter after `--` to run a subset).
//! Every benchmark is short (2 s of measurement, 20 samples) so the whole
//! run finishes in a few minutes on two shared cores. Numbers are reported,
//! never asserted: see BENCHMARKS.md for the targets they are read against.
//!
//! After the criterion groups, `audit_sustained` appends 10k, 100k and 1M
//! entries per fsync mode and prints entries/s for each run length, which is
//! how "flat per-entry cost" is checked (criterion's per-append figure hides
//! the writer behind a 1,024-entry queue).

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use acs_proxy::audit::{
    entry_hash, entry_hash_of, AuditLog, AuditRecord, AuditSettings, ContextEntry, FsyncMode,
};
use acs_proxy::enforce::modify::{self, Target};
use acs_proxy::enforce::Action;
use acs_proxy::guardian::decision::{Modifications, Redaction};
use acs_proxy::guardian::remote::signing::{sign_request, SessionKey, SigningSecret};
use acs_proxy::guardian::DecisionSource;
use acs_proxy::hooks::tool_call::{ToolCallRequest, ToolCallResult};
use acs_proxy::hooks::{HookPayload, HookRequest, Identity, IdentityDescriptor, Metadata};
use acs_proxy::jcs;
use acs_proxy::jsonrpc::{peek_frame, Frame, MessageTree};
use acs_proxy::policy::{HookView, Policy};
use acs_proxy::session::Direction;
use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput};
use serde_json::{json, Map, Value};
use uuid::Uuid;

/// Builds a 200-byte `tools/call` echo request, as an agent sends it.
fn tools_call_200() -> Vec<u8> {
    let head = r#"{"jsonrpc":"2.0","id":4242,"method":"tools/call","params":{"name":"echo","arguments":{"text":""#;
    let tail = r#""}}}"#;
    let pad = 200 - head.len() - tail.len();
    let text: String = "the quick brown fox jumps over the lazy dog "
        .chars()
        .cycle()
        .take(pad)
        .collect();
    let line = format!("{head}{text}{tail}");
    assert_eq!(line.len(), 200);
    line.into_bytes()
}

/// A message as the relay reads it off the wire.
fn read_message(message: &Value) -> MessageTree {
    MessageTree::parse(Bytes::from(message.to_string())).expect("a well-formed message")
}

/// The demo server's answer to that request.
fn tools_call_response(request: &Value) -> Value {
    let text = request["params"]["arguments"]["text"].clone();
    json!({"jsonrpc": "2.0", "id": 4242, "result": {"content": [{"type": "text", "text": text}]}})
}

fn metadata() -> Metadata {
    Metadata {
        agent_id: "bench-agent".into(),
        session_id: Uuid::from_u128(0x0123_4567_89ab_4cde_8f01_2345_6789_abcd),
        environment: Some("production".into()),
        // Every session has a caller; over stdio, the OS user.
        user: Some(std::sync::Arc::new(Identity {
            user_id: "deploy".into(),
            roles: vec!["operator".into()],
            tenant: None,
            descriptor: IdentityDescriptor::PosixUid {
                uid: 1000,
                user: Some("deploy".into()),
            },
        })),
    }
}

/// The criterion settings every group uses: short and small.
fn configure<M: criterion::measurement::Measurement>(group: &mut criterion::BenchmarkGroup<'_, M>) {
    group
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
}

fn bench_peek(c: &mut Criterion) {
    let line = Bytes::from(tools_call_200());
    let mut group = c.benchmark_group("peek");
    configure(&mut group);
    group.throughput(Throughput::Bytes(line.len() as u64));
    group.bench_function("peek_frame/tools_call_200B", |b| {
        b.iter(|| match peek_frame(black_box(line.clone())) {
            Ok(Frame::Single(message)) => black_box(message),
            other => panic!("{other:?}"),
        })
    });
    // Not a peek, but the other per-message parse the relay does: the
    // tree its hooks read, against the `Value` it replaced.
    group.bench_function("parse_to_tree/tools_call_200B", |b| {
        b.iter(|| MessageTree::parse(black_box(line.clone())).unwrap())
    });
    group.bench_function("parse_to_value/tools_call_200B", |b| {
        b.iter(|| serde_json::from_slice::<Value>(black_box(&line)).unwrap())
    });
    group.finish();
}

fn bench_hooks(c: &mut Criterion) {
    let message: Value = serde_json::from_slice(&tools_call_200()).unwrap();
    let response = tools_call_response(&message);
    let metadata = metadata();
    let tool: Arc<str> = Arc::from("echo");
    let mut group = c.benchmark_group("hook");
    configure(&mut group);
    group.bench_function("wrapped_envelope/new+params", |b| {
        b.iter(|| {
            let hook = HookRequest::new(
                "protocols/MCP/tools/call",
                black_box(&message).clone(),
                Some(tool.clone()),
            );
            black_box(hook.params(&metadata))
        })
    });
    let shared_message = Arc::new(read_message(&message));
    let shared_response = Arc::new(read_message(&response));
    let provider: Arc<str> = Arc::from("demo");
    group.bench_function("tool_call_request/payload+new+params", |b| {
        b.iter(|| {
            let payload = ToolCallRequest::read(black_box(&shared_message), &provider).unwrap();
            let hook = HookRequest::new("steps/toolCallRequest", payload, Some(tool.clone()));
            black_box(hook.params(&metadata))
        })
    });
    group.bench_function("tool_call_result/payload+new+params", |b| {
        b.iter(|| {
            let result = ToolCallResult::read(
                black_box(&shared_response),
                tool.clone(),
                &provider,
                Some(Uuid::nil()),
                0,
            );
            let hook = HookRequest::new("steps/toolCallResult", result, Some(tool.clone()));
            black_box(hook.params(&metadata))
        })
    });
    let params =
        HookRequest::new("protocols/MCP/tools/call", message.clone(), Some(tool)).params(&metadata);
    group.bench_function("request_hash/jcs+sha256(params)", |b| {
        b.iter(|| black_box(jcs::value_digest(black_box(&params))))
    });
    // What the relay does instead: streams `params` into the hasher from
    // the hook's fields, without building the object.
    let hook = HookRequest::new(
        "protocols/MCP/tools/call",
        Arc::clone(&shared_message),
        Some(Arc::from("echo")),
    );
    group.bench_function("request_hash/params_digest(streamed)", |b| {
        b.iter(|| black_box(black_box(&hook).params_digest(&metadata)))
    });
    group.finish();
}

/// An audit entry as `record_hook` makes it for an allowed `tools/call`.
fn typical_entry() -> Value {
    json!({
        "entry_id": "17",
        "step_id": "6f1c2a3b-4d5e-4f60-8172-8394a5b6c7d8",
        "step_type": "steps/toolCallRequest",
        "session_id": "01234567-89ab-4cde-8f01-23456789abcd",
        "timestamp": "2026-12-02T11:15:05.123Z",
        "request_hash": "9f2c0d6be7a1c3f45e8b2d7a6c1f0e9d8b7a6c5f4e3d2c1b0a9f8e7d6c5b4a39",
        "decision": "allow",
        "decision_source": "embedded",
        "direction": "client_to_server",
        "mcp_method": "tools/call",
        "mcp_id": 4242,
        "action": "forwarded",
        "previous_hash": "3a7bd3e2360a3d29eea436fcfb7e44c735d117c42d1c1835420b6b9942dd4f1b",
        "entry_hash": ""
    })
}

fn bench_jcs(c: &mut Criterion) {
    let entry = typical_entry();
    let mut group = c.benchmark_group("jcs");
    configure(&mut group);
    group.bench_function("canonical+sha256/audit_entry", |b| {
        b.iter(|| {
            let bytes = jcs::canonical_bytes(black_box(&entry)).unwrap();
            black_box(jcs::sha256_hex(&bytes))
        })
    });
    // The canonicalizer the proxy used before the streaming writer, kept as
    // the yardstick (and the differential test's reference).
    group.bench_function("reference_canonicalizer+sha256/audit_entry", |b| {
        b.iter(|| {
            let bytes = serde_json_canonicalizer::to_vec(black_box(&entry)).unwrap();
            black_box(jcs::sha256_hex(&bytes))
        })
    });
    group.bench_function("value_digest/audit_entry", |b| {
        b.iter(|| black_box(jcs::value_digest(black_box(&entry))))
    });
    group.bench_function("entry_hash_of/audit_entry", |b| {
        b.iter(|| black_box(entry_hash_of(black_box(&entry)).unwrap()))
    });
    // The path the chain head takes: straight from the typed entry.
    let typed: ContextEntry = serde_json::from_value(entry.clone()).unwrap();
    group.bench_function("entry_hash/typed_audit_entry", |b| {
        b.iter(|| black_box(entry_hash(black_box(&typed)).unwrap()))
    });
    group.finish();
}

fn bench_signing(c: &mut Criterion) {
    let message: Value = serde_json::from_slice(&tools_call_200()).unwrap();
    let metadata = metadata();
    let hook = HookRequest::new("protocols/MCP/tools/call", message, None);
    let mut envelope = hook.envelope(7, &metadata);
    let secret = SigningSecret::from_bytes([42u8; 32]).unwrap();
    let key = SessionKey::derive(&secret, &metadata.session_id.to_string());
    let mut group = c.benchmark_group("signing");
    configure(&mut group);
    // Signing in place replaces the previous signature, so the same
    // envelope can be signed over and over.
    group.bench_function("sign_request/hmac_sha256_envelope", |b| {
        b.iter(|| sign_request(black_box(&mut envelope), &key, "k1").unwrap())
    });
    group.bench_function("session_key/hkdf_derive", |b| {
        b.iter(|| SessionKey::derive(&secret, black_box("01234567-89ab-4cde-8f01-23456789abcd")))
    });
    group.finish();
}

/// The three rules of the sample `proxy.toml` (deny, redact, glob + match).
const SAMPLE_RULES: &str = r#"
[[policy.rule]]
name = "no-environment-dump"
hook = "steps/toolCallRequest"
tool = "get-env"
decision = "deny"
reasoning = "dumping the server environment would expose credentials"

[[policy.rule]]
name = "redact-ssn"
hook = "steps/toolCallResult"
decision = "modify"
reasoning = "US social security numbers are removed from tool output"
redact = { pointer = "/outputs", regex = '\b\d{3}-\d{2}-\d{4}\b', replacement = "[REDACTED SSN]" }

[[policy.rule]]
name = "no-destructive-shell"
hook = "steps/toolCallRequest"
tool = "run_*"
match = { pointer = "/arguments/command/value", regex = 'rm\s+-rf' }
decision = "deny"
reasoning = "recursive deletes are not allowed"
"#;

/// A policy of `n` rules shaped like a real one that grew: the sample rules
/// first, then one rule per tool (distinct exact names on
/// `steps/toolCallRequest`), every `glob_every`-th of them a tool glob
/// (`svc123_*`), and every 25th a wrapped-message rule with a payload
/// match. None of them matches an `echo` call.
fn policy_text(n: usize, glob_every: Option<usize>) -> String {
    let mut text = String::from("[policy]\ndefault = \"allow\"\n");
    if n == 1 {
        let first = SAMPLE_RULES.split("\n\n").next().unwrap_or_default();
        text.push_str(first);
        text.push('\n');
        return text;
    }
    text.push_str(SAMPLE_RULES);
    for i in 3..n {
        let selector = if glob_every.is_some_and(|every| i % every == 0) {
            format!("hook = \"steps/toolCallRequest\"\ntool = \"svc{i}_*\"")
        } else if i % 25 == 7 {
            format!(
                "hook = \"protocols/MCP/tools/*\"\nmatch = {{ pointer = \"/params/arguments/path\", regex = '^/etc/{i}/' }}"
            )
        } else {
            format!("hook = \"steps/toolCallRequest\"\ntool = \"tool-{i}\"")
        };
        text.push_str(&format!(
            "\n[[policy.rule]]\nname = \"rule-{i}\"\n{selector}\ndecision = \"deny\"\nreasoning = \"rule {i}\"\n"
        ));
    }
    text
}

fn bench_policy(c: &mut Criterion) {
    let message: Value = serde_json::from_slice(&tools_call_200()).unwrap();
    let provider: Arc<str> = Arc::from("demo");
    let shared_message = Arc::new(read_message(&message));
    let step = HookPayload::from(ToolCallRequest::read(&shared_message, &provider).unwrap());
    let result = HookPayload::from(ToolCallResult::read(
        &Arc::new(read_message(&tools_call_response(&message))),
        Arc::from("echo"),
        &provider,
        Some(Uuid::nil()),
        0,
    ));
    let message = HookPayload::from(shared_message);
    let sets: [(&str, usize, Option<usize>); 4] = [
        ("1", 1, Some(20)),
        ("20", 20, Some(20)),
        ("1000", 1000, Some(20)),
        ("1000_no_tool_globs", 1000, None),
    ];
    let mut group = c.benchmark_group("policy_evaluate");
    configure(&mut group);
    for (label, n, globs) in sets {
        let policy = Policy::from_toml_str("bench.toml", &policy_text(n, globs))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(policy.rule_count(), n);
        let request = HookView::new("steps/toolCallRequest", Some("echo"), &step);
        assert_eq!(policy.matching_rule(&request), None, "echo must not match");
        group.bench_with_input(
            BenchmarkId::new("toolCallRequest_echo_miss", label),
            &request,
            |b, hook| b.iter(|| black_box(policy.evaluate(black_box(hook)))),
        );
        let wrapped = HookView::new("protocols/MCP/tools/call", Some("echo"), &message);
        group.bench_with_input(
            BenchmarkId::new("wrapped_tools_call_echo_miss", label),
            &wrapped,
            |b, hook| b.iter(|| black_box(policy.evaluate(black_box(hook)))),
        );
        let outcome = HookView::new("steps/toolCallResult", Some("echo"), &result);
        group.bench_with_input(
            BenchmarkId::new("toolCallResult_echo_redact_scan", label),
            &outcome,
            |b, hook| b.iter(|| black_box(policy.evaluate(black_box(hook)))),
        );
        if n == 1000 {
            // The last exact-tool rule: a hit found through the index.
            let hit_payload =
                HookPayload::from(json!({"tool": {"name": "tool-998"}, "arguments": {}}));
            let hit = HookView::new("steps/toolCallRequest", Some("tool-998"), &hit_payload);
            assert_eq!(policy.matching_rule(&hit), Some("rule-998"));
            group.bench_with_input(
                BenchmarkId::new("toolCallRequest_last_rule_hit", label),
                &hit,
                |b, hook| b.iter(|| black_box(policy.evaluate(black_box(hook)))),
            );
        }
    }
    let compile_text = policy_text(1000, Some(20));
    group.bench_function("compile/from_toml_str_1000", |b| {
        b.iter(|| Policy::from_toml_str("bench.toml", black_box(&compile_text)).unwrap())
    });
    group.finish();
}

fn bench_modify(c: &mut Criterion) {
    let mut response = json!({"jsonrpc": "2.0", "id": 4242, "result": {"content": [
        {"type": "text", "text": "name: Ada, email: ada@example.com, ssn: 123-45-6789"}]}});
    let redact = Modifications {
        modified_content: None,
        redactions: vec![Redaction {
            path: "/result/content/0/text".into(),
            replacement: "name: Ada, email: ada@example.com, ssn: [REDACTED SSN]".into(),
        }],
        parameter_overrides: Map::new(),
    };
    let mut request: Value = serde_json::from_slice(&tools_call_200()).unwrap();
    let mut overrides = Map::new();
    overrides.insert("limit".into(), json!(10));
    let set = Modifications {
        modified_content: None,
        redactions: Vec::new(),
        parameter_overrides: overrides,
    };
    let mut group = c.benchmark_group("modify_apply");
    configure(&mut group);
    // Applying the same change again rewrites the same member, so the
    // document does not need resetting between iterations.
    group.bench_function("redact/wrapped_response", |b| {
        b.iter(|| {
            modify::apply(
                black_box(&mut response),
                &redact,
                Target::WrappedMcpResponse,
            )
        })
    });
    group.bench_function("override/wrapped_request", |b| {
        b.iter(|| modify::apply(black_box(&mut request), &set, Target::WrappedMcpRequest))
    });
    group.finish();
}

/// What `record_hook` appends for an allowed `tools/call` request hook.
fn typical_record(step: u64) -> Box<AuditRecord> {
    AuditRecord::new(
        Uuid::from_u128(u128::from(step)).to_string(),
        "steps/toolCallRequest",
    )
    .request_hash(
        acs_proxy::jcs::HexDigest::parse(
            "9f2c0d6be7a1c3f45e8b2d7a6c1f0e9d8b7a6c5f4e3d2c1b0a9f8e7d6c5b4a39",
        )
        .unwrap(),
    )
    .decision("allow")
    .decision_source(DecisionSource::Embedded)
    .reason_codes(Vec::new())
    .direction(Direction::ClientToServer)
    .action(Action::Forwarded)
    .mcp_method("tools/call")
    .mcp_id(json!(step))
}

fn runtime() -> tokio::runtime::Runtime {
    // Two workers, as the proxy has on this two-core machine.
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn bench_audit(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("audit_append");
    configure(&mut group);
    group.throughput(Throughput::Elements(1));
    for (label, fsync) in [("never", FsyncMode::Never), ("batch", FsyncMode::Batch)] {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let settings = AuditSettings {
            path: dir.path().join("audit.jsonl"),
            fsync,
        };
        let log = rt.block_on(async { AuditLog::open(&settings) }).unwrap();
        let chain = log.session("01234567-89ab-4cde-8f01-23456789abcd");
        let mut step = 0u64;
        group.bench_function(BenchmarkId::new("append", label), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        step += 1;
                        chain.append(typical_record(step)).await.unwrap();
                    }
                    let elapsed = start.elapsed();
                    // Drain outside the timed region so samples stay independent.
                    log.flush().await.unwrap();
                    elapsed
                })
            })
        });
        drop(chain);
        drop(log);
    }
    group.finish();
}

/// Sustained appends: N entries then a flush, timed together, for growing N.
/// A flat per-entry cost shows as the same entries/s at every N.
fn audit_sustained() {
    let rt = runtime();
    println!("\naudit_sustained (one appender, typical tools/call entry, total incl. final flush)");
    println!("| fsync | entries | seconds | entries/s | ns/entry | file MB |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (label, fsync) in [("never", FsyncMode::Never), ("batch", FsyncMode::Batch)] {
        for n in [10_000u64, 100_000, 1_000_000] {
            let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
            let settings = AuditSettings {
                path: dir.path().join("audit.jsonl"),
                fsync,
            };
            let elapsed = rt.block_on(async {
                let log = AuditLog::open(&settings).unwrap();
                let chain = log.session("01234567-89ab-4cde-8f01-23456789abcd");
                let start = Instant::now();
                for step in 0..n {
                    chain.append(typical_record(step)).await.unwrap();
                }
                log.flush().await.unwrap();
                start.elapsed()
            });
            let bytes = std::fs::metadata(&settings.path).map_or(0, |m| m.len());
            let secs = elapsed.as_secs_f64();
            println!(
                "| {label} | {n} | {secs:.3} | {:.0} | {:.0} | {:.1} |",
                n as f64 / secs,
                secs * 1e9 / n as f64,
                bytes as f64 / 1e6
            );
        }
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench_peek(&mut c);
    bench_hooks(&mut c);
    bench_jcs(&mut c);
    bench_signing(&mut c);
    bench_policy(&mut c);
    bench_modify(&mut c);
    bench_audit(&mut c);
    c.final_summary();
    // `cargo bench --bench micro -- FILTER`: run the sustained audit run
    // only when no filter is given or the filter names it.
    let filter = std::env::args().skip(1).find(|arg| !arg.starts_with('-'));
    if filter.is_none_or(|f| "audit_sustained".contains(f.as_str())) {
        audit_sustained();
    }
}
