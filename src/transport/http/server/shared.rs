//! What every endpoint of one listener shares: the settings, the edge
//! checks, the session tables, and the session starter with its
//! `max_sessions` accounting and the tracker graceful shutdown waits on.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::Response;
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::edge::{json_error, Edge};
use super::refusals::EdgeLog;
use super::session::SessionTable;
use super::ServerSettings;
use crate::jsonrpc::{codes, RequestId};
use crate::limits::{self, LimitExceeded};
use crate::transport::downstream::{Downstream, SessionStarter};
use crate::transport::sse::server::LegacyTable;
use crate::transport::writer::{FrameReceiver, FrameWriter};
use crate::transport::LineFrame;

/// Sends the agent's frames into a session.
pub(crate) type FrameSender = mpsc::Sender<std::io::Result<LineFrame>>;

/// State shared by every endpoint of one listener.
pub(crate) struct Shared {
    pub(crate) settings: ServerSettings,
    pub(crate) edge: Edge,
    /// Requests refused before reaching a session, for the audit log.
    pub(crate) refusals: EdgeLog,
    pub(crate) http: Arc<SessionTable>,
    pub(crate) legacy: LegacyTable,
    starter: Arc<dyn SessionStarter>,
    active: Arc<AtomicUsize>,
    pub(crate) tracker: TaskTracker,
    /// Fired when the listener stops accepting: no new sessions.
    pub(crate) stopping: CancellationToken,
}

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

/// One of `max_sessions`, released when the relay session has ended.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Shared {
    pub(crate) fn new(
        settings: ServerSettings,
        edge: Edge,
        refusals: EdgeLog,
        starter: Arc<dyn SessionStarter>,
    ) -> Self {
        Self {
            settings,
            edge,
            refusals,
            http: Arc::new(SessionTable::default()),
            legacy: LegacyTable::default(),
            starter,
            active: Arc::new(AtomicUsize::new(0)),
            tracker: TaskTracker::new(),
            stopping: CancellationToken::new(),
        }
    }

    /// Sessions started and not yet sealed.
    pub(crate) fn active_sessions(&self) -> usize {
        self.active.load(Ordering::Acquire)
    }

    fn try_slot(&self) -> Option<Slot> {
        let max = self.settings.listen.max_sessions;
        self.active
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(self.active.clone()))
    }

    /// Starts a relay session on `route` for an accepted downstream session.
    /// `upstream_headers` go on to the route's upstream with every request
    /// of the session.
    pub(crate) async fn start_session(
        &self,
        route: &str,
        transport: &'static str,
        upstream_headers: Vec<(String, String)>,
    ) -> Result<Started, StartError> {
        if self.stopping.is_cancelled() {
            return Err(StartError::ShuttingDown);
        }
        let Some(slot) = self.try_slot() else {
            let limit = limits::sessions_exceeded(&self.settings.listen);
            limit.count();
            self.starter.refused(route, transport, &limit).await;
            return Err(StartError::Busy(limit));
        };
        let queue = self.settings.queue.max(1);
        let (frames, frames_rx) = mpsc::channel(queue);
        let (writer, outgoing) = FrameWriter::channel(queue);
        let downstream = Downstream {
            frames: futures_util::stream::unfold(frames_rx, |mut rx| async move {
                rx.recv().await.map(|frame| (frame, rx))
            })
            .boxed(),
            writer,
            transport,
            upstream_headers,
        };
        let handle = self
            .starter
            .start(route, downstream)
            .await
            .map_err(StartError::Upstream)?;
        let sealed = CancellationToken::new();
        let done = sealed.clone();
        self.tracker.spawn(async move {
            if let Err(err) = handle.done.await {
                tracing::error!(%err, "a relay session task failed");
            }
            drop(slot);
            done.cancel();
        });
        Ok(Started {
            frames,
            outgoing,
            sealed,
        })
    }
}
