//! CORS for browser-based MCP clients: the preflight every endpoint
//! answers, and the headers that let an allowed origin read a response.

use axum::http::{header, request::Parts, HeaderValue, StatusCode};
use axum::response::Response;

use super::shared::Shared;

/// A CORS preflight: Host and Origin are checked (browsers send no
/// credentials on preflights), then the methods and headers MCP uses.
pub(super) fn preflight(shared: &Shared, parts: &Parts) -> Response {
    if let Err(response) = shared.edge.check_without_auth(parts) {
        return *response;
    }
    let mut response = Response::new(axum::body::Body::empty());
    *response.status_mut() = StatusCode::NO_CONTENT;
    let headers = response.headers_mut();
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, DELETE, OPTIONS"),
    );
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static(
            "authorization, content-type, accept, last-event-id, mcp-session-id, mcp-protocol-version, mcp-method, mcp-name, *",
        ),
    );
    headers.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    response
}

/// An allowed browser origin may read the response and its session id.
pub(super) fn cors(origin: Option<HeaderValue>, mut response: Response) -> Response {
    let Some(origin) = origin else {
        return response;
    };
    if response.status() == StatusCode::FORBIDDEN {
        return response;
    }
    let headers = response.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.insert(header::VARY, HeaderValue::from_static("Origin"));
    headers.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("mcp-session-id"),
    );
    response
}
