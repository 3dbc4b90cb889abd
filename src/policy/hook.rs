//! The part of a hook request the policy looks at.

use crate::hooks::{HookPayload, Identity};

/// A borrowed view of one hook request, as the embedded Guardian sees it.
///
/// Borrowing keeps evaluation free of copies: the caller already holds the
/// method, the tool name it extracted, and the parsed payload.
#[derive(Debug, Clone, Copy)]
pub struct HookView<'a> {
    /// The ACS method, e.g. `steps/toolCallRequest` or
    /// `protocols/MCP/tools/call`.
    pub method: &'a str,
    /// The tool concerned, when the hook is about a tool call; rules with a
    /// `tool` glob never match hooks without one.
    pub tool: Option<&'a str>,
    /// `params.payload` of the hook request (the MCP message itself for
    /// wrapped hooks); pointers in rules address this value.
    pub payload: &'a HookPayload,
    /// Who is calling, when the session knows; rules with a `user`, `role`
    /// or `tenant` glob never match hooks without one.
    pub user: Option<&'a Identity>,
}

impl<'a> HookView<'a> {
    /// Bundles what a rule can look at, for a hook with no known caller.
    pub fn new(method: &'a str, tool: Option<&'a str>, payload: &'a HookPayload) -> Self {
        Self {
            method,
            tool,
            payload,
            user: None,
        }
    }

    /// The same view, about a hook made on behalf of `user`.
    pub fn with_user(self, user: Option<&'a Identity>) -> Self {
        Self { user, ..self }
    }
}
