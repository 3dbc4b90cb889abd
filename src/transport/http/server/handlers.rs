//! The Streamable HTTP endpoint (MCP 2025-03-26 … 2025-11-25, session
//! era): POST carries client messages, GET opens (or resumes) a stream,
//! DELETE ends the session. Requests of the stateless era (2026-07-28,
//! see `era`) are handed to `stateless` on the same endpoint; GET and
//! DELETE announcing that era get 405.
//!
//! Choices where the specification leaves room:
//! - A POST whose `Accept` allows SSE is answered with an SSE stream; one
//!   that accepts only `application/json` gets one JSON body (an array for
//!   a batch). `Accept` allowing neither: 400. A body that is not
//!   `application/json`: 415.
//! - `initialize` without `Mcp-Session-Id` opens a session (503 at
//!   `max_sessions`, 502 when the upstream cannot be reached); any other
//!   request without the header gets 400, an unknown/expired/deleted id 404.
//! - A second GET on the standalone stream *replaces* the first (which
//!   ends), so a client reconnecting before the server noticed the old
//!   connection drop is not locked out; each message still goes to exactly
//!   one stream.
//! - GET + `Last-Event-ID` resumes the stream the id names (POST streams
//!   included) from the events still kept; an id of a stream no longer
//!   kept gets 409, a malformed one 400. Sessions that negotiated
//!   2025-11-25 or later get a priming event (id, empty data) first on
//!   every new stream that has nothing to replay.
//! - A POST stream whose connection closes before all its responses were
//!   sent is treated as abandoned once nobody resumed it within
//!   [`ABANDON_GRACE`](super::session::ABANDON_GRACE): the proxy sends
//!   `notifications/cancelled` for its unanswered requests into the
//!   session, so the relay cancels them upstream. (R1–R3 say a disconnect
//!   is not a cancellation; clients that resume do so within the grace.)
//!   A JSON-mode POST whose client goes away is cancelled at once.
//! - A client `notifications/cancelled` settles that request: its stream
//!   ends when nothing else on it is awaited.
//! - DELETE answers 204 once the relay has sealed the session's audit
//!   chain (or after a few seconds).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, request::Parts, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

use super::edge::{self, Refused};
use super::era::{self, SUPPORTED_VERSIONS};
use super::events::{self, SESSION_HEADER};
use super::outgoing::{execute, Outgoing};
use super::principal::{may_use, Principal};
use super::responses::{json_error, method_not_allowed, rejection, with_body_digest};
use super::routing::{cancelled_request, AttachError, Mode, Opened, PostedRequest, STANDALONE};
use super::session::{HttpSession, SessionGone};
use super::shared::Shared;
use super::stateless;
use crate::jsonrpc::{codes, peek_frame_within, Frame, Message, MessageKind, PeekError};
use crate::telemetry::Carrier;
use crate::transport::http::metadata::PROTOCOL_VERSION_HEADER;
use crate::transport::writer::Divert;

/// How long DELETE waits for the session's audit chain to be sealed.
const SEAL_WAIT: Duration = Duration::from_secs(5);

/// Dispatches one request to the endpoint by method.
pub(crate) async fn endpoint(
    shared: Arc<Shared>,
    route: Arc<str>,
    parts: Parts,
    body: Body,
) -> Response {
    match parts.method {
        Method::POST => post(&shared, route, &parts, body).await,
        Method::GET | Method::DELETE if era::announces_stateless(&parts.headers) => {
            method_not_allowed("POST")
        }
        Method::GET => get(&shared, &route, &parts),
        Method::DELETE => delete(&shared, &route, &parts).await,
        _ => method_not_allowed("GET, POST, DELETE"),
    }
}

/// The session a request names: 400 without an id, 404 for an unknown
/// (expired, deleted, other route's, other principal's) one.
fn session_of(shared: &Shared, route: &str, parts: &Parts) -> Result<Arc<HttpSession>, Refused> {
    let presented = parts.extensions.get::<Principal>();
    let Some(id) = parts.headers.get(SESSION_HEADER) else {
        return Err(Box::new(rejection(
            StatusCode::BAD_REQUEST,
            "Mcp-Session-Id is required: send `initialize` first to open a session",
        )));
    };
    let session = id
        .to_str()
        .ok()
        .and_then(|id| shared.http.get(id))
        .filter(|s| &*s.route == route && may_use(s.principal.as_ref(), presented));
    session.ok_or_else(|| {
        Box::new(rejection(
            StatusCode::NOT_FOUND,
            "unknown or ended session: start a new one with `initialize`",
        ))
    })
}

/// `MCP-Protocol-Version`: absent is fine (2025-03-26 is assumed); present
/// must be the negotiated version or one this endpoint supports.
fn check_version(headers: &HeaderMap, negotiated: Option<&str>) -> Result<(), Refused> {
    let Some(value) = headers.get(PROTOCOL_VERSION_HEADER) else {
        return Ok(());
    };
    let version = value.to_str().unwrap_or("").trim();
    if Some(version) == negotiated || SUPPORTED_VERSIONS.contains(&version) {
        return Ok(());
    }
    Err(Box::new(rejection(
        StatusCode::BAD_REQUEST,
        &format!(
            "unsupported MCP-Protocol-Version {version:?}; supported: {}",
            SUPPORTED_VERSIONS.join(", ")
        ),
    )))
}

