//! What every endpoint of one listener shares: the settings, the edge
//! checks, the session tables, and the session starter with its
//! `max_sessions` accounting and the tracker graceful shutdown waits on.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::extract::ConnectInfo;
use axum::http::Extensions;
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::edge::Edge;
use super::principal::Principal;
use super::refusals::EdgeLog;
use super::session::SessionTable;
use super::settings::ServerSettings;
use super::start::{StartError, Started};
use crate::limits;
use crate::transport::downstream::{Downstream, SessionStarter};
use crate::transport::sse::server::LegacyTable;
use crate::transport::writer::{Divert, FrameWriter};

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
    /// of the session; its hooks name the request's [`Principal`] as the
    /// caller, and its peer address (`ConnectInfo`) as the client's. The
    /// relay's frames to the agent go to `divert` before its queue, when
    /// given.
    pub(crate) async fn start_session(
        &self,
        route: &str,
        transport: &'static str,
        upstream_headers: Vec<(String, String)>,
        request: &Extensions,
        divert: Option<Arc<dyn Divert>>,
    ) -> Result<Started, StartError> {
        let principal = request.get::<Principal>();
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
        let (writer, outgoing) = match divert {
            Some(divert) => FrameWriter::diverting(queue, divert),
            None => FrameWriter::channel(queue),
        };
        let downstream = Downstream {
            frames: futures_util::stream::unfold(frames_rx, |mut rx| async move {
                rx.recv().await.map(|frame| (frame, rx))
            })
            .boxed(),
            writer,
            transport,
            upstream_headers,
            identity: principal.map(|p| p.identity().clone()),
            client_address: request
                .get::<ConnectInfo<SocketAddr>>()
                .map(|ConnectInfo(peer)| peer.to_string()),
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
