//! Downstream WebSocket (`[listen] transport = "ws"`): agents upgrade at
//! the MCP endpoint paths with subprotocol `mcp` (required, and echoed).
//! One session per connection; each text frame is one JSON-RPC message
//! (or batch) into the session, each frame the relay sends is one text
//! message, and closing the socket ends the session. The Host, Origin and
//! bearer checks apply to the upgrade request like to any HTTP request.

use std::sync::Arc;

use axum::extract::ws::{close_code, CloseFrame, Message, Utf8Bytes, WebSocket};
use axum::extract::{FromRequestParts, WebSocketUpgrade};
use axum::http::{header, request::Parts, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};

use crate::transport::http::server::{
    method_not_allowed, one_line, rejection, Shared, StartError, Started,
};
use crate::transport::LineFrame;

/// The WebSocket subprotocol MCP clients ask for.
const SUBPROTOCOL: &str = "mcp";

/// Upgrades to a WebSocket carrying one new session.
pub(crate) async fn upgrade(shared: Arc<Shared>, route: Arc<str>, mut parts: Parts) -> Response {
    if parts.method != Method::GET {
        return method_not_allowed("GET");
    }
    let upgrade = match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
        Ok(upgrade) => upgrade,
        Err(rejection) => return rejection.into_response(),
    };
    let offered = parts
        .headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|p| p.trim() == SUBPROTOCOL);
    if !offered {
        return rejection(
            StatusCode::BAD_REQUEST,
            "the WebSocket subprotocol `mcp` is required (Sec-WebSocket-Protocol: mcp)",
        );
    }
    let upgrade = upgrade.protocols([SUBPROTOCOL]);
    let started = match shared
        .start_session(&route, "ws", Vec::new(), &parts.extensions, None)
        .await
    {
        Ok(started) => started,
        Err(StartError::Busy(limit)) => {
            return upgrade.on_upgrade(move |socket| refuse(socket, limit.to_string()))
        }
        Err(err) => return err.response(&route, None),
    };
    let limit = shared.settings.max_message_bytes;
    upgrade
        .max_message_size(limit)
        .max_frame_size(limit)
        .on_upgrade(move |socket| pump(socket, started))
}

/// A session over the session limit: the socket is closed at once with
/// 1013 (try again later) and the limit as the reason, which a WebSocket
/// client can read where it could not read a refused upgrade's body.
async fn refuse(mut socket: WebSocket, reason: String) {
    let _ = socket
        .send(Message::Close(Some(CloseFrame {
            code: close_code::AGAIN,
            reason: Utf8Bytes::from(close_reason(reason)),
        })))
        .await;
}

/// A close reason fits in 123 bytes (RFC 6455 §5.5); longer ones are cut
/// at a character boundary.
fn close_reason(mut reason: String) -> String {
    const MAX: usize = 123;
    if reason.len() > MAX {
        let mut end = MAX;
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        reason.truncate(end);
    }
    reason
}

/// Relays between the socket and the session until either side ends.
async fn pump(socket: WebSocket, started: Started) {
    let Started {
        frames,
        mut outgoing,
        ..
    } = started;
    let (mut sink, mut stream) = socket.split();
    let to_agent = async move {
        while let Some(frame) = outgoing.recv().await {
            let frame = one_line(frame);
            let message = match Utf8Bytes::try_from(frame.clone()) {
                Ok(text) => Message::Text(text),
                Err(_) => Message::Binary(frame),
            };
            if sink.send(message).await.is_err() {
                return;
            }
        }
        let _ = sink
            .send(Message::Close(Some(CloseFrame {
                code: close_code::NORMAL,
                reason: Utf8Bytes::from_static("the session ended"),
            })))
            .await;
    };
    let from_agent = async move {
        while let Some(message) = stream.next().await {
            let bytes = match message {
                Ok(Message::Text(text)) => Bytes::from(text),
                Ok(Message::Binary(bytes)) => bytes,
                Ok(Message::Ping(_) | Message::Pong(_)) => continue,
                Ok(Message::Close(_)) => break,
                Err(err) => {
                    tracing::debug!(%err, "the WebSocket failed");
                    break;
                }
            };
            if frames
                .send(Ok(LineFrame::Line(one_line(bytes))))
                .await
                .is_err()
            {
                break;
            }
        }
        // Dropping `frames` here ends the session's input.
    };
    tokio::select! {
        _ = to_agent => {}
        _ = from_agent => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_reasons_fit_a_control_frame() {
        assert_eq!(close_reason("short".into()), "short");
        let long = "é".repeat(100);
        let cut = close_reason(long);
        assert!(cut.len() <= 123 && cut.chars().all(|c| c == 'é'));
    }
}