fn with_session_header(mut response: Response, session: &HttpSession) -> Response {
    if let Ok(value) = HeaderValue::from_str(&session.id) {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    response
}

async fn post(shared: &Arc<Shared>, route: Arc<str>, parts: &Parts, body: Body) -> Response {
    let headers = &parts.headers;
    if !edge::content_type_is_json(headers) {
        return rejection(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "the body must be application/json",
        );
    }
    let accepts = edge::accepts(headers);
    if !accepts.json && !accepts.sse {
        return rejection(
            StatusCode::BAD_REQUEST,
            "Accept must allow application/json or text/event-stream",
        );
    }
    let body = match edge::read_body(headers, body, shared.settings.max_message_bytes).await {
        Ok(body) => edge::one_line(body),
        Err(response) => return response,
    };
    let (messages, batch) = match frame_of(&body, shared.settings.max_json_depth) {
        Ok(frame) => frame,
        Err(response) => return with_body_digest(*response, &body),
    };
    if era::is_stateless_post(headers, &messages, batch) {
        return stateless::post(shared, route, parts, body, messages, accepts).await;
    }
    let initialize =
        !batch && messages[0].kind == MessageKind::Request && messages[0].method() == "initialize";
    let session = if headers.contains_key(SESSION_HEADER) || !initialize {
        let session = match session_of(shared, &route, parts) {
            Ok(session) => session,
            Err(response) => return *response,
        };
        let negotiated = session.routes().protocol_version().map(str::to_owned);
        if let Err(response) = check_version(headers, negotiated.as_deref()) {
            return *response;
        }
        session
    } else {
        if let Err(response) = check_version(headers, None) {
            return *response;
        }
        let principal = parts.extensions.get::<Principal>();
        let outgoing = Arc::new(Outgoing::new());
        let divert = Some(outgoing.clone() as Arc<dyn Divert>);
        match shared
            .start_session(&route, "http", Vec::new(), &parts.extensions, divert)
            .await
        {
            Ok(started) => shared
                .http
                .create(route.clone(), principal.cloned(), started, outgoing),
            Err(err) => return err.response(&route, messages[0].id.as_ref()),
        }
    };
    session.touch();
    let carrier = edge::trace_context(headers);
    deliver(
        &session,
        body,
        carrier,
        messages,
        batch,
        initialize,
        accepts.sse,
    )
    .await
}

/// The messages of a POST body, and whether they came as a batch; 400 with
/// -32700 / -32600 when the body is not a usable JSON-RPC frame or is a
/// batch holding `initialize` (MCP lifecycle).
fn frame_of(body: &Bytes, max_depth: usize) -> Result<(Vec<Message>, bool), Refused> {
    let (messages, batch) = match peek_frame_within(body.clone(), max_depth) {
        Ok(Frame::Single(message)) => (vec![message], false),
        Ok(Frame::Batch(messages)) => (messages, true),
        Err(PeekError::Parse(reason)) => {
            return Err(Box::new(json_error(
                StatusCode::BAD_REQUEST,
                None,
                codes::PARSE_ERROR,
                &format!("parse error: {reason}"),
            )))
        }
        Err(PeekError::Invalid { id, reason }) => {
            return Err(Box::new(json_error(
                StatusCode::BAD_REQUEST,
                id.as_ref(),
                codes::INVALID_REQUEST,
                &format!("invalid request: {reason}"),
            )))
        }
    };
    if batch {
        if let Some(init) = messages.iter().find(|m| m.method() == "initialize") {
            return Err(Box::new(json_error(
                StatusCode::BAD_REQUEST,
                init.id.as_ref(),
                codes::INVALID_REQUEST,
                "invalid request: `initialize` must not be part of a JSON-RPC batch",
            )));
        }
    }
    Ok((messages, batch))
}

/// Hands a POST's frame to the relay: a single message as the endpoint
/// already peeked it (so the relay does not peek it again), unless it
/// carries a trace context, which travels beside the bytes.
async fn forward(
    session: &HttpSession,
    frame: Bytes,
    carrier: Option<Carrier>,
    single: Option<Message>,
) -> Result<(), SessionGone> {
    match (single, carrier) {
        (Some(message), None) => session.send_peeked(message).await,
        (_, carrier) => session.send_traced(frame, carrier).await,
    }
}

/// Pushes a POST's frame into the session and answers it: 202 for
/// notifications and responses only, else an SSE stream (or one JSON body
/// when the client accepts only JSON) carrying what is routed to it.
async fn deliver(
    session: &Arc<HttpSession>,
    frame: Bytes,
    carrier: Option<Carrier>,
    messages: Vec<Message>,
    batch: bool,
    initialize: bool,
    sse: bool,
) -> Response {
    let mut completed = Vec::new();
    for message in &messages {
        if let Some(id) = cancelled_request(message) {
            completed.extend(session.routes().client_cancelled(&id));
        }
    }
    for dispatch in completed {
        execute(dispatch).await;
    }
    let requests: Vec<PostedRequest> = messages.iter().filter_map(PostedRequest::of).collect();
    let single = (!batch).then(|| messages.into_iter().next()).flatten();
    if requests.is_empty() {
        return match forward(session, frame, carrier, single).await {
            Ok(()) => StatusCode::ACCEPTED.into_response(),
            Err(_) => gone(),
        };
    }
    let mode = if sse { Mode::Sse } else { Mode::Json };
    let opened = {
        let mut routes = session.routes();
        if let Some(duplicate) = requests.iter().find(|r| routes.is_pending(&r.id)) {
            return json_error(
                StatusCode::BAD_REQUEST,
                Some(&duplicate.id),
                codes::INVALID_REQUEST,
                "this request id is already in use by a request still in flight",
            );
        }
        match routes.open_post(&requests, mode, batch, initialize) {
            Ok(opened) => opened,
            Err(_) => return gone(),
        }
    };
    // Registered before the relay sees the frame, so the answer has a home.
    if forward(session, frame, carrier, single).await.is_err() {
        return gone();
    }
    match opened {
        Opened::Sse(attachment) => {
            let body = session.post_sse_body(attachment).await;
            events::response(body, Some(&session.id))
        }
        Opened::Json { stream, reply } => {
            let mut guard = session.json_guard(stream);
            let result = reply.await;
            guard.disarm();
            match result {
                Ok(body) => with_session_header(
                    (
                        StatusCode::OK,
                        [(header::CONTENT_TYPE, "application/json")],
                        body,
                    )
                        .into_response(),
                    session,
                ),
                Err(_) if session.ended.is_cancelled() => gone(),
                Err(_) => StatusCode::ACCEPTED.into_response(),
            }
        }
    }
}

fn gone() -> Response {
    rejection(StatusCode::NOT_FOUND, "the session has ended")
}

fn get(shared: &Arc<Shared>, route: &str, parts: &Parts) -> Response {
    let headers = &parts.headers;
    if !edge::accepts(headers).sse {
        return rejection(
            StatusCode::NOT_ACCEPTABLE,
            "GET opens an SSE stream: Accept must allow text/event-stream",
        );
    }
    let session = match session_of(shared, route, parts) {
        Ok(session) => session,
        Err(response) => return *response,
    };
    let negotiated = session.routes().protocol_version().map(str::to_owned);
    if let Err(response) = check_version(headers, negotiated.as_deref()) {
        return *response;
    }
    let (stream, cursor) = match headers.get("last-event-id") {
        None => (STANDALONE, None),
        Some(value) => match parse_event_id(value.to_str().unwrap_or("")) {
            Some((stream, seq)) => (stream, Some(seq)),
            None => {
                return rejection(
                    StatusCode::BAD_REQUEST,
                    "Last-Event-ID is not an event id of this server",
                )
            }
        },
    };
    session.touch();
    let attached = session.routes().attach(stream, cursor);
    match attached {
        Ok(attachment) => events::response(session.sse_body(attachment), Some(&session.id)),
        Err(AttachError::UnknownStream) => rejection(
            StatusCode::CONFLICT,
            "the stream of that Last-Event-ID is no longer kept",
        ),
        Err(AttachError::Closed) => gone(),
    }
}

/// `<stream>-<seq>`.
fn parse_event_id(text: &str) -> Option<(u64, u64)> {
    let (stream, seq) = text.trim().split_once('-')?;
    Some((stream.parse().ok()?, seq.parse().ok()?))
}

async fn delete(shared: &Arc<Shared>, route: &str, parts: &Parts) -> Response {
    let session = match session_of(shared, route, parts) {
        Ok(session) => session,
        Err(response) => return *response,
    };
    shared.http.remove(&session.id);
    session.close();
    // Answer once the relay has shut the upstream down and sealed the chain.
    let _ = tokio::time::timeout(SEAL_WAIT, session.sealed.cancelled()).await;
    StatusCode::NO_CONTENT.into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        let mut headers = HeaderMap::new();
        assert!(check_version(&headers, None).is_ok());
        headers.insert(
            PROTOCOL_VERSION_HEADER,
            HeaderValue::from_static("2025-06-18"),
        );
        assert!(check_version(&headers, Some("2025-11-25")).is_ok());
        headers.insert(
            PROTOCOL_VERSION_HEADER,
            HeaderValue::from_static("2031-01-01"),
        );
        assert!(check_version(&headers, Some("2031-01-01")).is_ok());
        let err = check_version(&headers, Some("2025-11-25")).unwrap_err();
        assert_eq!(err.status(), StatusCode::BAD_REQUEST);
    }

    #[test]
    fn event_ids() {
        assert_eq!(parse_event_id("3-17"), Some((3, 17)));
        assert_eq!(parse_event_id("x-1"), None);
        assert_eq!(parse_event_id("17"), None);
    }
}
