//! The Rego engine's per-hook cost: `cargo bench --bench rego`.
//!
//! Two policies, evaluated for a `steps/toolCallRequest` hook exactly as
//! the embedded Guardian does (input built from the hook, metadata and
//! gateway context; the answer read as JSON):
//! - `rules_20`: twenty rules over tool names, roles and arguments;
//! - `allow_list_1000`: a data-driven allow list of 1,000 (user, tool)
//!   entries, looked up by key.
//!
//! Each also `_interpreted`: the same policy walked by regorus's
//! interpreter instead of run on its VM (what the proxy does).
//!
//! `regorus_clone_vs_compiled` compares the two ways regorus offers to
//! evaluate a prepared policy: cloning the prepared `Engine` per hook (what
//! the proxy does) and `CompiledPolicy::eval_with_input`.
//!
//! After criterion's means, each case is timed 20,000 times one by one and
//! its p50 / p99 printed: the figures BENCHMARKS.md's targets are read
//! against (≤ 15 µs p50 for 20 rules, ≤ 2× that for the allow list).

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use acs_proxy::hooks::{GatewayContext, HookRequest, Identity, IdentityDescriptor, Metadata};
use acs_proxy::policy::rego::{RegoSettings, DEFAULT_QUERY};
use acs_proxy::policy::{RegoPolicy, Verdict};
use criterion::{criterion_group, Criterion};
use serde_json::json;
use uuid::Uuid;

/// Twenty rules: tool allow lists per role, argument checks, environment.
fn twenty_rules() -> String {
    let mut text = String::from(
        "package acs\n\nimport rego.v1\n\n\
         tool := input.params.payload.tool.name\n\
         roles := input.params.metadata.user_context.roles\n\
         args := input.params.payload.arguments\n\
         call if input.method == \"steps/toolCallRequest\"\n\n",
    );
    for i in 0..16 {
        text.push_str(&format!(
            "decision := {{\"decision\": \"deny\", \"reasoning\": \"rule {i}\", \"reason_codes\": [\"r{i}\"]}} if {{\n\
             \tcall\n\ttool == \"tool-{i}\"\n\tnot \"admin\" in roles\n\tregex.match(\"^/etc/\", args.path.value)\n}}\n\n"
        ));
    }
    text.push_str(
        "decision := {\"decision\": \"deny\", \"reasoning\": \"prod\"} if {\n\tcall\n\tinput.params.metadata.environment == \"production\"\n\tstartswith(tool, \"debug_\")\n}\n\n\
         decision := {\"decision\": \"ask\", \"reasoning\": \"destructive\", \"ask_details\": {\"timeout_seconds\": 60}} if {\n\tcall\n\tinput.context.tool.annotations.destructiveHint == true\n\t\"developer\" in roles\n}\n\n\
         decision := {\"decision\": \"deny\", \"reasoning\": \"shell\"} if {\n\tcall\n\ttool == \"run_command\"\n\tcontains(args.command.value, \"rm -rf\")\n}\n\n\
         decision := {\"decision\": \"allow\"} if {\n\tcall\n\tnot tool in {\"run_command\"}\n\tnot input.context.tool.annotations.destructiveHint\n\tnot startswith(tool, \"debug_\")\n}\n",
    );
    text
}

/// A 1,000-entry allow list of `user/tool` keys, looked up in one step.
fn allow_list() -> (String, String) {
    let rego = "package acs\n\nimport rego.v1\n\n\
        key := sprintf(\"%s/%s\", [input.params.metadata.user_context.user_id, input.params.payload.tool.name])\n\n\
        decision := {\"decision\": \"allow\"} if data.allow[key]\n\n\
        decision := {\"decision\": \"deny\", \"reasoning\": \"not on the allow list\"} if not data.allow[key]\n"
        .to_owned();
    let entries: serde_json::Map<String, serde_json::Value> = (0..1000)
        .map(|i| (format!("user-{}/tool-{}", i % 50, i), json!(true)))
        .collect();
    (rego, json!({ "allow": entries }).to_string())
}

fn load(dir: &Path, rego: &str, data: Option<&str>) -> RegoPolicy {
    std::fs::write(dir.join("policy.rego"), rego).expect("write policy");
    let data = data.map(|text| {
        let path = dir.join("data.json");
        std::fs::write(&path, text).expect("write data");
        path
    });
    RegoPolicy::load(&RegoSettings {
        base: dir.to_owned(),
        patterns: vec!["policy.rego".into()],
        data: data.into_iter().collect(),
        query: DEFAULT_QUERY.into(),
        default: Verdict::Deny,
        policy_id: "bench".into(),
        with_tests: false,
    })
    .expect("policy loads")
}

struct Case {
    hook: HookRequest,
    metadata: Metadata,
    context: GatewayContext,
}

