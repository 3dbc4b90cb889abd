//! What starting a session hands the transport that asked (the agent's
//! and the relay's directions), or why it could not start. Shared starts
//! sessions and every transport's server consumes the result; the types
//! sit below both so neither imports the other for them.

use axum::http::StatusCode;
use axum::response::Response;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::responses::json_error;
use crate::jsonrpc::{codes, RequestId};
use crate::limits::LimitExceeded;
use crate::transport::writer::FrameReceiver;
use crate::transport::LineFrame;

/// Sends the agent's frames into a session.
pub(crate) type FrameSender = mpsc::Sender<std::io::Result<LineFrame>>;

/// A session just started: its two directions, as the transport sees them.
pub(crate) struct Started {
    /// Frames from the agent, into the relay; dropping it ends the session.
    pub(crate) frames: FrameSender,
    /// Frames the relay sends to the agent.
    pub(crate) outgoing: FrameReceiver,
    /// Fired once the relay session has ended and sealed its audit chain.
    pub(crate) sealed: CancellationToken,
}

/// Why a session could not start.
#[derive(Debug)]
pub(crate) enum StartError {
    /// `max_sessions` are open.
    Busy(LimitExceeded),
    /// The listener is shutting down.
    ShuttingDown,
    /// The route's upstream could not be reached.
    Upstream(String),
}

impl StartError {
    /// 503 or 502 with a JSON-RPC error body (echoing `id` when known).
    pub(crate) fn response(&self, route: &str, id: Option<&RequestId>) -> Response {
        match self {
            StartError::Busy(limit) => json_error(
                StatusCode::SERVICE_UNAVAILABLE,
                id,
                limit.code(),
                &limit.to_string(),
            ),
            StartError::ShuttingDown => json_error(
                StatusCode::SERVICE_UNAVAILABLE,
                id,
                codes::INTERNAL_ERROR,
                "the proxy is shutting down",
            ),
            StartError::Upstream(reason) => json_error(
                StatusCode::BAD_GATEWAY,
                id,
                codes::UPSTREAM_UNAVAILABLE,
                &format!("the upstream server of route {route:?} cannot be reached: {reason}"),
            ),
        }
    }
}
