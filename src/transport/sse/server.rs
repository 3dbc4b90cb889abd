//! The legacy HTTP+SSE transport (MCP 2024-11-05) for old clients, served
//! beside Streamable HTTP when `[listen] legacy_sse = true`:
//!
//! - `GET <endpoint>/sse` opens a session and an SSE stream whose first
//!   event is `event: endpoint` with `data: <endpoint>/message?sessionId=<id>`;
//!   everything the relay sends to the agent follows as `event: message`.
//! - `POST <endpoint>/message?sessionId=<id>` carries one client message
//!   (or a batch) into that session and is answered 202 with no body.
//! - Closing the stream ends the session.
//!
//! The edge checks, body limit and `max_sessions` are the Streamable HTTP
//! listener's.

mod sessions;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{request::Parts, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use self::sessions::LegacySession;
pub(crate) use self::sessions::LegacyTable;
use crate::jsonrpc::{codes, peek_frame_within, PeekError};
use crate::transport::http::server::{
    accepts, content_type_is_json, may_use, method_not_allowed, one_line, read_body, rejection,
    sse_body, sse_named, sse_response, with_body_digest, DropGuard, Principal, Shared, Started,
};
use crate::transport::LineFrame;

/// `GET <endpoint>/sse`: a new session and its one stream.
pub(crate) async fn open(
    shared: Arc<Shared>,
    route: Arc<str>,
    message_path: &str,
    parts: Parts,
) -> Response {
    if parts.method != Method::GET {
        return method_not_allowed("GET");
    }
    if !accepts(&parts.headers).sse {
        return rejection(
            StatusCode::NOT_ACCEPTABLE,
            "this endpoint is an SSE stream: Accept must allow text/event-stream",
        );
    }
    let Started {
        frames, outgoing, ..
    } = match shared
        .start_session(&route, "sse", Vec::new(), &parts.extensions, None)
        .await
    {
        Ok(started) => started,
        Err(err) => return err.response(&route, None),
    };
    let id = uuid::Uuid::new_v4().simple().to_string();
    let ended = CancellationToken::new();
    shared.legacy.lock().insert(
        id.clone(),
        LegacySession {
            route,
            principal: parts.extensions.get::<Principal>().cloned(),
            frames,
            ended: ended.clone(),
        },
    );
    let endpoint = sse_named(
        "endpoint",
        format!("{message_path}?sessionId={id}").as_bytes(),
    );
    let live = futures_util::stream::unfold(outgoing, |mut outgoing| async move {
        let frame = outgoing.recv().await?;
        Some((sse_named("message", &frame), outgoing))
    })
    .boxed();
    // The stream going away (client gone, relay done, shutdown) ends the session.
    let guard = DropGuard::new(move || shared.legacy.remove(&id));
    sse_response(sse_body(vec![endpoint], live, ended, guard), None)
}

/// `POST <endpoint>/message?sessionId=<id>`: one client message, 202.
pub(crate) async fn message(
    shared: Arc<Shared>,
    route: Arc<str>,
    parts: Parts,
    body: Body,
) -> Response {
    if parts.method != Method::POST {
        return method_not_allowed("POST");
    }
    let Some(id) = session_param(parts.uri.query().unwrap_or("")) else {
        return rejection(
            StatusCode::BAD_REQUEST,
            "the sessionId query parameter is required",
        );
    };
    let frames = {
        let table = shared.legacy.lock();
        table
            .get(id)
            .filter(|s| s.route == route && may_use(s.principal.as_ref(), parts.extensions.get()))
            .map(|s| s.frames.clone())
    };
    let Some(frames) = frames else {
        return rejection(StatusCode::NOT_FOUND, "unknown or ended session");
    };
    if !content_type_is_json(&parts.headers) {
        return rejection(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "the body must be application/json",
        );
    }
    let body = match read_body(&parts.headers, body, shared.settings.max_message_bytes).await {
        Ok(body) => one_line(body),
        Err(response) => return response,
    };
    if let Err(err) = peek_frame_within(body.clone(), shared.settings.max_json_depth) {
        let code = match err {
            PeekError::Parse(_) => codes::PARSE_ERROR,
            PeekError::Invalid { .. } => codes::INVALID_REQUEST,
        };
        let id = match &err {
            PeekError::Invalid { id, .. } => id.clone(),
            PeekError::Parse(_) => None,
        };
        let refusal = crate::transport::http::server::json_error(
            StatusCode::BAD_REQUEST,
            id.as_ref(),
            code,
            &err.to_string(),
        );
        return with_body_digest(refusal, &body);
    }
    match frames.send(Ok(LineFrame::Line(body))).await {
        Ok(()) => StatusCode::ACCEPTED.into_response(),
        Err(_) => rejection(StatusCode::NOT_FOUND, "the session has ended"),
    }
}

/// `sessionId` from a query string.
fn session_param(query: &str) -> Option<&str> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(key, _)| *key == "sessionId")
        .map(|(_, value)| value)
        .filter(|value| !value.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_parameter() {
        assert_eq!(session_param("sessionId=abc"), Some("abc"));
        assert_eq!(session_param("x=1&sessionId=abc&y"), Some("abc"));
        assert_eq!(session_param("sessionId="), None);
        assert_eq!(session_param(""), None);
    }
}
