//! Series handles for the metrics every message and hook touches, resolved
//! once instead of looked up each time.
//!
//! A `tools/call` counts two messages and, per hook, a decision, its
//! latency and an enforcement action (and, asked of a remote Guardian, the
//! round trip). Looking each series up by its label
//! values hashes the labels and takes the family's lock every time; all
//! of these labels come from small closed sets (enums, the known MCP
//! methods, the hook methods the proxy emits), so each series has a fixed
//! slot here, filled on first use. A series therefore appears in
//! `/metrics` at the same moment as before, with the same name and
//! labels; only the lookup is gone. Labels outside the closed sets (a hook
//! method the proxy does not emit, a source or action spelled otherwise)
//! still go through the family.
//!
//! Decision sources and enforcement actions are enums of the audit trail,
//! a layer above this one, so they arrive here by their spelling and find
//! their slot in the lists below.

use std::sync::OnceLock;

use prometheus::{Histogram, IntCounter};

use super::{hook_label, Metrics};
use crate::hooks::decision::Disposition;
use crate::hooks::{mcp, STEP_METHODS};
use crate::jsonrpc::Direction;

/// Directions.
const DIRECTIONS: usize = 2;
/// The known MCP methods, and `other`.
const METHODS: usize = mcp::KNOWN_METHODS.len() + 1;
/// Wrapped hooks (known methods and `protocols/MCP/other`), then the
/// step hooks.
const HOOKS: usize = METHODS + STEP_METHODS.len();
/// Dispositions.
const DISPOSITIONS: usize = 5;
/// The spellings of `audit::DecisionSource`.
const SOURCE_LABELS: [&str; 5] = ["embedded", "remote", "posture", "not_evaluated", "proxy"];
/// Decision sources.
const SOURCES: usize = SOURCE_LABELS.len();
/// The spellings of `audit::Action`.
const ACTION_LABELS: [&str; 6] = [
    "forwarded",
    "rewritten",
    "blocked",
    "dropped",
    "held",
    "recorded",
];
/// Enforcement actions.
const ACTIONS: usize = ACTION_LABELS.len();

/// Fixed slots of lazily resolved series.
struct Slots<T, const N: usize>([OnceLock<T>; N]);

impl<T: Clone, const N: usize> Slots<T, N> {
    const fn new() -> Self {
        Self([const { OnceLock::new() }; N])
    }

    /// The series in `slot`, resolved by `resolve` the first time.
    fn get(&self, slot: usize, resolve: impl FnOnce() -> T) -> &T {
        self.0[slot].get_or_init(resolve)
    }
}

/// `acs_proxy_messages_total{direction,method}`.
static MESSAGES: Slots<IntCounter, { DIRECTIONS * METHODS }> = Slots::new();
/// `acs_proxy_decisions_total{hook,decision,source}`.
static DECISIONS: Slots<IntCounter, { HOOKS * DISPOSITIONS * SOURCES }> = Slots::new();
/// `acs_proxy_decision_seconds{source,outcome}`.
static DECISION_SECONDS: Slots<Histogram, { SOURCES * DISPOSITIONS }> = Slots::new();
/// `acs_proxy_enforcement_total{action}`.
static ENFORCEMENT: Slots<IntCounter, ACTIONS> = Slots::new();
/// `acs_proxy_guardian_request_seconds{method,outcome}` of the requests a
/// remote Guardian decided.
static GUARDIAN_DECISIONS: Slots<Histogram, { HOOKS * DISPOSITIONS }> = Slots::new();

impl Metrics {
    /// Counts one MCP message read from `direction` (as [`Metrics::message`]).
    pub fn count_message(&self, direction: Direction, mcp_method: &str) {
        let label = mcp::method_label(mcp_method);
        let slot = direction_slot(direction) * METHODS + method_slot(label);
        MESSAGES
            .get(slot, || {
                self.messages_total
                    .with_label_values(&[direction.as_str(), label])
            })
            .inc();
    }

    /// Counts one decision about a `hook` by `source` (as
    /// [`Metrics::decision`]).
    pub fn count_decision(&self, hook: &str, decision: Disposition, source: &str) {
        let hook = hook_label(hook);
        let (Some(hook_slot), Some(source_slot)) =
            (hook_slot(hook), slot_of(&SOURCE_LABELS, source))
        else {
            self.decision(hook, decision.as_str(), source);
            return;
        };
        let slot = (hook_slot * DISPOSITIONS + disposition_slot(decision)) * SOURCES + source_slot;
        DECISIONS
            .get(slot, || {
                self.decisions_total
                    .with_label_values(&[hook, decision.as_str(), source])
            })
            .inc();
    }

    /// Observes how long a hook took to decide, by who decided (`source`)
    /// and the disposition applied (as [`Metrics::decided_in`]).
    pub fn observe_decision(&self, source: &str, outcome: Disposition, seconds: f64) {
        let Some(source_slot) = slot_of(&SOURCE_LABELS, source) else {
            self.decided_in(source, outcome.as_str(), seconds);
            return;
        };
        let slot = source_slot * DISPOSITIONS + disposition_slot(outcome);
        DECISION_SECONDS
            .get(slot, || {
                self.decision_seconds
                    .with_label_values(&[source, outcome.as_str()])
            })
            .observe(seconds);
    }

