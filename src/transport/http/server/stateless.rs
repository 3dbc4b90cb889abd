//! The 2026-07-28 (stateless) side of the Streamable HTTP endpoint.
//!
//! Each POST carries one request or notification and is one ACS session
//! of its own: a fresh relay session (its own `session_id`, `agent_id`
//! from the request's `_meta` `clientInfo`, `steps/sessionStart`, the
//! message's hooks, `steps/sessionEnd` sealing its audit chain) over a
//! fresh upstream connection (one POST to a Streamable HTTP upstream; a
//! stdio server spawned for the request, which must speak 2026-07-28 on
//! stdio). Requests of different agents share no state but the route's
//! tool schemas (for `Mcp-Param-*`); each counts against `max_sessions`
//! while it runs.
//!
//! - The headers are checked against the body first (`header_checks`):
//!   400 with -32020 or -32022 before anything is started.
//! - A notification is answered 202 once handed to its session.
//! - A request is answered as its upstream answered: one JSON body when
//!   the final response comes first, an SSE stream (no event ids: no
//!   resumption in this revision) when notifications about it come
//!   before; JSON-only or SSE-only clients get what they accept. Requests
//!   the server sends are not relayed (the revision has none). A final
//!   `-32601` is answered with HTTP 404 and a -32020..-32022 with 400, as
//!   2026-07-28 servers do.
//! - Closing the response (or hanging up before it starts) ends the
//!   session, which closes its upstream request: in this revision that
//!   is the cancellation.
//! - No `Mcp-Session-Id` is minted, and one sent along is ignored.

use std::sync::Arc;

