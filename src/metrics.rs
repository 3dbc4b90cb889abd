//! The Prometheus registry: counters and histograms beside the things they
//! measure, touched on the hot path only by an atomic add.
//!
//! Label values are bounded: MCP methods outside the known set are counted
//! as `other`, routes are the configured upstream names, and tool names are
//! admitted only from the inventory and up to a configured number (see
//! [`ToolLabels`]), so a peer cannot grow the series count.

mod handles;
mod tool_labels;

use std::sync::{LazyLock, OnceLock};

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

use crate::hooks::mcp::method_label;

pub use tool_labels::{ToolLabels, DEFAULT_MAX_TOOL_LABELS, OTHER_TOOL};

/// The `kind` values of `acs_proxy_upstream_errors_total`: an upstream that
/// could not be started or reached, went away, timed out or wrote a line
/// that is not JSON-RPC. Each route's series start at zero once the route
/// is first used, so a rate over them reads 0, not "no data".
pub const UPSTREAM_ERROR_KINDS: [&str; 4] = ["connect", "exited", "timeout", "malformed"];

/// Every metric the proxy exports.
pub struct Metrics {
    registry: Registry,
    /// `acs_proxy_messages_total{direction,method}`: MCP messages read.
    pub messages_total: IntCounterVec,
    /// `acs_proxy_decisions_total{hook,decision,source}`.
    pub decisions_total: IntCounterVec,
    /// `acs_proxy_decision_seconds{source,outcome}`: time from hook to
    /// decision, by who decided and the disposition applied.
    pub decision_seconds: HistogramVec,
    /// `acs_proxy_tool_call_duration_seconds{route,tool}`: from the proxy
    /// reading a `tools/call` to the server's answer, by route and tool
    /// (bounded by [`ToolLabels`]).
    pub tool_call_duration_seconds: HistogramVec,
    /// `acs_proxy_upstream_up{route}`: 1 while the route's upstream last
    /// started and has not exited on its own since, 0 after a failed start
    /// or an unexpected exit.
    pub upstream_up: IntGaugeVec,
    /// The admitted tool label values.
    pub tool_labels: ToolLabels,
    /// `acs_proxy_guardian_up`: registered on first use, by a remote
    /// Guardian's ping loop, so an embedded deployment has no such series.
    guardian_up: OnceLock<Option<IntGauge>>,
    /// `acs_proxy_audit_entries_total`: entries appended to the audit log.
    pub audit_entries_total: IntCounter,
    /// `acs_proxy_audit_failures_total`: appends that could not be recorded.
    pub audit_failures_total: IntCounter,
    /// `acs_proxy_audit_writable`: 1 while the audit log can be written,
    /// 0 during a failure window.
    pub audit_writable: IntGauge,
    /// `acs_proxy_sessions_active{route}`: sessions currently open, by
    /// upstream route (the upstream's name).
    pub sessions_active: IntGaugeVec,
    /// `acs_proxy_upstream_errors_total{route,kind}`: upstreams that could
    /// not be reached (`connect`), went away mid-session (`exited`), left a
    /// request unanswered past its limit (`timeout`) or wrote a line that
    /// is not a JSON-RPC message (`malformed`).
    pub upstream_errors_total: IntCounterVec,
    /// `acs_proxy_http_requests_total{route,status}`: requests answered by
    /// the agent-facing HTTP listener, by route and HTTP status.
    pub http_requests_total: IntCounterVec,
    /// `acs_proxy_enforcement_total{action}`: what was done to messages.
    pub enforcement_total: IntCounterVec,
    /// `acs_proxy_guardian_request_seconds{method,outcome}`.
    pub guardian_request_seconds: HistogramVec,
    /// `acs_proxy_decision_failures_total{reason,posture}`: hooks with no
    /// usable decision, and the posture that resolved them.
    pub decision_failures_total: IntCounterVec,
    /// `acs_proxy_integrity_events_total{kind}`: the Guardian's chain head
    /// disagreed with the proxy's (`chain_mismatch`, -32007), and the tool
    /// integrity checks' findings (`definition_changed`, `unpinned`,
    /// `poisoning`, `shadowing`, `invalid_arguments`, `hidden_called`).
    pub integrity_events_total: IntCounterVec,
}

/// The process-wide registry.
pub static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// `acs_proxy_policy_monitored_total{decision}`: decisions a rule or policy
/// in monitor mode reached but did not apply, by would-be disposition.
pub static POLICY_MONITORED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    METRICS.register_counter_vec(
        "acs_proxy_policy_monitored_total",
        "Decisions of rules or policies in monitor mode that were recorded but not applied, by would-be decision",
        &["decision"],
    )
});

