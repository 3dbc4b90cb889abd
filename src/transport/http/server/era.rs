//! Which era of Streamable HTTP a request belongs to. One endpoint serves
//! both, side by side, and never translates one into the other:
//!
//! - **stateless** (2026-07-28 and later): the request announces such a
//!   revision in `MCP-Protocol-Version`, or, without that header and
//!   without `Mcp-Session-Id`, in its body's `_meta` (it then fails the
//!   header checks with -32020, which tells a modern client what to fix);
//! - **session** (2024-11-05 to 2025-11-25): everything else, `initialize`
//!   included.

use axum::http::HeaderMap;
use serde_json::Value;

use super::events::SESSION_HEADER;
use crate::jsonrpc::Message;
use crate::transport::http::metadata::{is_stateless, META_VERSION, PROTOCOL_VERSION_HEADER};

/// Protocol revisions the session era serves, oldest first.
pub(crate) const SUPPORTED_VERSIONS: [&str; 4] =
    ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Whether the request's `MCP-Protocol-Version` names a stateless revision.
pub(crate) fn announces_stateless(headers: &HeaderMap) -> bool {
    headers
        .get(PROTOCOL_VERSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| is_stateless(v.trim()))
}

/// Whether a POST of `messages` (`batch` when it was an array) is served
/// statelessly.
pub(crate) fn is_stateless_post(headers: &HeaderMap, messages: &[Message], batch: bool) -> bool {
    if announces_stateless(headers) {
        return true;
    }
    if batch
        || headers.contains_key(PROTOCOL_VERSION_HEADER)
        || headers.contains_key(SESSION_HEADER)
    {
        return false;
    }
    let [message] = messages else {
        return false;
    };
    if message.method() == "initialize" {
        return false;
    }
    message.to_value().ok().is_some_and(|value| {
        value["params"]["_meta"]
            .get(META_VERSION)
            .and_then(Value::as_str)
            .is_some_and(is_stateless)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::{peek_frame, Frame};
    use axum::http::HeaderValue;
    use bytes::Bytes;

    fn message(text: &'static str) -> Vec<Message> {
        match peek_frame(Bytes::from_static(text.as_bytes())).unwrap() {
            Frame::Single(message) => vec![message],
            Frame::Batch(messages) => messages,
        }
    }

    const MODERN: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
    const LEGACY: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;

    #[test]
    fn the_header_decides_first() {
        let mut headers = HeaderMap::new();
        headers.insert(
            PROTOCOL_VERSION_HEADER,
            HeaderValue::from_static("2026-07-28"),
        );
        assert!(is_stateless_post(&headers, &message(LEGACY), false));
        headers.insert(
            PROTOCOL_VERSION_HEADER,
            HeaderValue::from_static("2025-06-18"),
        );
        assert!(!is_stateless_post(&headers, &message(MODERN), false));
    }

    #[test]
    fn without_headers_the_body_decides() {
        let mut headers = HeaderMap::new();
        assert!(is_stateless_post(&headers, &message(MODERN), false));
        assert!(!is_stateless_post(&headers, &message(LEGACY), false));
        headers.insert(SESSION_HEADER, HeaderValue::from_static("abc"));
        assert!(!is_stateless_post(&headers, &message(MODERN), false));
    }
}
