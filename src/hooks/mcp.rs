//! The wrapped form: `protocols/MCP/<method>` with the MCP message intact in
//! `params.payload` (DESIGN §3.1).

/// The hook method for an MCP method.
pub fn wrapped_method(mcp_method: &str) -> String {
    let mut method = String::with_capacity(PREFIX.len() + mcp_method.len());
    method.push_str(PREFIX);
    method.push_str(mcp_method);
    method
}

const PREFIX: &str = "protocols/MCP/";

/// MCP methods the proxy knows by name. Metric labels use these and fold
/// everything else into `other`, so a hostile peer cannot grow the label set.
pub const KNOWN_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "sampling/createMessage",
    "elicitation/create",
    "roots/list",
    "subscriptions/listen",
    "tasks/get",
    "tasks/list",
    "tasks/result",
    "tasks/cancel",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "notifications/message",
    "notifications/resources/updated",
    "notifications/resources/list_changed",
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/roots/list_changed",
    "notifications/elicitation/complete",
    "notifications/tasks/status",
];

/// The method as a bounded metric label.
pub fn method_label(mcp_method: &str) -> &'static str {
    KNOWN_METHODS
        .iter()
        .find(|known| **known == mcp_method)
        .copied()
        .unwrap_or("other")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_and_labels() {
        assert_eq!(wrapped_method("tools/call"), "protocols/MCP/tools/call");
        assert_eq!(method_label("tools/call"), "tools/call");
        assert_eq!(method_label("vendor/evil-label-123"), "other");
    }
}
