//! What operators watch, checked with the real components: `promtool`
//! validates the alerting rules and runs their unit tests; a real
//! Prometheus scrapes a running acs-proxy (over stdio, in front of the
//! demo server, with the test Guardian as its remote Guardian) and its
//! HTTP API returns the expected series; and every panel query of the
//! Grafana dashboard returns data after that session.

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use support::guardian::TestGuardian;
use support::prometheus::{promtool, sample_value, Prometheus};
use support::{free_port, repo_root, tool_call, Proxy, Scratch};

#[test]
fn the_alerting_rules_check_and_pass_their_unit_tests() {
    let dir = repo_root().join("docker/prometheus");
    let checked = promtool(&dir, &["check", "rules", "alerts.yml"]);
    assert!(
        String::from_utf8_lossy(&checked.stdout).contains("SUCCESS: 6 rules found"),
        "{}",
        String::from_utf8_lossy(&checked.stdout)
    );
    promtool(&dir, &["test", "rules", "alerts.test.yml"]);

    // The compose file's Prometheus config, with the rules where this
    // checkout has them rather than where the container mounts them.
    let scratch = Scratch::new();
    let config = std::fs::read_to_string(dir.join("prometheus.yml")).unwrap();
    let config = config.replace(
        "/etc/prometheus/alerts.yml",
        &dir.join("alerts.yml").display().to_string(),
    );
    std::fs::write(scratch.path("prometheus.yml"), config).unwrap();
    promtool(&scratch.path(""), &["check", "config", "prometheus.yml"]);
}

/// The dashboard's panel queries (`expr` of every target), with Grafana's
/// variables given values: `$__rate_interval` a minute, `$route` all routes.
fn dashboard_queries() -> Vec<(String, String)> {
    let path = repo_root().join("docker/grafana/acs-proxy.json");
    let dashboard = support::parse(&std::fs::read_to_string(path).unwrap());
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        if panel["type"] == "row" {
            continue;
        }
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "panel without a query: {panel}");
        for target in targets {
            let expr = target["expr"].as_str().expect("expr");
            let expr = expr
                .replace("$__rate_interval", "1m")
                .replace("$route", ".*");
            assert!(!expr.contains('$'), "an unknown variable in {expr}");
            queries.push((panel["title"].as_str().unwrap_or("").to_owned(), expr));
        }
    }
    queries
}

/// Allows everything except `get-env` (denied) and answers `add` too late
/// (a decision failure the posture resolves).
fn guardian_script() -> Value {
    json!({
        "hello": {
            "timeout_config": {"default_ms": 3000, "per_method_ms": {"steps/toolCallRequest": 300}},
            "on_decision_failure": "proceed"
        },
        "rules": [
            {"method": "steps/toolCallRequest", "tool": "get-env", "then":
                {"action": "deny", "reasoning": "no environment dumps"}},
            {"method": "steps/toolCallRequest", "tool": "add", "then":
                {"action": "late", "delay_ms": 600, "then": {"action": "allow"}}}
        ]
    })
}

const ROUNDS: i64 = 3;

/// One value of a query that must return exactly one sample.
fn single(prometheus: &Prometheus, promql: &str, want: f64) {
    let result = prometheus.query_until(promql, |r| {
        r.len() == 1 && (sample_value(&r[0]) - want).abs() < 1e-9
    });
    assert!(
        result.len() == 1 && (sample_value(&result[0]) - want).abs() < 1e-9,
        "{promql}: want {want}, got {result:?}"
    );
}

#[test]
fn prometheus_scrapes_the_proxy_and_every_dashboard_panel_has_data() {
    let scratch = Scratch::new();
    let guardian = TestGuardian::http(&scratch, &guardian_script());
    let port = free_port();
    let config = guardian.proxy_config(
        &scratch,
        "ping_interval_ms = 200\n",
        &format!("[metrics]\naddress = \"127.0.0.1:{port}\"\n"),
    );
    let prometheus = Prometheus::start(&scratch, &[format!("127.0.0.1:{port}")]);
    let mut proxy = Proxy::start(&config);
    proxy.initialize(json!({}));
    single(&prometheus, "up{job=\"acs-proxy\"}", 1.0);

    // Calls spread over several scrapes, so rates over them are not zero.
    for round in 0..ROUNDS {
        let id = round * 10;
        proxy.send(&tool_call(id + 1, "echo", json!({"text": "hi"})));
        proxy.response(&json!(id + 1));
        proxy.send(&tool_call(id + 2, "add", json!({"a": 1, "b": 2})));
        proxy.response(&json!(id + 2));
        proxy.send(&tool_call(id + 3, "get-env", json!({})));
        proxy.response(&json!(id + 3));
        proxy.send(&tool_call(id + 4, "lookup-user", json!({"name": "Ada"})));
        proxy.response(&json!(id + 4));
        std::thread::sleep(Duration::from_millis(1500));
    }

    let rounds = ROUNDS as f64;
    single(
        &prometheus,
        "acs_proxy_tool_call_duration_seconds_count{route=\"demo\",tool=\"echo\"}",
        rounds,
    );
    single(
        &prometheus,
        "sum(acs_proxy_tool_call_duration_seconds_count{route=\"demo\"})",
        3.0 * rounds,
    );
    single(
        &prometheus,
        "acs_proxy_decisions_total{hook=\"steps/toolCallRequest\",decision=\"deny\",source=\"remote\"}",
        rounds,
    );
    single(
        &prometheus,
        "acs_proxy_decision_failures_total{reason=\"timeout\",posture=\"proceed\"}",
        rounds,
    );
    single(&prometheus, "acs_proxy_upstream_up{route=\"demo\"}", 1.0);
    single(
        &prometheus,
        "acs_proxy_sessions_active{route=\"demo\"}",
        1.0,
    );
    single(&prometheus, "acs_proxy_guardian_up", 1.0);
    single(&prometheus, "acs_proxy_audit_writable", 1.0);
    single(
        &prometheus,
        "acs_proxy_upstream_errors_total{route=\"demo\",kind=\"connect\"}",
        0.0,
    );
    // The remote Guardian's round trips, by outcome.
    let answered = prometheus.query("acs_proxy_guardian_request_seconds_count{outcome=\"deny\"}");
    assert!(!answered.is_empty(), "no Guardian round trips by outcome");

    // Every panel, after one more scrape of the last round.
    std::thread::sleep(Duration::from_millis(1500));
    for (title, expr) in dashboard_queries() {
        let result = prometheus.query(&expr);
        assert!(
            result.iter().any(|sample| sample_value(sample).is_finite()),
            "panel {title:?}: {expr} returned no data: {result:?}"
        );
    }
    // The dashboard's `route` variable.
    let routes = prometheus.api(&format!(
        "/api/v1/label/route/values?match[]={}",
        support::prometheus::encode("acs_proxy_sessions_active")
    ));
    assert_eq!(routes, json!(["demo"]));
    // Prometheus itself loaded every alerting rule.
    let rules = prometheus.api("/api/v1/rules");
    let names: Vec<&str> = rules["groups"][0]["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .filter_map(|rule| rule["name"].as_str())
        .collect();
    assert_eq!(names.len(), 6, "{names:?}");

    assert!(proxy.finish().success());
}
