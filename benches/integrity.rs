//! The cost of the tool integrity checks (`[integrity]`) on a 100-tool list.
//!
//! `cargo bench --bench integrity`. A list is checked once each time the
//! server returns it (at session start and after `list_changed`), never per
//! call; a call pays only the argument check. Numbers are reported, never
//! asserted: BENCHMARKS.md records them.

use std::hint::black_box;
use std::time::Duration;

use acs_proxy::config::{IntegrityConfig, IntegrityMode};
use acs_proxy::enforce::integrity::rules::RuleSet;
use acs_proxy::enforce::integrity::scan::{scan, ScanContext};
use acs_proxy::enforce::integrity::{Integrity, Section};
use criterion::Criterion;
use serde_json::{json, Value};

/// A list of `n` tools shaped like real servers' (a few sentences of
/// description, three documented parameters).
fn tool_list(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            json!({
                "name": format!("tool_{i}"),
                "title": format!("Tool {i}"),
                "description": format!("Looks up record {i} in the inventory service and returns it as JSON. \
                    Use `fields` to choose the columns and `limit` to cap the number of rows; results are \
                    sorted by creation time, newest first."),
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "id": { "type": "string", "description": "The record's identifier." },
                        "fields": { "type": "array", "items": { "type": "string" }, "description": "Columns to return." },
                        "limit": { "type": "integer", "minimum": 1, "maximum": 500, "default": 50, "description": "Most rows returned." }
                    },
                    "required": ["id"]
                },
                "annotations": { "readOnlyHint": true }
            })
        })
        .collect()
}

fn configure<M: criterion::measurement::Measurement>(group: &mut criterion::BenchmarkGroup<'_, M>) {
    group
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
}

fn bench_list(c: &mut Criterion) {
    let tools = tool_list(100);
    let dir = tempfile::tempdir().expect("temp dir");
    let config = IntegrityConfig {
        mode: IntegrityMode::Enforce,
        pins: dir.path().join("pins.json"),
        ..IntegrityConfig::default()
    };
    let integrity = Integrity::new(&config).expect("integrity");
    // The first call pins the list (first use); every later one compares.
    integrity.evaluate("bench", Section::Tools, &tools, true);
    let rules = RuleSet::new(&[]).expect("rules");
    let foreign = vec![("mail".to_owned(), "send_email".to_owned())];
    let context = ScanContext {
        rules: &rules,
        max_description_chars: 4096,
        foreign_tools: &foreign,
    };
    let mut group = c.benchmark_group("integrity_100_tools");
    configure(&mut group);
    group.bench_function("pin_check_and_scan", |b| {
        b.iter(|| integrity.evaluate("bench", Section::Tools, black_box(&tools), true))
    });
    group.bench_function("scan_only", |b| {
        b.iter(|| {
            for tool in &tools {
                black_box(scan(tool, &context));
            }
        })
    });
    group.finish();
}

fn bench_arguments(c: &mut Criterion) {
    let tool = &tool_list(1)[0];
    let schema = &tool["inputSchema"];
    let integrity = Integrity::new(&IntegrityConfig::default()).expect("integrity");
    let arguments = json!({"id": "r-42", "fields": ["a", "b"], "limit": 10});
    let mut group = c.benchmark_group("integrity_call");
    configure(&mut group);
    group.bench_function("validate_arguments_cached", |b| {
        b.iter(|| integrity.check_arguments("digest", schema, black_box(&arguments)))
    });
    group.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench_list(&mut c);
    bench_arguments(&mut c);
    c.final_summary();
}
