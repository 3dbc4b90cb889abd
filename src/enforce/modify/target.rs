//! What a decision's modifications address, per hook: the one fact the
//! rules, the edits and the errors of this module all depend on.

use std::fmt;

/// What a decision's pointers and override keys address; it depends on the
/// hook the decision answered, which the spec leaves open (DIGEST §2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// A `steps/toolCallRequest` payload (`{tool, arguments: {k: {value}}}`):
    /// redactions point into the payload, override `k` sets
    /// `/arguments/<k>/value`, and `modified_content` is a JSON object of
    /// argument name → value that replaces `arguments`.
    ToolCallRequest,
    /// A `steps/toolCallResult` payload (`{tool, exit_status, outputs}`):
    /// redactions point into the payload, overrides are refused, and
    /// `modified_content` becomes the single output.
    ToolCallResult,
    /// A wrapped MCP request (the JSON-RPC message itself, e.g. `tools/call`):
    /// redactions point into the message, override `k` sets
    /// `/params/arguments/<k>`, and `modified_content` is refused.
    WrappedMcpRequest,
    /// A wrapped MCP response or notification: redactions only.
    WrappedMcpResponse,
}

impl Target {
    /// The pointer override key `key` sets, or `None` when this target takes
    /// no overrides. Disjointness is checked against exactly this pointer.
    pub(super) fn override_tokens(self, key: &str) -> Option<Vec<String>> {
        let tokens: &[&str] = match self {
            Target::ToolCallRequest => &["arguments", key, "value"],
            Target::WrappedMcpRequest => &["params", "arguments", key],
            Target::ToolCallResult | Target::WrappedMcpResponse => return None,
        };
        Some(tokens.iter().map(|&token| token.to_owned()).collect())
    }

    /// Only the tool call requests have arguments to override.
    pub(super) fn takes_overrides(self) -> bool {
        matches!(self, Target::ToolCallRequest | Target::WrappedMcpRequest)
    }

    /// Wrapped MCP messages have no "principal content" a string could
    /// replace without guessing, so only the steps payloads take it.
    pub(super) fn takes_modified_content(self) -> bool {
        matches!(self, Target::ToolCallRequest | Target::ToolCallResult)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Target::ToolCallRequest => "steps/toolCallRequest payload",
            Target::ToolCallResult => "steps/toolCallResult payload",
            Target::WrappedMcpRequest => "wrapped MCP request",
            Target::WrappedMcpResponse => "wrapped MCP response or notification",
        })
    }
}
