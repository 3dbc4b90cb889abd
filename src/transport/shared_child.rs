//! One stdio server shared by every session of a route
//! (`[[upstream]] share = true`), instead of one child per session.
//!
//! Each session sees an ordinary [`Upstream`]: frames from the server, a
//! writer to it, and control over its lifetime. Underneath, one task reads
//! the child and hands each message to the session it belongs to, and one
//! task per session rewrites what the session sends before it reaches the
//! child; `routes` holds the rules (ids, progress tokens, cancellations,
//! the one `initialize`, who answers a server request, broadcasts).
//!
//! The child starts with the first session and stops, in order, when the
//! last one leaves. When it exits on its own, every session ends as it
//! would with a child of its own (its requests in flight get -32011), and
//! the next session starts a fresh child.

mod routes;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt};
use serde_json::{json, Value};
use tokio::process::ChildStdout;
use tokio::sync::{mpsc, watch};
use tokio_util::codec::FramedRead;

use self::routes::{Down, MemberId, Routes, Up};
use super::child::{ChildExit, ChildProcess, ChildUpstream};
use super::line::{LineCodec, LineFrame};
use super::upstream::{Upstream, UpstreamControl, UpstreamError, UpstreamExit};
use super::writer::{FrameReceiver, FrameWriter};
use crate::config::UpstreamConfig;
use crate::jsonrpc::{codes, error_response, RequestId};

/// Frames on their way to one session.
type FrameSender = mpsc::Sender<std::io::Result<LineFrame>>;

type Slots = Arc<Mutex<HashMap<String, Arc<SharedChild>>>>;

static NEXT_MEMBER: AtomicU64 = AtomicU64::new(1);

/// The shared children of every `share = true` route, started on demand.
#[derive(Default)]
pub struct SharedChildren {
    slots: Slots,
}

impl SharedChildren {
    /// Attaches a new session to the route's child, starting the child when
    /// none is running (the first session, or after it exited).
    pub fn connect(
        &self,
        config: &UpstreamConfig,
        max_message_bytes: usize,
        queue: usize,
    ) -> Result<Upstream, UpstreamError> {
        let queue = queue.max(1);
        let member = NEXT_MEMBER.fetch_add(1, Ordering::Relaxed);
        let (frames_tx, frames_rx) = mpsc::channel(queue);
        let child = {
            let mut slots = lock(&self.slots);
            let child = match slots.get(&config.name) {
                Some(child) if child.is_running() => child.clone(),
                _ => {
                    let child = SharedChild::spawn(config, max_message_bytes, queue)?;
                    slots.insert(config.name.clone(), child.clone());
                    child
                }
            };
            child.attach(member, frames_tx);
            child
        };
        let (writer, from_session) = FrameWriter::channel(queue);
        let uplink = tokio::spawn(uplink(child.clone(), member, from_session));
        let frames = futures_util::stream::unfold(frames_rx, |mut rx| async move {
            rx.recv().await.map(|frame| (frame, rx))
        });
        Ok(Upstream {
            frames: frames.boxed(),
            writer,
            writer_task: Some(uplink),
            control: Box::new(Membership {
                child,
                member,
                slots: self.slots.clone(),
            }),
        })
    }
}

/// The running child and who is attached to it.
struct SharedChild {
    route: String,
    to_server: FrameWriter,
    state: Mutex<State>,
    process: tokio::sync::Mutex<ChildProcess>,
    exit: watch::Sender<Option<ChildExit>>,
}

#[derive(Default)]
struct State {
    routes: Routes,
    sessions: HashMap<MemberId, FrameSender>,
    /// The last session left; the child is being shut down.
    closing: bool,
}

