//! The wrapped form: `protocols/MCP/<method>` with the MCP message intact in
//! `params.payload` (DESIGN §3.1).

use std::borrow::Cow;
use std::sync::LazyLock;

use super::HookMethod;

/// The hook method for an MCP method: static for [`KNOWN_METHODS`], since
/// every message makes one, copied only for others.
pub fn wrapped_method(mcp_method: &str) -> HookMethod {
    match KNOWN_METHODS.iter().position(|known| *known == mcp_method) {
        Some(index) => HookMethod::from(WRAPPED_KNOWN[index].as_str()),
        None => HookMethod::from(wrap(mcp_method)),
    }
}

/// `protocols/MCP/<mcp_method>`.
fn wrap(mcp_method: &str) -> String {
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

/// `mcp_method` as a static string when it is a method the proxy knows,
/// else a copy: audit records name the method of every message, and known
/// methods then cost no allocation.
pub fn method_name(mcp_method: &str) -> Cow<'static, str> {
    match KNOWN_METHODS.iter().find(|known| **known == mcp_method) {
        Some(known) => Cow::Borrowed(known),
        None => Cow::Owned(mcp_method.to_owned()),
    }
}

/// The wrapped form of each of [`KNOWN_METHODS`], in the same order.
static WRAPPED_KNOWN: LazyLock<Vec<String>> =
    LazyLock::new(|| KNOWN_METHODS.iter().map(|method| wrap(method)).collect());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_and_labels() {
        assert_eq!(wrapped_method("tools/call"), "protocols/MCP/tools/call");
        assert_eq!(method_label("tools/call"), "tools/call");
        assert_eq!(method_label("vendor/evil-label-123"), "other");
    }

    #[test]
    fn known_methods_wrap_to_one_shared_string() {
        for known in KNOWN_METHODS {
            let (one, two) = (wrapped_method(known), wrapped_method(known));
            assert_eq!(one, format!("{PREFIX}{known}").as_str());
            assert_eq!(one.as_ptr(), two.as_ptr(), "{known}");
        }
        let (one, two) = (wrapped_method("vendor/x"), wrapped_method("vendor/x"));
        assert_eq!(one, "protocols/MCP/vendor/x");
        assert_ne!(one.as_ptr(), two.as_ptr());
    }

    #[test]
    fn known_names_are_static_and_others_copied() {
        assert!(matches!(
            method_name("tools/call"),
            Cow::Borrowed("tools/call")
        ));
        assert!(matches!(method_name("vendor/x"), Cow::Owned(_)));
    }
}
