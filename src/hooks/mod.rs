//! MCP messages → ACS hook requests.
//!
//! Every MCP message becomes a `protocols/MCP/<method>` hook carrying the
//! message intact in `params.payload` (responses under the method they
//! answer). `tools/call` also yields the native `steps/toolCallRequest` /
//! `steps/toolCallResult` steps; the session lifecycle yields
//! `steps/sessionStart` / `steps/sessionEnd`; the server's inventory yields
//! `agbom/snapshot` / `agbom/changed`. Nothing here talks to the network.

use serde::Deserialize;

pub mod agbom;
mod clock;
mod context;
pub mod decision;
mod envelope;
pub mod identity;
pub mod lifecycle;
pub mod mcp;
mod payload;
mod pointer;
mod request_digest;
pub mod tool_call;

pub use clock::{now_rfc3339, HookTime, Stamp};
pub use context::{GatewayContext, VirtualRoute};
pub use envelope::{HookMethod, HookRequest, Metadata, ParamsHead, ACS_VERSION, PLATFORM};
pub use identity::{Identity, IdentityDescriptor};
pub use payload::{HookPayload, ToolStep};
pub use pointer::{Found, PointerToken};
pub use request_digest::{ParamsDigester, RequestDigest};

/// `steps/sessionStart`.
pub const SESSION_START: &str = "steps/sessionStart";
/// `steps/sessionEnd`.
pub const SESSION_END: &str = "steps/sessionEnd";
/// `steps/toolCallRequest`.
pub const TOOL_CALL_REQUEST: &str = "steps/toolCallRequest";
/// `steps/toolCallResult`.
pub const TOOL_CALL_RESULT: &str = "steps/toolCallResult";
/// `agbom/snapshot`.
pub const AGBOM_SNAPSHOT: &str = "agbom/snapshot";
/// `agbom/changed`.
pub const AGBOM_CHANGED: &str = "agbom/changed";
/// The hook methods that are not wrapped MCP methods.
pub(crate) const STEP_METHODS: &[&str] = &[
    SESSION_START,
    SESSION_END,
    TOOL_CALL_REQUEST,
    TOOL_CALL_RESULT,
    AGBOM_SNAPSHOT,
    AGBOM_CHANGED,
    HANDSHAKE_HELLO,
    SYSTEM_PING,
];

/// Every hook method the proxy can emit with `tools_call` set so: what the
/// ClientHello declares in `methods_implemented` (§4.1).
pub fn emitted_methods(tools_call: ToolsCallHooks) -> Vec<String> {
    let mut methods: Vec<String> = [
        SESSION_START,
        SESSION_END,
        AGBOM_SNAPSHOT,
        AGBOM_CHANGED,
        SYSTEM_PING,
    ]
    .iter()
    .map(|m| m.to_string())
    .collect();
    if tools_call != ToolsCallHooks::Wrapped {
        methods.push(TOOL_CALL_REQUEST.to_owned());
        methods.push(TOOL_CALL_RESULT.to_owned());
    }
    let wraps_tools_call = tools_call != ToolsCallHooks::Steps;
    methods.extend(
        mcp::KNOWN_METHODS
            .iter()
            .filter(|method| wraps_tools_call || **method != "tools/call")
            .map(|method| mcp::wrapped_method(method).to_string()),
    );
    methods
}

/// `handshake/hello`.
pub const HANDSHAKE_HELLO: &str = "handshake/hello";
/// `system/ping`.
pub const SYSTEM_PING: &str = "system/ping";

/// The hooks a `tools/call` yields (DESIGN §3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolsCallHooks {
    /// Only `steps/toolCallRequest` / `steps/toolCallResult`.
    Steps,
    /// Only `protocols/MCP/tools/call`.
    Wrapped,
    /// Both, as a pipeline: wrapped first, then the step on what it let through.
    #[default]
    Both,
}
