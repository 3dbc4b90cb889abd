//! Where the relay's frames to one Streamable HTTP session's agent go.
//!
//! The session's routing state is shared by two writers of it: the
//! session's routing task, which reads what the relay queued for the agent
//! and routes it, and the relay's writer itself, which routes an answer in
//! the task that wrote it. The relay knows which request an answer
//! answers, so the answer needs no peek and no hand-off to the routing task
//! to reach the POST that asked. It never overtakes a frame written before
//! it: while anything is still queued for the routing task, answers are
//! queued behind it.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use futures_util::FutureExt;

use super::routing::{Dispatch, ReplayLimits, Routes};
use crate::jsonrpc::RequestId;
use crate::transport::writer::{Backlog, BacklogEntry, Divert, Diverted};

/// How long a live connection may refuse events before it is dropped (its
/// events stay kept, so the client can resume).
const SEND_STALL: Duration = Duration::from_secs(30);

/// What a session keeps for resumption.
const REPLAY_LIMITS: ReplayLimits = ReplayLimits {
    events: 256,
    bytes: 4 * 1024 * 1024,
    finished_streams: 32,
    channel: 64,
};

/// One session's routing state, and the relay's frames still queued for
/// its routing task.
pub(crate) struct Outgoing {
    routes: Mutex<Routes>,
    /// Frames queued for the routing task and not yet handed on by it.
    queued: Backlog,
}

impl Outgoing {
    /// A session's routing state, nothing routed yet.
    pub(crate) fn new() -> Self {
        Self {
            routes: Mutex::new(Routes::new(REPLAY_LIMITS)),
            queued: Backlog::default(),
        }
    }

    /// The routing state (never held across an await).
    pub(crate) fn routes(&self) -> MutexGuard<'_, Routes> {
        self.routes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The routing task's count of a frame it read off the queue, until
    /// it has handed it on.
    pub(crate) fn entry(&self) -> BacklogEntry {
        self.queued.entry()
    }
}

impl Divert for Outgoing {
    fn divert(&self, frame: Bytes) -> Result<Diverted<'_>, Bytes> {
        self.queued.let_through(frame)
    }

    fn divert_answer(&self, frame: Bytes, id: &RequestId) -> Result<Diverted<'_>, Bytes> {
        self.queued
            .unless_behind(frame, |frame| Ok(self.route_answer(frame, id)))
    }
}

impl Outgoing {
    /// Routes the answer to `id` to its POST now, handing on what can be
    /// without waiting.
    fn route_answer(&self, frame: Bytes, id: &RequestId) -> Diverted<'_> {
        let mut dispatches = Vec::new();
        self.routes().route_answer(frame, id, &mut dispatches);
        let waiting: Vec<Dispatch> = dispatches.into_iter().filter_map(try_execute).collect();
        if waiting.is_empty() {
            return Diverted::Delivered;
        }
        let delivery = async move {
            for dispatch in waiting {
                execute(dispatch).await;
            }
        };
        Diverted::Pending(delivery.boxed())
    }
}

/// Performs a routing hand-off.
pub(crate) async fn execute(dispatch: Dispatch) {
    match dispatch {
        Dispatch::Live { tx, kick, event } => {
            match tokio::time::timeout(SEND_STALL, tx.send(event)).await {
                Ok(_) => {}
                Err(_) => {
                    tracing::warn!("an SSE client stopped reading; its connection is dropped");
                    kick.cancel();
                }
            }
        }
        Dispatch::Json { tx, body } => {
            let _ = tx.send(body);
        }
    }
}

/// Performs a hand-off that needs no waiting; gives back one whose
/// connection has no room for its event yet.
fn try_execute(dispatch: Dispatch) -> Option<Dispatch> {
    match dispatch {
        Dispatch::Json { tx, body } => {
            let _ = tx.send(body);
            None
        }
        Dispatch::Live { tx, kick, event } => match tx.try_send(event) {
            Ok(()) | Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) => None,
            Err(tokio::sync::mpsc::error::TrySendError::Full(event)) => {
                Some(Dispatch::Live { tx, kick, event })
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::super::routing::{Mode, Opened, PostedRequest};
    use super::*;

    fn post(outgoing: &Outgoing, id: &str, mode: Mode) -> Opened {
        let request = PostedRequest {
            id: RequestId::from_json(id),
            progress_token: None,
        };
        let opened = outgoing.routes().open_post(&[request], mode, false, false);
        opened.expect("the session is open")
    }

    fn answer(id: &str) -> Bytes {
        Bytes::from(format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#))
    }

    #[test]
    fn an_answer_reaches_its_post_from_the_writing_task() {
        let outgoing = Outgoing::new();
        let Opened::Json { mut reply, .. } = post(&outgoing, "1", Mode::Json) else {
            panic!("a JSON POST was opened as a stream");
        };
        let diverted = outgoing.divert_answer(answer("1"), &RequestId::from_json("1"));
        assert!(matches!(diverted, Ok(Diverted::Delivered)));
        assert_eq!(reply.try_recv().ok(), Some(answer("1")));

        let Opened::Sse(mut attachment) = post(&outgoing, "2", Mode::Sse) else {
            panic!("an SSE POST was answered as JSON");
        };
        let diverted = outgoing.divert_answer(answer("2"), &RequestId::from_json("2"));
        assert!(matches!(diverted, Ok(Diverted::Delivered)));
        let live = attachment.live.as_mut().expect("the stream is live");
        let event = live.try_recv().expect("the answer was sent");
        assert_eq!(event.data, answer("2"));
    }

    #[test]
    fn an_answer_waits_behind_what_is_queued_for_the_routing_task() {
        let outgoing = Outgoing::new();
        post(&outgoing, "3", Mode::Json);
        let progress = Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/message"}"#);
        assert_eq!(outgoing.divert(progress.clone()).err(), Some(progress));
        let id = RequestId::from_json("3");
        assert_eq!(
            outgoing.divert_answer(answer("3"), &id).err(),
            Some(answer("3"))
        );
        drop((outgoing.entry(), outgoing.entry()));
        // A frame queued through a permit was never counted.
        drop(outgoing.entry());
        assert!(outgoing.queued.is_clear());
        assert!(outgoing.routes().is_pending(&id));
    }
}