use axum::http::{header, request::Parts, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::StreamExt;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::edge::{self, Accepts};
use super::era::SUPPORTED_VERSIONS;
use super::events::{self, DropGuard};
use super::header_checks;
use super::responses::json_error;
use super::shared::Shared;
use super::start::FrameSender;
use crate::jsonrpc::{codes, peek_frame, Frame, Message, MessageKind, RequestId};
use crate::transport::writer::FrameReceiver;
use crate::transport::LineFrame;

/// Serves one stateless POST whose body was read as `messages`.
pub(crate) async fn post(
    shared: &Arc<Shared>,
    route: Arc<str>,
    parts: &Parts,
    body: Bytes,
    messages: Vec<Message>,
    accepts: Accepts,
) -> Response {
    let message = match single(messages) {
        Ok(message) => message,
        Err(response) => return *response,
    };
    let value = match message.to_value() {
        Ok(value) => value,
        Err(err) => {
            return json_error(
                StatusCode::BAD_REQUEST,
                message.id.as_ref(),
                codes::PARSE_ERROR,
                &format!("parse error: {err}"),
            )
        }
    };
    let checked = match header_checks::check(&parts.headers, &value, &route, &SUPPORTED_VERSIONS) {
        Ok(checked) => checked,
        Err(err) => return err.response(message.id.as_ref()),
    };
    let started = match shared
        .start_session(
            &route,
            "http",
            checked.unrecognized,
            &parts.extensions,
            None,
        )
        .await
    {
        Ok(started) => started,
        Err(err) => return err.response(&route, message.id.as_ref()),
    };
    let frame = match edge::trace_context(&parts.headers) {
        Some(carrier) => LineFrame::Traced {
            line: body,
            carrier: Box::new(carrier),
        },
        None => LineFrame::Line(body),
    };
    if started.frames.send(Ok(frame)).await.is_err() {
        return ended(message.id.as_ref());
    }
    let Some(id) = message.id.clone() else {
        // The session ends once the relay has passed the notification on.
        return StatusCode::ACCEPTED.into_response();
    };
    let exchange = Exchange {
        id,
        frames: Some(started.frames),
        outgoing: started.outgoing,
    };
    exchange.answer(accepts).await
}

/// One message, a request or a notification: anything else is 400.
fn single(mut messages: Vec<Message>) -> Result<Message, Box<Response>> {
    let refuse = |id: Option<&RequestId>, reason: &str| {
        Box::new(json_error(
            StatusCode::BAD_REQUEST,
            id,
            codes::INVALID_REQUEST,
            reason,
        ))
    };
    if messages.len() != 1 {
        return Err(refuse(None, "MCP 2026-07-28 takes one message per POST"));
    }
    let message = messages.remove(0);
    if message.kind == MessageKind::Response {
        return Err(refuse(
            message.id.as_ref(),
            "MCP 2026-07-28 clients send no responses",
        ));
    }
    Ok(message)
}

fn ended(id: Option<&RequestId>) -> Response {
    json_error(
        StatusCode::BAD_GATEWAY,
        id,
        codes::UPSTREAM_UNAVAILABLE,
        "the session ended before this request was answered",
    )
}

/// One request's session, seen from its HTTP exchange. Dropping it (the
/// client went away) ends the session.
struct Exchange {
    id: RequestId,
    /// Held until the final response: closing it ends the session.
    frames: Option<FrameSender>,
    outgoing: FrameReceiver,
}

/// What the relay sent toward the agent, as it concerns this request.
enum Part {
    /// A notification about it.
    Notification(Bytes),
    /// Its response.
    Final(Bytes),
}

impl Exchange {
    /// The next frame that concerns the request; `None` once the session
    /// has ended.
    async fn next(&mut self) -> Option<Part> {
        loop {
            let frame = self.outgoing.recv().await?;
            match peek_frame(frame.clone()) {
                Ok(Frame::Single(m)) if m.kind == MessageKind::Response => {
                    if m.id.as_ref() == Some(&self.id) {
                        self.frames = None;
                        return Some(Part::Final(frame));
                    }
                    tracing::debug!("dropped a response to another request");
                }
                Ok(Frame::Single(m)) if m.kind == MessageKind::Notification => {
                    return Some(Part::Notification(frame));
                }
                _ => tracing::debug!("dropped a message 2026-07-28 has no place for"),
            }
        }
    }

    /// Waits for the first part, then answers in JSON or as a stream.
    /// A JSON-only client does not get the notifications.
    async fn answer(mut self, accepts: Accepts) -> Response {
        loop {
            match self.next().await {
                None => return ended(Some(&self.id)),
                Some(Part::Final(frame)) if accepts.json || !accepts.sse => return json(frame),
                Some(Part::Final(frame)) => return self.stream(frame, true),
                Some(Part::Notification(frame)) if accepts.sse => return self.stream(frame, false),
                Some(Part::Notification(_)) => {}
            }
        }
    }

    /// An SSE response: `first` (the final part when `done`), then every
    /// later part up to the final one.
    fn stream(self, first: Bytes, done: bool) -> Response {
        let live = futures_util::stream::unfold((self, done), |(mut exchange, done)| async move {
            if done {
                return None;
            }
            match exchange.next().await? {
                Part::Notification(frame) => Some((events::data_only(&frame), (exchange, false))),
                Part::Final(frame) => Some((events::data_only(&frame), (exchange, true))),
            }
        })
        .boxed();
        let body = events::body(
            vec![events::data_only(&first)],
            live,
            CancellationToken::new(),
            DropGuard::new(|| {}),
        );
        events::response(body, None)
    }
}

/// The final response as one JSON body, with the status a 2026-07-28
/// server gives it.
fn json(frame: Bytes) -> Response {
    let status = match error_code(&frame) {
        Some(codes::METHOD_NOT_FOUND) => StatusCode::NOT_FOUND,
        Some(code)
            if (codes::UNSUPPORTED_PROTOCOL_VERSION..=codes::HEADER_MISMATCH).contains(&code) =>
        {
            StatusCode::BAD_REQUEST
        }
        _ => StatusCode::OK,
    };
    (status, [(header::CONTENT_TYPE, "application/json")], frame).into_response()
}

/// `error.code` of a response, if it is an error.
fn error_code(frame: &[u8]) -> Option<i64> {
    #[derive(Deserialize)]
    struct Reply {
        error: Option<ErrorCode>,
    }
    #[derive(Deserialize)]
    struct ErrorCode {
        code: i64,
    }
    serde_json::from_slice::<Reply>(frame)
        .ok()?
        .error
        .map(|e| e.code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn final_errors_get_the_status_2026_07_28_gives_them() {
        let reply = |code: i64| {
            Bytes::from(format!(
                r#"{{"jsonrpc":"2.0","id":1,"error":{{"code":{code},"message":"m"}}}}"#
            ))
        };
        assert_eq!(json(reply(-32601)).status(), StatusCode::NOT_FOUND);
        assert_eq!(json(reply(-32020)).status(), StatusCode::BAD_REQUEST);
        assert_eq!(json(reply(-32022)).status(), StatusCode::BAD_REQUEST);
        assert_eq!(json(reply(-32010)).status(), StatusCode::OK);
        let ok = Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        assert_eq!(json(ok).status(), StatusCode::OK);
    }
}
