//! The `tool` label of `acs_proxy_tool_call_duration_seconds`, bounded.
//!
//! A tool name comes from the agent's `tools/call`, so it is peer input:
//! used verbatim it would let a peer grow the series count without limit.
//! A name becomes a label value only when the session's inventory lists
//! it (the server offered that tool) and while fewer than the configured
//! number of `(route, tool)` pairs have been admitted; every other call is
//! counted under `other`.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The label value of calls whose tool is not admitted.
pub const OTHER_TOOL: &str = "other";

/// `(route, tool)` pairs of `[metrics] max_tool_labels` when not configured.
pub const DEFAULT_MAX_TOOL_LABELS: usize = 100;

/// The admitted `(route, tool)` pairs and the cap on their number.
#[derive(Debug)]
pub struct ToolLabels {
    limit: AtomicUsize,
    admitted: Mutex<Admitted>,
}

/// The admitted tools by route, so a call's pair is found from borrowed
/// names (every `tools/call` answered asks), and how many pairs that is.
#[derive(Debug, Default)]
struct Admitted {
    by_route: HashMap<String, HashSet<String>>,
    pairs: usize,
}

impl Default for ToolLabels {
    fn default() -> Self {
        Self {
            limit: AtomicUsize::new(DEFAULT_MAX_TOOL_LABELS),
            admitted: Mutex::new(Admitted::default()),
        }
    }
}

impl ToolLabels {
    /// Sets how many `(route, tool)` pairs may become label values; pairs
    /// admitted before keep their label.
    pub fn set_limit(&self, limit: usize) {
        self.limit.store(limit, Ordering::Relaxed);
    }

    /// The label value for a call of `tool` on `route`: the tool's name
    /// when `listed` (the inventory names it) and admitted, else `other`.
    pub fn label<'a>(&self, route: &str, tool: &'a str, listed: bool) -> &'a str {
        if !listed || tool == OTHER_TOOL {
            return OTHER_TOOL;
        }
        let mut admitted = self
            .admitted
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if admitted
            .by_route
            .get(route)
            .is_some_and(|tools| tools.contains(tool))
        {
            return tool;
        }
        if admitted.pairs >= self.limit.load(Ordering::Relaxed) {
            return OTHER_TOOL;
        }
        admitted
            .by_route
            .entry(route.to_owned())
            .or_default()
            .insert(tool.to_owned());
        admitted.pairs += 1;
        tool
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unlisted_tools_are_other() {
        let labels = ToolLabels::default();
        assert_eq!(labels.label("demo", "echo", false), "other");
        assert_eq!(labels.label("demo", "echo", true), "echo");
    }

    #[test]
    fn pairs_beyond_the_limit_are_other_and_admitted_ones_stay() {
        let labels = ToolLabels::default();
        labels.set_limit(2);
        assert_eq!(labels.label("a", "t1", true), "t1");
        assert_eq!(labels.label("b", "t1", true), "t1");
        assert_eq!(labels.label("a", "t2", true), "other");
        assert_eq!(labels.label("a", "t1", true), "t1");
        labels.set_limit(0);
        assert_eq!(labels.label("b", "t1", true), "t1");
    }
}
