//! `[audit]`, `[metrics]` and `[limits]`: what the proxy records, exports and bounds.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::paths::{file_setting, resolve_file, PathSetting, SectionPaths};

use crate::audit::{FsyncMode, OnFailure};
use crate::metrics::{DEFAULT_MAX_TOOL_LABELS, METRICS};

/// The audit log.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditConfig {
    /// JSONL file the hash chains are appended to.
    #[serde(default = "default_audit_path")]
    pub path: PathBuf,
    /// When appends reach the disk.
    #[serde(default)]
    pub fsync: FsyncMode,
    /// Keep each hook's full `params` (arguments, results, the MCP message)
    /// in its entry. Off by default: entries then hold only digests, so the
    /// log carries no secrets that passed through the proxy.
    #[serde(default)]
    pub record_content: bool,
    /// What traffic does while the log cannot be written: `deny` (refused
    /// with -32013) or `allow` (passes unrecorded).
    #[serde(default)]
    pub on_failure: OnFailure,
}

impl Default for AuditConfig {
    fn default() -> Self {
        Self {
            path: default_audit_path(),
            fsync: FsyncMode::default(),
            record_content: false,
            on_failure: OnFailure::default(),
        }
    }
}

impl SectionPaths for AuditConfig {
    fn resolve_paths(&mut self, base: &Path) {
        resolve_file(base, &mut self.path);
    }

    fn path_settings(&self) -> Vec<PathSetting> {
        vec![file_setting("audit.path", &self.path)]
    }
}

fn default_audit_path() -> PathBuf {
    PathBuf::from("acs-audit.jsonl")
}

/// The Prometheus and health endpoint.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// Where `/metrics`, `/healthz` and `/readyz` are served; off when absent.
    #[serde(default)]
    pub address: Option<SocketAddr>,
    /// How many `(route, tool)` pairs may label
    /// `acs_proxy_tool_call_duration_seconds`; calls of further tools, and
    /// of tools the inventory does not list, count as `tool="other"`.
    #[serde(default = "default_max_tool_labels")]
    pub max_tool_labels: usize,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self {
            address: None,
            max_tool_labels: default_max_tool_labels(),
        }
    }
}

impl MetricsConfig {
    /// Applies the settings that shape the process-wide registry.
    pub fn apply(&self) {
        METRICS.tool_labels.set_limit(self.max_tool_labels);
    }
}

fn default_max_tool_labels() -> usize {
    DEFAULT_MAX_TOOL_LABELS
}

/// Bounds on what a peer may make the proxy hold.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// Largest single message (one stdio line), in bytes.
    #[serde(default = "default_max_message_bytes")]
    pub max_message_bytes: usize,
    /// Messages read from one side but not yet written to the other.
    #[serde(default = "default_max_in_flight")]
    pub max_in_flight: usize,
    /// Requests from the agent in flight at once in one session (being
    /// decided, held, or awaiting the server); more are refused with -32012.
    /// Unlimited when absent.
    #[serde(default)]
    pub max_requests_per_session: Option<usize>,
    /// Requests from agents in flight at once across all sessions; more are
    /// refused with -32012. Unlimited when absent.
    #[serde(default)]
    pub max_requests_total: Option<usize>,
    /// Deepest nesting of arrays and objects a message may have; checked in
    /// the single pass that precedes any parse, so a hostile message costs
    /// neither a full parse nor a Guardian call.
    #[serde(default = "default_max_json_depth")]
    pub max_json_depth: usize,
    /// How long a request forwarded to the upstream server may go
    /// unanswered before the client gets -32014 and the server a
    /// `notifications/cancelled`; 0 waits forever. A backstop against a
    /// hung server, so it defaults to well past any client's own timeout.
    #[serde(default = "default_upstream_request_timeout_ms")]
    pub upstream_request_timeout_ms: u64,
}

impl LimitsConfig {
    /// The per-request upstream timeout, `None` when switched off.
    pub fn upstream_request_timeout(&self) -> Option<Duration> {
        (self.upstream_request_timeout_ms > 0)
            .then(|| Duration::from_millis(self.upstream_request_timeout_ms))
    }
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            max_message_bytes: default_max_message_bytes(),
            max_in_flight: default_max_in_flight(),
            max_requests_per_session: None,
            max_requests_total: None,
            max_json_depth: default_max_json_depth(),
            upstream_request_timeout_ms: default_upstream_request_timeout_ms(),
        }
    }
}

fn default_max_message_bytes() -> usize {
    16 * 1024 * 1024
}

fn default_max_in_flight() -> usize {
    256
}

fn default_max_json_depth() -> usize {
    crate::jsonrpc::DEFAULT_MAX_JSON_DEPTH
}

fn default_upstream_request_timeout_ms() -> u64 {
    300_000
}
