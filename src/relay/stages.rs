//! Which hooks an MCP message passes through: the wrapped
//! `protocols/MCP/<method>` hook, and for `tools/call` the synthesized
//! steps, as `hooks.tools_call` asks.

use crate::config::ToolsCallHooks;
use crate::jsonrpc::MessageKind;

/// One hook the message passes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// `protocols/MCP/<method>` with the message as payload.
    Wrapped,
    /// `steps/toolCallRequest` synthesized from a `tools/call` request.
    ToolCallRequest,
    /// `steps/toolCallResult` synthesized from a `tools/call` response.
    ToolCallResult,
}

/// The stages for a message; `tools/call` follows `hooks.tools_call`.
pub fn stages(mcp_method: &str, kind: MessageKind, mode: ToolsCallHooks) -> &'static [Stage] {
    if mcp_method != "tools/call" || kind == MessageKind::Notification {
        return &[Stage::Wrapped];
    }
    match (kind, mode) {
        (_, ToolsCallHooks::Wrapped) => &[Stage::Wrapped],
        (MessageKind::Request, ToolsCallHooks::Steps) => &[Stage::ToolCallRequest],
        (MessageKind::Request, ToolsCallHooks::Both) => &[Stage::Wrapped, Stage::ToolCallRequest],
        (_, ToolsCallHooks::Steps) => &[Stage::ToolCallResult],
        (_, ToolsCallHooks::Both) => &[Stage::Wrapped, Stage::ToolCallResult],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_call_stages_follow_the_mode() {
        use MessageKind::*;
        use ToolsCallHooks::*;
        assert_eq!(
            stages("tools/call", Request, Both),
            &[Stage::Wrapped, Stage::ToolCallRequest]
        );
        assert_eq!(
            stages("tools/call", Response, Both),
            &[Stage::Wrapped, Stage::ToolCallResult]
        );
        assert_eq!(
            stages("tools/call", Request, Steps),
            &[Stage::ToolCallRequest]
        );
        assert_eq!(stages("tools/call", Response, Wrapped), &[Stage::Wrapped]);
        assert_eq!(stages("resources/read", Request, Steps), &[Stage::Wrapped]);
        assert_eq!(stages("tools/call", Notification, Steps), &[Stage::Wrapped]);
    }
}