    /// Observes a remote Guardian's round trip for a `hook` it decided
    /// `decision` (`acs_proxy_guardian_request_seconds`); a failed one is
    /// observed under its reason by [`Metrics::guardian_request_failed`].
    pub fn observe_guardian_decision(&self, hook: &str, decision: Disposition, seconds: f64) {
        let hook = hook_label(hook);
        let resolve = || {
            self.guardian_request_seconds
                .with_label_values(&[hook, decision.as_str()])
        };
        match hook_slot(hook) {
            Some(slot) => GUARDIAN_DECISIONS
                .get(slot * DISPOSITIONS + disposition_slot(decision), resolve)
                .observe(seconds),
            None => resolve().observe(seconds),
        }
    }

    /// Counts one enforcement action (as [`Metrics::enforcement`]).
    pub fn count_enforcement(&self, action: &str) {
        let Some(slot) = slot_of(&ACTION_LABELS, action) else {
            self.enforcement(action);
            return;
        };
        ENFORCEMENT
            .get(slot, || self.enforcement_total.with_label_values(&[action]))
            .inc();
    }
}

/// The place of `label` in `labels`, if it is one of them.
fn slot_of(labels: &[&str], label: &str) -> Option<usize> {
    labels.iter().position(|known| *known == label)
}

fn direction_slot(direction: Direction) -> usize {
    match direction {
        Direction::ClientToServer => 0,
        Direction::ServerToClient => 1,
    }
}

/// The slot of a bounded method label: its place among the known methods,
/// `other` last.
fn method_slot(label: &str) -> usize {
    mcp::KNOWN_METHODS
        .iter()
        .position(|known| *known == label)
        .unwrap_or(METHODS - 1)
}

/// The slot of a bounded hook label, `None` for a hook method the proxy
/// does not emit.
fn hook_slot(hook: &str) -> Option<usize> {
    match hook.strip_prefix("protocols/MCP/") {
        Some(mcp) => Some(method_slot(mcp)),
        None => STEP_METHODS
            .iter()
            .position(|step| *step == hook)
            .map(|step| METHODS + step),
    }
}

fn disposition_slot(disposition: Disposition) -> usize {
    match disposition {
        Disposition::Allow => 0,
        Disposition::Deny => 1,
        Disposition::Modify => 2,
        Disposition::Ask => 3,
        Disposition::Defer => 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::METRICS;

    #[test]
    fn every_closed_label_has_its_own_slot() {
        let mut seen = std::collections::HashSet::new();
        for method in mcp::KNOWN_METHODS.iter().copied().chain(["other"]) {
            assert!(seen.insert(method_slot(method)), "{method}");
        }
        assert_eq!(seen.len(), METHODS);
        let mut hooks = std::collections::HashSet::new();
        let wrapped = mcp::KNOWN_METHODS
            .iter()
            .chain(["other"].iter())
            .map(|method| format!("protocols/MCP/{method}"));
        for hook in wrapped.chain(STEP_METHODS.iter().map(|step| step.to_string())) {
            let slot = hook_slot(&hook).expect("an emitted hook has a slot");
            assert!(slot < HOOKS && hooks.insert(slot), "{hook}");
        }
        assert_eq!(hook_slot("custom/hook"), None);
    }

    /// The lists must keep up with the audit trail's enums, or their
    /// series would quietly go back to the lookup.
    #[test]
    fn every_source_and_action_has_a_slot() {
        use crate::audit::{Action, DecisionSource};
        for source in [
            DecisionSource::Embedded,
            DecisionSource::Remote,
            DecisionSource::Posture,
            DecisionSource::NotEvaluated,
            DecisionSource::Proxy,
        ] {
            assert!(
                slot_of(&SOURCE_LABELS, source.as_str()).is_some(),
                "{source:?}"
            );
        }
        for action in [
            Action::Forwarded,
            Action::Rewritten,
            Action::Blocked,
            Action::Dropped,
            Action::Held,
            Action::Recorded,
        ] {
            assert!(
                slot_of(&ACTION_LABELS, action.as_str()).is_some(),
                "{action:?}"
            );
        }
    }

    #[test]
    fn cached_series_are_the_labelled_ones() {
        let before = METRICS
            .decisions_total
            .with_label_values(&["steps/toolCallResult", "modify", "remote"])
            .get();
        METRICS.count_decision("steps/toolCallResult", Disposition::Modify, "remote");
        METRICS.count_decision("steps/toolCallResult", Disposition::Modify, "remote");
        let after = METRICS
            .decisions_total
            .with_label_values(&["steps/toolCallResult", "modify", "remote"])
            .get();
        assert_eq!(after - before, 2);
        METRICS.count_decision("custom/hook", Disposition::Ask, "proxy");
        assert!(METRICS.render().contains(
            "acs_proxy_decisions_total{decision=\"ask\",hook=\"custom/hook\",source=\"proxy\"}"
        ));
        METRICS.count_message(Direction::ServerToClient, "x/unknown");
        assert!(METRICS
            .render()
            .contains("acs_proxy_messages_total{direction=\"server_to_client\",method=\"other\"}"));
    }
}
