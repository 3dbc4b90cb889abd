//! MCP messages → ACS hook requests.
//!
//! Every MCP message becomes a `protocols/MCP/<method>` hook carrying the
//! message intact in `params.payload` (responses under the method they
//! answer). `tools/call` also yields the native `steps/toolCallRequest` /
//! `steps/toolCallResult` steps; the session lifecycle yields
//! `steps/sessionStart` / `steps/sessionEnd`; the server's inventory yields
//! `agbom/snapshot` / `agbom/changed`. Nothing here talks to the network.

pub mod agbom;
mod envelope;
pub mod lifecycle;
pub mod mcp;
pub mod tool_call;

pub use envelope::{now_rfc3339, HookRequest, Metadata, ACS_VERSION};

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
/// `system/ping`.
pub const SYSTEM_PING: &str = "system/ping";
