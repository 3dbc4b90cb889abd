//! The error answers the listener gives, whichever endpoint or transport
//! refuses: a JSON-RPC error body under an HTTP status, marked with a
//! [`Refusal`] so the edge chain (`refusals`) can record why.
//!
//! They live apart from the checks that use them (`edge`, `handlers`, the
//! SSE and WebSocket servers) and from the chain that reads the mark, so
//! every one of those can import them without importing each other.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::jcs::sha256_hex;
use crate::jsonrpc::{codes, error_response, RequestId};

/// Why the listener refused a request, attached to its response by the
/// code that refused it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Refusal {
    /// The error message the client was given.
    pub(crate) message: String,
    /// The JSON-RPC id of the refused message, when one was read.
    pub(crate) mcp_id: Option<Value>,
    /// SHA-256 (hex) of the refused body, when it was read.
    pub(crate) body_digest: Option<String>,
}

/// Marks `response` as refusing a body, recording the body's digest.
pub(crate) fn with_body_digest(mut response: Response, body: &[u8]) -> Response {
    let digest = sha256_hex(body);
    match response.extensions_mut().get_mut::<Refusal>() {
        Some(refusal) => refusal.body_digest = Some(digest),
        None => {
            response.extensions_mut().insert(Refusal {
                body_digest: Some(digest),
                ..Refusal::default()
            });
        }
    }
    response
}

/// An HTTP error whose body is an id-less JSON-RPC error.
pub(crate) fn rejection(status: StatusCode, message: &str) -> Response {
    let code = if status.is_server_error() {
        codes::INTERNAL_ERROR
    } else {
        codes::INVALID_REQUEST
    };
    json_error(status, None, code, message)
}

/// An HTTP error carrying a JSON-RPC error body, marked as a refusal for
/// the edge audit chain.
pub(crate) fn json_error(
    status: StatusCode,
    id: Option<&RequestId>,
    code: i64,
    message: &str,
) -> Response {
    json_error_with_data(status, id, code, message, None)
}

/// An HTTP error carrying a JSON-RPC error body with `data`, marked as a
/// refusal for the edge audit chain.
pub(crate) fn json_error_with_data(
    status: StatusCode,
    id: Option<&RequestId>,
    code: i64,
    message: &str,
    data: Option<Value>,
) -> Response {
    let mut response = (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        error_response(id, code, message, data),
    )
        .into_response();
    response.extensions_mut().insert(Refusal {
        message: message.to_owned(),
        mcp_id: id.map(RequestId::to_value),
        body_digest: None,
    });
    response
}

/// 405 naming what is allowed.
pub(crate) fn method_not_allowed(allow: &'static str) -> Response {
    let mut response = rejection(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    response
}
