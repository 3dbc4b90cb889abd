//! Streamable HTTP sessions: the table of live sessions by id, the task
//! that routes what the relay sends to the agent, what happens when a
//! response stream is abandoned, and idle expiry.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use super::events::{self, DropGuard};
use super::outgoing::{execute, Outgoing};
use super::principal::Principal;
use super::routing::{cancellation, Attachment, Routes};
use super::start::{FrameSender, Started};
use crate::jsonrpc::{codes, error_response, Message};
use crate::telemetry::Carrier;
use crate::transport::writer::FrameReceiver;
use crate::transport::LineFrame;

/// How long a POST stream that lost its connection waits for the client to
/// resume it (GET + `Last-Event-ID`) before its unanswered requests are
/// cancelled upstream.
pub(crate) const ABANDON_GRACE: Duration = Duration::from_secs(3);

/// The session ended (deleted, expired, or the relay finished).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SessionGone;

/// One Streamable HTTP session.
pub(crate) struct HttpSession {
    pub(crate) id: String,
    /// The upstream route the session was created on.
    pub(crate) route: Arc<str>,
    /// Who opened it; only they may use it.
    pub(crate) principal: Option<Principal>,
    frames: Mutex<Option<FrameSender>>,
    outgoing: Arc<Outgoing>,
    last_active: Mutex<Instant>,
    /// Fired when the session ends, from either side.
    pub(crate) ended: CancellationToken,
    /// Fired once the relay has sealed the session's audit chain.
    pub(crate) sealed: CancellationToken,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl HttpSession {
    fn new(
        id: String,
        route: Arc<str>,
        principal: Option<Principal>,
        frames: FrameSender,
        outgoing: Arc<Outgoing>,
        sealed: CancellationToken,
    ) -> Self {
        Self {
            id,
            route,
            principal,
            frames: Mutex::new(Some(frames)),
            outgoing,
            last_active: Mutex::new(Instant::now()),
            ended: CancellationToken::new(),
            sealed,
        }
    }

    /// The routing state (never held across an await).
    pub(crate) fn routes(&self) -> MutexGuard<'_, Routes> {
        self.outgoing.routes()
    }

    /// Pushes one client frame into the relay.
    pub(crate) async fn send(&self, frame: Bytes) -> Result<(), SessionGone> {
        self.send_traced(frame, None).await
    }

    /// Pushes one client frame into the relay, with the trace context its
    /// POST carried (tracing on).
    pub(crate) async fn send_traced(
        &self,
        frame: Bytes,
        carrier: Option<Carrier>,
    ) -> Result<(), SessionGone> {
        let frame = match carrier {
            Some(carrier) => LineFrame::Traced {
                line: frame,
                carrier: Box::new(carrier),
            },
            None => LineFrame::Line(frame),
        };
        self.push(frame).await
    }

    /// Pushes one client message the endpoint has already peeked, so the
    /// relay does not peek it again.
    pub(crate) async fn send_peeked(&self, message: Message) -> Result<(), SessionGone> {
        self.push(LineFrame::Peeked(Box::new(message))).await
    }

    async fn push(&self, frame: LineFrame) -> Result<(), SessionGone> {
        let frames = lock(&self.frames).clone().ok_or(SessionGone)?;
        frames.send(Ok(frame)).await.map_err(|_| SessionGone)
    }

    /// Ends the agent's side: the relay sees its input end, shuts the
    /// upstream down and seals the audit chain.
    pub(crate) fn close(&self) {
        lock(&self.frames).take();
        self.ended.cancel();
    }

    /// Records activity (a request, or a connection going away).
    pub(crate) fn touch(&self) {
        *lock(&self.last_active) = Instant::now();
    }

    /// How long the session has been idle; zero while a stream is open.
    fn idle_for(&self) -> Duration {
        if self.routes().has_live() {
            return Duration::ZERO;
        }
        lock(&self.last_active).elapsed()
    }

    /// An SSE response body for a connection attached to one of this
    /// session's streams. When it goes away with requests unanswered, they
    /// are cancelled unless the client resumes in time.
    pub(crate) fn sse_body(self: &Arc<Self>, attachment: Attachment) -> axum::body::Body {
        let (first, live, kick, guard) = self.sse_parts(attachment);
        events::body(first, live, kick, guard)
    }

    /// [`Self::sse_body`] for the answer to a POST: returned once its first
    /// event is ready (or [`events::FIRST_EVENT_WAIT`] passed), so the
    /// headers and a quick answer leave together.
    pub(crate) async fn post_sse_body(
        self: &Arc<Self>,
        attachment: Attachment,
    ) -> axum::body::Body {
        let (first, live, kick, guard) = self.sse_parts(attachment);
        events::body_after_first(first, live, kick, guard).await
    }