/// `acs_proxy_trace_spans_dropped_total{reason}`: finished spans that were
/// not exported, because the export queue was full (`queue_full`: the
/// collector is slow or down) or the export of their batch failed
/// (`export_failed`). Registered when tracing is switched on.
pub static TRACE_SPANS_DROPPED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    METRICS.register_counter_vec(
        "acs_proxy_trace_spans_dropped_total",
        "Finished trace spans dropped instead of exported, by reason (queue_full, export_failed)",
        &["reason"],
    )
});

/// `acs_proxy_rate_limited_total{limit}`: calls refused by a
/// `[[policy.limit]]`, by limit name (bounded by the configuration).
pub static RATE_LIMITED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    METRICS.register_counter_vec(
        "acs_proxy_rate_limited_total",
        "Calls refused by a [[policy.limit]], by limit",
        &["limit"],
    )
});

fn counter_vec(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let counter = IntCounterVec::new(Opts::new(name, help), labels)
        .unwrap_or_else(|err| panic!("metric {name} is malformed: {err}"));
    registry
        .register(Box::new(counter.clone()))
        .unwrap_or_else(|err| panic!("metric {name} registered twice: {err}"));
    counter
}

impl Metrics {
    fn new() -> Self {
        let registry = Registry::new();
        let messages_total = counter_vec(
            &registry,
            "acs_proxy_messages_total",
            "MCP messages read, by direction and method",
            &["direction", "method"],
        );
        let decisions_total = counter_vec(
            &registry,
            "acs_proxy_decisions_total",
            "Hook decisions, by hook method, disposition and source",
            &["hook", "decision", "source"],
        );
        let enforcement_total = counter_vec(
            &registry,
            "acs_proxy_enforcement_total",
            "What enforcement did to messages (forwarded, rewritten, blocked, dropped)",
            &["action"],
        );
        let decision_failures_total = counter_vec(
            &registry,
            "acs_proxy_decision_failures_total",
            "Hooks without a usable Guardian decision, by reason and the posture applied",
            &["reason", "posture"],
        );
        let integrity_events_total = counter_vec(
            &registry,
            "acs_proxy_integrity_events_total",
            "Integrity events: Guardian chain-head disagreements and tool definition findings, by kind",
            &["kind"],
        );
        let decision_seconds = HistogramVec::new(
            HistogramOpts::new(
                "acs_proxy_decision_seconds",
                "Time from hook to decision, by decision source and outcome",
            )
            .buckets(latency_buckets()),
            &["source", "outcome"],
        )
        .unwrap_or_else(|err| panic!("acs_proxy_decision_seconds is malformed: {err}"));
        let tool_call_duration_seconds = HistogramVec::new(
            HistogramOpts::new(
                "acs_proxy_tool_call_duration_seconds",
                "Time from reading a tools/call to the server's answer, by route and tool",
            )
            .buckets(tool_call_buckets()),
            &["route", "tool"],
        )
        .unwrap_or_else(|err| panic!("acs_proxy_tool_call_duration_seconds is malformed: {err}"));
        let upstream_up = IntGaugeVec::new(
            Opts::new(
                "acs_proxy_upstream_up",
                "1 while the route's upstream runs, 0 after a failed start or an unexpected exit",
            ),
            &["route"],
        )
        .unwrap_or_else(|err| panic!("acs_proxy_upstream_up is malformed: {err}"));
        let guardian_request_seconds = HistogramVec::new(
            HistogramOpts::new(
                "acs_proxy_guardian_request_seconds",
                "Round trips to a remote Guardian, by hook method and outcome",
            )
            .buckets(latency_buckets()),
            &["method", "outcome"],
        )
        .unwrap_or_else(|err| panic!("acs_proxy_guardian_request_seconds is malformed: {err}"));
        let audit_entries_total = IntCounter::new(
            "acs_proxy_audit_entries_total",
            "Entries appended to the audit log",
        )
        .unwrap_or_else(|err| panic!("acs_proxy_audit_entries_total is malformed: {err}"));
        let audit_failures_total = IntCounter::new(
            "acs_proxy_audit_failures_total",
            "Audit appends that could not be recorded",
        )
        .unwrap_or_else(|err| panic!("acs_proxy_audit_failures_total is malformed: {err}"));
        let audit_writable = IntGauge::new(
            "acs_proxy_audit_writable",
            "1 while the audit log can be written, 0 while writes fail and are retried",
        )
        .unwrap_or_else(|err| panic!("acs_proxy_audit_writable is malformed: {err}"));
        let sessions_active = IntGaugeVec::new(
            Opts::new(
                "acs_proxy_sessions_active",
                "Sessions currently open, by upstream route",
            ),
            &["route"],
        )
        .unwrap_or_else(|err| panic!("acs_proxy_sessions_active is malformed: {err}"));
        let upstream_errors_total = counter_vec(
            &registry,
            "acs_proxy_upstream_errors_total",
            "Upstreams that could not be reached, went away, timed out or sent malformed lines, by route and kind",
            &["route", "kind"],
        );
        let http_requests_total = counter_vec(
            &registry,
            "acs_proxy_http_requests_total",
            "Requests answered by the agent-facing HTTP listener, by route and status",
            &["route", "status"],
        );
        for collector in [
            Box::new(decision_seconds.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(tool_call_duration_seconds.clone()),
            Box::new(upstream_up.clone()),
            Box::new(guardian_request_seconds.clone()),
            Box::new(audit_entries_total.clone()),
            Box::new(audit_failures_total.clone()),
            Box::new(audit_writable.clone()),
            Box::new(sessions_active.clone()),
        ] {
            registry
                .register(collector)
                .unwrap_or_else(|err| panic!("metric registered twice: {err}"));
        }
        Self {
            registry,
            messages_total,
            decisions_total,
            decision_seconds,
            tool_call_duration_seconds,
            upstream_up,
            tool_labels: ToolLabels::default(),
            guardian_up: OnceLock::new(),
            audit_entries_total,
            audit_failures_total,
            audit_writable,
            sessions_active,
            http_requests_total,
            upstream_errors_total,
            enforcement_total,
            guardian_request_seconds,
            decision_failures_total,
            integrity_events_total,
        }
    }

    /// Registers a counter family defined beside what it measures (see
    /// [`crate::limits::LIMIT_REFUSALS`]).
    pub fn register_counter_vec(&self, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
        counter_vec(&self.registry, name, help, labels)
    }

    /// Registers a gauge family defined beside what it measures (see
    /// [`crate::guardian::embedded::reload`]).
    pub fn register_gauge_vec(&self, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
        let gauges = IntGaugeVec::new(Opts::new(name, help), labels)
            .unwrap_or_else(|err| panic!("metric {name} is malformed: {err}"));
        self.registry
            .register(Box::new(gauges.clone()))
            .unwrap_or_else(|err| panic!("metric {name} registered twice: {err}"));
        gauges
    }

    /// Counts one integrity event; `kind` is one of a fixed set of names.
    pub fn integrity_event(&self, kind: &'static str) {
        self.integrity_events_total.with_label_values(&[kind]).inc();
    }

    /// Counts one MCP message read from `direction`.
    pub fn message(&self, direction: &str, mcp_method: &str) {
        self.messages_total
            .with_label_values(&[direction, method_label(mcp_method)])
            .inc();
    }

    /// Counts one decision.
    pub fn decision(&self, hook: &str, decision: &str, source: &str) {
        self.decisions_total
            .with_label_values(&[hook_label(hook), decision, source])
            .inc();
    }

    /// Observes how long a hook took to decide, by who decided (`source`)
    /// and the disposition applied (`outcome`).
    pub fn decided_in(&self, source: &str, outcome: &str, seconds: f64) {
        self.decision_seconds
            .with_label_values(&[source, outcome])
            .observe(seconds);
    }

    /// Observes a remote Guardian's round trip for `hook` that brought no
    /// decision, under the failure's `reason`.
    pub fn guardian_request_failed(&self, hook: &str, reason: &str, seconds: f64) {
        self.guardian_request_seconds
            .with_label_values(&[hook_label(hook), reason])
            .observe(seconds);
    }

    /// Observes one `tools/call` on `route` answered after `seconds`;
    /// `listed` says whether the session's inventory names `tool`.
    pub fn tool_call(&self, route: &str, tool: &str, listed: bool, seconds: f64) {
        let label = self.tool_labels.label(route, tool, listed);
        self.tool_call_duration_seconds
            .with_label_values(&[route, label])
            .observe(seconds);
    }

    /// Records an attempt to start (or reach) `route`'s upstream: `up`
    /// follows it, and a failure counts as a `connect` upstream error.
    pub fn upstream_started(&self, route: &str, started: bool) {
        for kind in UPSTREAM_ERROR_KINDS {
            self.upstream_errors_total.with_label_values(&[route, kind]);
        }
        if !started {
            self.upstream_error(route, "connect");
        }
        self.upstream_up
            .with_label_values(&[route])
            .set(i64::from(started));
    }

    /// Records that `route`'s upstream went away on its own.
    pub fn upstream_exited(&self, route: &str) {
        self.upstream_error(route, "exited");
        self.upstream_up.with_label_values(&[route]).set(0);
    }

    /// Counts one upstream error of `kind` (one of [`UPSTREAM_ERROR_KINDS`]).
    pub fn upstream_error(&self, route: &str, kind: &str) {
        self.upstream_errors_total
            .with_label_values(&[route, kind])
            .inc();
    }

    /// Records whether the remote Guardian answers `system/ping`.
    pub fn guardian_up(&self, up: bool) {
        let gauge = self.guardian_up.get_or_init(|| {
            let gauge = IntGauge::new(
                "acs_proxy_guardian_up",
                "1 while the remote Guardian answers system/ping, 0 while it does not",
            )
            .ok()?;
            self.registry.register(Box::new(gauge.clone())).ok()?;
            Some(gauge)
        });
        if let Some(gauge) = gauge {
            gauge.set(i64::from(up));
        }
    }

    /// Counts one enforcement action.
    pub fn enforcement(&self, action: &str) {
        self.enforcement_total.with_label_values(&[action]).inc();
    }

    /// Counts one request answered by the HTTP listener. `route` is a
    /// configured upstream name (or `-` for a path that names none), so the
    /// series count stays bounded.
    pub fn http_request(&self, route: &str, status: u16) {
        let mut buf = [b'0'; 3];
        self.http_requests_total
            .with_label_values(&[route, status_label(status, &mut buf)])
            .inc();
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        if let Err(err) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            tracing::warn!(%err, "encoding metrics failed");
        }
        String::from_utf8(out).unwrap_or_default()
    }
}