fn case(user: &str, tool: &str) -> Case {
    let payload = json!({
        "tool": {"name": tool, "provider": "bench"},
        "arguments": {"path": {"value": "/workspace/src/main.rs"}, "command": {"value": "ls"}},
    });
    Case {
        hook: HookRequest::new("steps/toolCallRequest", payload, Some(tool.into())),
        metadata: Metadata {
            agent_id: "bench-agent".into(),
            session_id: Uuid::nil(),
            environment: Some("production".into()),
            user: Some(Arc::new(Identity {
                user_id: user.into(),
                roles: vec!["developer".into()],
                tenant: None,
                descriptor: IdentityDescriptor::Configured,
            })),
        },
        context: GatewayContext {
            route: "demo".into(),
            transport: "stdio".into(),
            client_address: None,
            limits: None,
            tool: Some(Arc::new(
                json!({"name": tool, "annotations": {"readOnlyHint": true}}),
            )),
            ..GatewayContext::default()
        },
    }
}

fn evaluate(policy: &RegoPolicy, case: &Case) {
    let answer = policy
        .evaluate(&case.hook, &case.metadata, Some(&case.context))
        .expect("evaluates");
    black_box(answer.expect("defined"));
}

struct Fixtures {
    _dirs: [tempfile::TempDir; 2],
    rules: RegoPolicy,
    list: RegoPolicy,
    rules_case: Case,
    list_case: Case,
}

fn fixtures() -> Fixtures {
    let rules_dir = tempfile::tempdir().expect("temp dir");
    let list_dir = tempfile::tempdir().expect("temp dir");
    let rules = load(rules_dir.path(), &twenty_rules(), None);
    let (rego, data) = allow_list();
    let list = load(list_dir.path(), &rego, Some(&data));
    Fixtures {
        _dirs: [rules_dir, list_dir],
        rules,
        list,
        rules_case: case("alice", "tool-7"),
        list_case: case("user-7", "tool-507"),
    }
}

fn bench_rego(c: &mut Criterion) {
    let f = fixtures();
    let mut group = c.benchmark_group("rego");
    group
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    group.bench_function("rules_20", |b| b.iter(|| evaluate(&f.rules, &f.rules_case)));
    group.bench_function("allow_list_1000", |b| {
        b.iter(|| evaluate(&f.list, &f.list_case))
    });
    let (rules, list) = (f.rules.clone().interpreted(), f.list.clone().interpreted());
    group.bench_function("rules_20_interpreted", |b| {
        b.iter(|| evaluate(&rules, &f.rules_case))
    });
    group.bench_function("allow_list_1000_interpreted", |b| {
        b.iter(|| evaluate(&list, &f.list_case))
    });
    group.finish();
}

/// Engine clone per hook against `CompiledPolicy`, on the 20-rule policy.
fn bench_clone_vs_compiled(c: &mut Criterion) {
    let mut engine = regorus::Engine::new();
    engine
        .add_policy("policy.rego".into(), twenty_rules())
        .expect("policy parses");
    let compiled = engine
        .compile_with_entrypoint(&DEFAULT_QUERY.into())
        .expect("compiles");
    let f = fixtures();
    let input = acs_proxy::policy::rego::input_document(
        &f.rules_case.hook,
        &f.rules_case.metadata,
        Some(&f.rules_case.context),
    );
    let input = regorus::Value::from_json_str(&input.to_string()).expect("input");
    let mut group = c.benchmark_group("regorus_clone_vs_compiled");
    group
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    group.bench_function("engine_clone", |b| {
        b.iter(|| {
            let mut engine = engine.clone();
            engine.set_input(input.clone());
            black_box(engine.eval_rule(DEFAULT_QUERY.into()).expect("evaluates"))
        })
    });
    group.bench_function("compiled_policy", |b| {
        b.iter(|| black_box(compiled.eval_with_input(input.clone()).expect("evaluates")))
    });
    group.finish();
}

/// p50 / p99 of `runs` single evaluations.
fn percentiles(name: &str, runs: usize, mut once: impl FnMut()) {
    for _ in 0..runs / 10 {
        once();
    }
    let mut samples: Vec<Duration> = (0..runs)
        .map(|_| {
            let started = Instant::now();
            once();
            started.elapsed()
        })
        .collect();
    samples.sort();
    println!(
        "{name}: p50 {:.1} µs, p99 {:.1} µs ({runs} evaluations)",
        samples[runs / 2].as_secs_f64() * 1e6,
        samples[runs * 99 / 100].as_secs_f64() * 1e6,
    );
}

criterion_group!(benches, bench_rego, bench_clone_vs_compiled);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    let f = fixtures();
    percentiles("rego/rules_20", 20_000, || {
        evaluate(&f.rules, &f.rules_case)
    });
    percentiles("rego/allow_list_1000", 20_000, || {
        evaluate(&f.list, &f.list_case)
    });
    assert!(
        f.rules.runs_on_vm() && f.list.runs_on_vm(),
        "both run on the VM"
    );
    let (rules, list) = (f.rules.clone().interpreted(), f.list.clone().interpreted());
    percentiles("rego/rules_20 interpreted", 20_000, || {
        evaluate(&rules, &f.rules_case)
    });
    percentiles("rego/allow_list_1000 interpreted", 20_000, || {
        evaluate(&list, &f.list_case)
    });
}
