//! Error replies written by the proxy itself.

use bytes::Bytes;
use serde_json::Value;

use super::RequestId;

/// JSON-RPC error codes the proxy uses on the MCP side.
///
/// The standard codes keep their JSON-RPC meaning. The proxy's own codes sit
/// in -32010..-32019, inside the implementation-defined range that MCP
/// 2026-07-28 leaves free (-32000..-32019) and clear of the codes MCP
/// revisions assign themselves (-32002, -32020 and up).
pub mod codes {
    /// Not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// JSON, but not a valid JSON-RPC message (also: duplicate id, oversized message).
    pub const INVALID_REQUEST: i64 = -32600;
    /// The method is not served (2026-07-28 HTTP answers it with 404).
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// The request's parameters are wrong (`[integrity] validate_arguments`:
    /// tool arguments that fail the tool's `inputSchema`).
    pub const INVALID_PARAMS: i64 = -32602;
    /// Internal failure of the proxy.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// The Guardian (or the failure posture) denied the message.
    pub const POLICY_DENIED: i64 = -32010;
    /// The upstream server is gone or failed.
    pub const UPSTREAM_UNAVAILABLE: i64 = -32011;
    /// A limit was reached (`[limits] max_requests_per_session`,
    /// `max_requests_total`, `[listen] max_sessions`, or a `[[policy.limit]]`
    /// rate limit, whose refusals carry `data.retry_after_ms`): refused at
    /// once rather than queued, with a message naming the limit; retrying
    /// later may succeed.
    pub const LIMIT_EXCEEDED: i64 = -32012;
    /// The audit log cannot record, so nothing is let through.
    pub const AUDIT_UNAVAILABLE: i64 = -32013;
    /// The upstream server did not answer a forwarded request within
    /// `[limits] upstream_request_timeout_ms`; the request was cancelled
    /// upstream and a late answer is dropped.
    pub const UPSTREAM_TIMEOUT: i64 = -32014;
    /// MCP 2026-07-28 `HeaderMismatch`: a request's metadata headers
    /// (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`)
    /// are missing, malformed, or disagree with its body. Answered with
    /// HTTP 400; the body is what the proxy decides on, so a header that
    /// says otherwise must not reach anything that routes on it.
    pub const HEADER_MISMATCH: i64 = -32020;
    /// MCP 2026-07-28 `UnsupportedProtocolVersion`: the request names a
    /// revision the proxy does not serve; `data.supported` lists those it does.
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
}

/// Builds `{"jsonrpc":"2.0","id":…,"error":{…}}`; a missing id becomes `null`.
pub fn error_response(
    id: Option<&RequestId>,
    code: i64,
    message: &str,
    data: Option<Value>,
) -> Bytes {
    let mut error = serde_json::Map::new();
    error.insert("code".into(), Value::from(code));
    error.insert("message".into(), Value::from(message));
    if let Some(data) = data {
        error.insert("data".into(), data);
    }
    let id = id.map(RequestId::to_value).unwrap_or(Value::Null);
    let mut reply = serde_json::Map::new();
    reply.insert("jsonrpc".into(), Value::from("2.0"));
    reply.insert("id".into(), id);
    reply.insert("error".into(), Value::Object(error));
    Bytes::from(Value::Object(reply).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_reply_echoes_the_id_exactly() {
        let id = RequestId::from_json("\"abc\"");
        let reply = error_response(Some(&id), codes::INVALID_REQUEST, "bad", None);
        assert_eq!(
            &reply[..],
            br#"{"jsonrpc":"2.0","id":"abc","error":{"code":-32600,"message":"bad"}}"#
        );
        let reply = error_response(None, codes::PARSE_ERROR, "parse error", None);
        assert!(std::str::from_utf8(&reply)
            .unwrap()
            .contains(r#""id":null"#));
    }
}