    fn sse_parts(
        self: &Arc<Self>,
        attachment: Attachment,
    ) -> (
        Vec<Bytes>,
        BoxStream<'static, Bytes>,
        CancellationToken,
        DropGuard,
    ) {
        let Attachment {
            stream,
            generation,
            replay,
            live,
            kick,
        } = attachment;
        let first = replay.iter().map(events::encode).collect();
        let live = match live {
            Some(rx) => futures_util::stream::unfold(rx, |mut rx| async move {
                rx.recv().await.map(|event| (events::encode(&event), rx))
            })
            .boxed(),
            None => futures_util::stream::empty().boxed(),
        };
        let session = self.clone();
        let guard = DropGuard::new(move || session.detached(stream, generation, ABANDON_GRACE));
        (first, live, kick, guard)
    }

    /// A guard for a JSON-mode POST: if the client goes away before the
    /// answer, its requests are cancelled at once.
    pub(crate) fn json_guard(self: &Arc<Self>, stream: u64) -> DropGuard {
        let session = self.clone();
        DropGuard::new(move || session.detached(stream, 0, Duration::ZERO))
    }

    fn detached(self: &Arc<Self>, stream: u64, generation: u64, grace: Duration) {
        self.touch();
        if !self.routes().detach(stream, generation) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let session = self.clone();
        runtime.spawn(async move {
            tokio::select! {
                _ = tokio::time::sleep(grace) => {}
                _ = session.ended.cancelled() => return,
            }
            let abandoned = session.routes().abandon(stream, generation);
            for id in abandoned {
                tracing::debug!(session = %session.id, %id, "the client abandoned a request; cancelling it");
                if session.send(cancellation(&id)).await.is_err() {
                    break;
                }
            }
        });
    }
}

/// Live Streamable HTTP sessions by id.
#[derive(Default)]
pub(crate) struct SessionTable {
    map: Mutex<HashMap<String, Arc<HttpSession>>>,
}

impl SessionTable {
    pub(crate) fn get(&self, id: &str) -> Option<Arc<HttpSession>> {
        lock(&self.map).get(id).cloned()
    }

    /// Removes and returns the session.
    pub(crate) fn remove(&self, id: &str) -> Option<Arc<HttpSession>> {
        lock(&self.map).remove(id)
    }

    /// Every session, removed from the table.
    pub(crate) fn drain(&self) -> Vec<Arc<HttpSession>> {
        lock(&self.map).drain().map(|(_, s)| s).collect()
    }

    /// Registers a started session under a fresh id and starts routing what
    /// the relay sends it; `outgoing` is the routing state the session's
    /// relay writer was started with.
    pub(crate) fn create(
        self: &Arc<Self>,
        route: Arc<str>,
        principal: Option<Principal>,
        started: Started,
        outgoing: Arc<Outgoing>,
    ) -> Arc<HttpSession> {
        let Started {
            frames,
            outgoing: queued,
            sealed,
        } = started;
        let id = uuid::Uuid::new_v4().simple().to_string();
        let session = Arc::new(HttpSession::new(
            id.clone(),
            route,
            principal,
            frames,
            outgoing,
            sealed,
        ));
        lock(&self.map).insert(id, session.clone());
        let table = Arc::downgrade(self);
        let routed = session.clone();
        tokio::spawn(async move {
            route_outgoing(&routed, queued).await;
            answer_unanswered(&routed).await;
            routed.routes().close();
            routed.close();
            if let Some(table) = table.upgrade() {
                let mut map = lock(&table.map);
                if map.get(&routed.id).is_some_and(|s| Arc::ptr_eq(s, &routed)) {
                    map.remove(&routed.id);
                }
            }
        });
        session
    }

    /// Closes sessions idle for longer than `idle`.
    pub(crate) fn expire_idle(&self, idle: Duration) {
        let expired: Vec<Arc<HttpSession>> = {
            let mut map = lock(&self.map);
            let ids: Vec<String> = map
                .iter()
                .filter(|(_, s)| s.idle_for() > idle)
                .map(|(id, _)| id.clone())
                .collect();
            ids.iter().filter_map(|id| map.remove(id)).collect()
        };
        for session in expired {
            tracing::info!(session = %session.id, "closing an idle session");
            session.close();
        }
    }
}

/// The relay is gone: a request it never saw (posted while the session was
/// ending) or never answered gets an error instead of a silent stream.
async fn answer_unanswered(session: &HttpSession) {
    let unanswered = session.routes().unanswered();
    for id in unanswered {
        let reply = error_response(
            Some(&id),
            codes::UPSTREAM_UNAVAILABLE,
            "the session ended before this request was answered",
            None,
        );
        let dispatches = session.routes().route(reply);
        for dispatch in dispatches {
            execute(dispatch).await;
        }
    }
}

/// Routes every frame the relay sends to the agent, until the relay is done.
async fn route_outgoing(session: &HttpSession, mut outgoing: FrameReceiver) {
    while let Some(frame) = outgoing.recv().await {
        let _routing = session.outgoing.entry();
        let dispatches = session.routes().route(frame);
        for dispatch in dispatches {
            execute(dispatch).await;
        }
    }
}