/// The status code as text, without allocating for the common ones.
fn status_label(status: u16, buf: &mut [u8; 3]) -> &str {
    let status = status.clamp(100, 999);
    buf[0] = b'0' + (status / 100) as u8;
    buf[1] = b'0' + (status / 10 % 10) as u8;
    buf[2] = b'0' + (status % 10) as u8;
    std::str::from_utf8(buf).unwrap_or("000")
}

/// 50 µs to 10 s: decisions range from in-process to a human approval.
fn latency_buckets() -> Vec<f64> {
    vec![
        0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
        1.0, 2.5, 10.0,
    ]
}

/// 1 ms to 60 s: a tool call ranges from a lookup to a long computation.
fn tool_call_buckets() -> Vec<f64> {
    vec![
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    ]
}

/// A hook method as a bounded label: wrapped methods outside the known MCP
/// set become `protocols/MCP/other`.
pub fn hook_label(hook: &str) -> &str {
    match hook.strip_prefix("protocols/MCP/") {
        Some(mcp) if method_label(mcp) == "other" => "protocols/MCP/other",
        _ => hook,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_required_metrics() {
        METRICS.message("client_to_server", "tools/call");
        METRICS.decision("steps/toolCallRequest", "deny", "embedded");
        METRICS.audit_entries_total.inc();
        METRICS.sessions_active.with_label_values(&["demo"]).inc();
        METRICS.http_request("demo", 202);
        METRICS.decided_in("embedded", "deny", 0.0001);
        METRICS.tool_call("demo", "echo", true, 0.02);
        METRICS.tool_call("demo", "unlisted", false, 0.02);
        METRICS.upstream_started("demo", true);
        METRICS.guardian_up(true);
        let text = METRICS.render();
        for needle in [
            "acs_proxy_decision_seconds_bucket{outcome=\"deny\",source=\"embedded\",le=",
            "acs_proxy_tool_call_duration_seconds_count{route=\"demo\",tool=\"echo\"}",
            "acs_proxy_tool_call_duration_seconds_count{route=\"demo\",tool=\"other\"}",
            "acs_proxy_upstream_up{route=\"demo\"} 1",
            "acs_proxy_upstream_errors_total{kind=\"malformed\",route=\"demo\"}",
            "acs_proxy_guardian_up 1",
        ] {
            assert!(text.contains(needle), "{needle} missing in:\n{text}");
        }
        assert!(text.contains("acs_proxy_http_requests_total{route=\"demo\",status=\"202\"}"));
        assert!(text.contains("acs_proxy_sessions_active{route=\"demo\"}"));
        for name in [
            "acs_proxy_messages_total",
            "acs_proxy_decisions_total",
            "acs_proxy_audit_entries_total",
            "acs_proxy_sessions_active",
        ] {
            assert!(text.contains(name), "{name} missing");
        }
    }

    #[test]
    fn unknown_wrapped_methods_are_bounded() {
        assert_eq!(hook_label("protocols/MCP/x/y/z"), "protocols/MCP/other");
        assert_eq!(
            hook_label("protocols/MCP/tools/call"),
            "protocols/MCP/tools/call"
        );
        assert_eq!(hook_label("steps/toolCallRequest"), "steps/toolCallRequest");
    }
}
