//! Timing answered tool calls for `acs_proxy_tool_call_duration_seconds`.
//!
//! The tool's name labels the series only when the session's inventory
//! lists it (see [`crate::metrics::ToolLabels`]): the name in a `tools/call`
//! is the agent's to choose, the inventory is what the server offered.

use crate::hooks::agbom::ListKind;
use crate::metrics::METRICS;
use crate::session::{PendingRequest, Session};

/// Observes a `tools/call` the server has just answered: the time since
/// the proxy read it. Requests of other methods are ignored.
pub fn observe(session: &Session, request: &PendingRequest) {
    let Some(tool) = &request.tool else {
        return;
    };
    let listed = session.learned().inventory.lists(ListKind::Tools, tool);
    METRICS.tool_call(
        &session.upstream,
        tool,
        listed,
        request.started.elapsed().as_secs_f64(),
    );
}
