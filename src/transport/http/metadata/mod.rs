//! MCP 2026-07-28 request metadata: the HTTP headers that mirror a
//! request's body (SEP-2243), shared by the agent-facing server, which
//! checks them, and the upstream client, which writes them.
//!
//! - [`encoding`]: the `=?base64?…?=` sentinel form of header values.
//! - [`params`]: `x-mcp-header` annotations in a tool's `inputSchema`, and
//!   the `Mcp-Param-{Name}` values they take from the call's arguments.
//! - [`registry`]: what each route's tools declare, learned from the
//!   `tools/list` results the proxy relays or reads itself.
//! - [`expected`]: the headers a given body calls for.

use axum::http::HeaderName;

pub mod encoding;
pub mod expected;
pub mod params;
pub mod registry;

/// `MCP-Protocol-Version`.
pub const PROTOCOL_VERSION: &str = "mcp-protocol-version";
/// `MCP-Protocol-Version` as a header name: a lookup by a parsed name
/// skips re-reading the string on every request.
pub const PROTOCOL_VERSION_HEADER: HeaderName = HeaderName::from_static(PROTOCOL_VERSION);
/// `Mcp-Method`: the body's `method`.
pub const MCP_METHOD: &str = "mcp-method";
/// `Mcp-Name`: `params.name`, `params.uri` or `params.taskId`.
pub const MCP_NAME: &str = "mcp-name";
/// The prefix of the headers mirroring `x-mcp-header` tool arguments.
pub const PARAM_PREFIX: &str = "mcp-param-";
/// The `_meta` key naming a 2026-07-28 request's protocol version.
pub const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// The `_meta` key carrying a 2026-07-28 client's `clientInfo`.
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";

/// The first revision without sessions (stateless HTTP, request headers).
pub const STATELESS_VERSION: &str = "2026-07-28";

/// The stateless revisions the proxy serves to agents.
pub const STATELESS_VERSIONS: [&str; 1] = [STATELESS_VERSION];

/// Whether `version` is a revision without sessions (a date from
/// 2026-07-28 on).
pub fn is_stateless(version: &str) -> bool {
    let dated = version.len() == STATELESS_VERSION.len()
        && version.bytes().all(|b| b.is_ascii_digit() || b == b'-');
    dated && version >= STATELESS_VERSION
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stateless_versions_are_dates_from_2026_07_28() {
        assert!(is_stateless("2026-07-28"));
        assert!(is_stateless("2027-01-01"));
        assert!(!is_stateless("2025-11-25"));
        assert!(!is_stateless("draft"));
    }
}