impl SharedChild {
    fn spawn(
        config: &UpstreamConfig,
        max_message_bytes: usize,
        queue: usize,
    ) -> Result<Arc<Self>, UpstreamError> {
        let (process, reader, to_server, _writer_task) =
            ChildUpstream::spawn(config, max_message_bytes, queue)?.into_parts();
        let (exit, _) = watch::channel(None);
        let child = Arc::new(SharedChild {
            route: config.name.clone(),
            to_server,
            state: Mutex::new(State::default()),
            process: tokio::sync::Mutex::new(process),
            exit,
        });
        tokio::spawn(read_server(child.clone(), reader));
        tracing::debug!(route = %child.route, "started a shared upstream server");
        Ok(child)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    fn is_running(&self) -> bool {
        self.exit.borrow().is_none() && !self.state().closing
    }

    fn attach(&self, member: MemberId, frames: FrameSender) {
        let mut state = self.state();
        state.routes.join(member);
        state.sessions.insert(member, frames);
    }

    /// Hands a message from the server to the sessions it belongs to.
    async fn deliver_down(&self, message: Value) {
        let request_id = match (message.get("method"), message.get("id")) {
            (Some(_), Some(id)) => Some(RequestId::from_json(&id.to_string())),
            _ => None,
        };
        let deliveries: Vec<(FrameSender, Value)> = {
            let mut state = self.state();
            match state.routes.down(message) {
                Down::To(messages) => messages
                    .into_iter()
                    .filter_map(|(member, message)| {
                        state.sessions.get(&member).map(|tx| (tx.clone(), message))
                    })
                    .collect(),
                Down::Broadcast(message) => state
                    .sessions
                    .values()
                    .map(|tx| (tx.clone(), message.clone()))
                    .collect(),
                Down::Drop => Vec::new(),
            }
        };
        if deliveries.is_empty() {
            if let Some(id) = request_id {
                let reply = error_response(
                    Some(&id),
                    codes::INTERNAL_ERROR,
                    "no session is attached to answer this request",
                    None,
                );
                let _ = self.to_server.send(reply).await;
            }
            return;
        }
        for (session, message) in deliveries {
            let frame = LineFrame::Line(Bytes::from(message.to_string()));
            if session.send(Ok(frame)).await.is_err() {
                tracing::debug!("a session left before its message was delivered");
            }
        }
    }

    /// Passes what one session sends on to the server, rewritten.
    async fn send_up(&self, member: MemberId, frame: Bytes) {
        let Ok(value) = serde_json::from_slice::<Value>(&frame) else {
            let _ = self.to_server.send(frame).await;
            return;
        };
        let (forward, answers) = {
            let mut state = self.state();
            let routes = &mut state.routes;
            match value {
                Value::Array(items) => {
                    let mut forward = Vec::new();
                    let mut answers = Vec::new();
                    for item in items {
                        match routes.up(member, item) {
                            Up::Forward(message) => forward.push(message),
                            Up::Answer(message) => answers.push(message),
                            Up::Hold => {}
                        }
                    }
                    let forward = (!forward.is_empty()).then(|| Value::Array(forward));
                    (forward, answers)
                }
                single => match routes.up(member, single) {
                    Up::Forward(message) => (Some(message), Vec::new()),
                    Up::Answer(message) => (None, vec![message]),
                    Up::Hold => (None, Vec::new()),
                },
            }
        };
        if let Some(message) = forward {
            if self
                .to_server
                .send(Bytes::from(message.to_string()))
                .await
                .is_err()
            {
                tracing::debug!(route = %self.route, "the shared server is gone");
            }
        }
        let session = self.state().sessions.get(&member).cloned();
        if let Some(session) = session {
            for answer in answers {
                let frame = LineFrame::Line(Bytes::from(answer.to_string()));
                let _ = session.send(Ok(frame)).await;
            }
        }
    }
}

/// Reads the child until it closes its output, then records how it ended
/// and ends every session's stream of frames.
async fn read_server(child: Arc<SharedChild>, mut reader: FramedRead<ChildStdout, LineCodec>) {
    while let Some(item) = reader.next().await {
        match item.map(LineFrame::into_bytes) {
            Ok(Some(bytes)) => match serde_json::from_slice::<Value>(&bytes) {
                Ok(Value::Array(items)) => {
                    for item in items {
                        child.deliver_down(item).await;
                    }
                }
                Ok(message) => child.deliver_down(message).await,
                Err(err) => {
                    tracing::warn!(%err, route = %child.route, "the shared server sent a line that is not JSON; dropped")
                }
            },
            Ok(None) => {
                tracing::warn!(route = %child.route, "the shared server sent an oversized message; dropped")
            }
            Err(err) => {
                tracing::warn!(%err, route = %child.route, "reading the shared server failed");
                break;
            }
        }
    }
    let exit = child.process.lock().await.wait().await;
    child.exit.send_replace(Some(exit));
    child.state().sessions.clear();
}

/// Passes one session's frames to the child until the session closes its writer.
async fn uplink(
    child: Arc<SharedChild>,
    member: MemberId,
    mut from_session: FrameReceiver,
) -> std::io::Result<()> {
    while let Some(frame) = from_session.recv().await {
        child.send_up(member, frame).await;
    }
    Ok(())
}

/// One session's hold on the shared child.
struct Membership {
    child: Arc<SharedChild>,
    member: MemberId,
    slots: Slots,
}

impl Membership {
    /// Detaches the session; the last one out shuts the child down.
    async fn leave(&mut self) -> UpstreamExit {
        let (abandoned, last) = {
            let mut slots = lock(&self.slots);
            let mut state = self.child.state();
            let abandoned = state.routes.leave(self.member);
            state.sessions.remove(&self.member);
            let last = state.routes.members() == 0;
            if last {
                state.closing = true;
                if slots
                    .get(&self.child.route)
                    .is_some_and(|child| Arc::ptr_eq(child, &self.child))
                {
                    slots.remove(&self.child.route);
                }
            }
            (abandoned, last)
        };
        for upstream_id in abandoned {
            let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": upstream_id, "reason": "the session ended"}});
            let _ = self
                .child
                .to_server
                .send(Bytes::from(cancel.to_string()))
                .await;
        }
        if !last {
            return UpstreamExit::Closed("the session left the shared server".into());
        }
        self.child.to_server.close();
        let exit = self.child.process.lock().await.shutdown().await;
        UpstreamExit::Child(exit)
    }

    async fn exited(&self) -> UpstreamExit {
        let mut exit = self.child.exit.subscribe();
        let ended = match exit.wait_for(Option::is_some).await {
            Ok(ended) => ended.clone(),
            Err(_) => None,
        };
        match ended {
            Some(ended) => UpstreamExit::Child(ended),
            None => UpstreamExit::Closed("the shared server is gone".into()),
        }
    }
}

impl UpstreamControl for Membership {
    fn wait(&mut self) -> BoxFuture<'_, UpstreamExit> {
        self.exited().boxed()
    }

    fn shutdown(&mut self) -> BoxFuture<'_, UpstreamExit> {
        self.leave().boxed()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
