//! The per-direction pump: read frames from one side, decide them
//! concurrently, and release them to the other side in the order they
//! arrived.
//!
//! Each message gets a slot in an ordered queue. Its decision runs at once
//! (inline when it completes without waiting, otherwise in its own task),
//! and the releaser writes slots strictly in arrival order, so a
//! notification never overtakes the request it follows. A message held
//! for an approver gives up its slot ([`Outcome::Detached`]) and is written
//! directly once resolved, so one pending approval does not stall the rest.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::{FutureExt, Stream, StreamExt};
use tokio::sync::{mpsc, oneshot};

use super::decide::{self, MessageContext};
use super::delivery::{Delivery, Outcome};
use super::frame;
use super::{inventory, lifecycle};
use crate::enforce::Action;
use crate::guardian::Decision;
use crate::jsonrpc::{codes, error_response, peek_frame_within, Frame, MessageKind, PeekError};
use crate::metrics::METRICS;
use crate::session::{Direction, Session, Writers};
use crate::telemetry::Carrier;
use crate::transport::LineFrame;

/// An entry of the ordered release queue.
enum Queued {
    /// A message being decided.
    Slot(oneshot::Receiver<Outcome>),
    /// Signalled once everything queued before it has been written.
    Barrier(oneshot::Sender<()>),
}

/// Reads `frames` from the peer sending in `direction` until it closes,
/// and relays them. Returns once everything read has been released.
pub async fn run<S>(session: Arc<Session>, direction: Direction, mut frames: S)
where
    S: Stream<Item = std::io::Result<LineFrame>> + Unpin,
{
    let (queue, pending) = mpsc::channel(session.config.limits.max_in_flight);
    let releaser = tokio::spawn(release(pending, session.writers.clone(), direction));
    let mut spare = None;
    loop {
        let item = match frames.next().now_or_never() {
            Some(item) => item,
            None => {
                // Idle: an idle session keeps no decision's memory.
                spare = None;
                frames.next().await
            }
        };
        let Some(item) = item else { break };
        let max_depth = session.config.limits.max_json_depth;
        let (frame, carrier) = match item {
            Ok(LineFrame::Line(bytes)) => (peek_frame_within(bytes, max_depth), None),
            Ok(LineFrame::Traced { line, carrier }) => {
                (peek_frame_within(line, max_depth), Some(*carrier))
            }
            Ok(LineFrame::Peeked(message)) => (Ok(Frame::Single(*message)), None),
            Ok(LineFrame::TooLong) => {
                Box::pin(refuse_oversized(&session, direction, &queue)).await;
                continue;
            }
            Err(err) => {
                tracing::warn!(%err, direction = direction.as_str(), "reading from the peer failed");
                break;
            }
        };
        let decider = Decider {
            spare: &mut spare,
            decide,
        };
        if !relay_frame(&session, direction, frame, carrier, &queue, decider).await {
            break;
        }
    }
    drop(queue);
    if let Err(err) = releaser.await {
        tracing::error!(%err, "the release task failed");
    }
}

/// Handles one peeked frame; `false` when the release queue is gone.
///
/// What runs once per session or for bad input only (the session start,
/// the inventory snapshot, a refusal) is boxed: this future is part of
/// every session's pump, idle ones too, and would otherwise be as large as
/// the largest of them.
async fn relay_frame<F>(
    session: &Arc<Session>,
    direction: Direction,
    peeked: Result<Frame, PeekError>,
    carrier: Option<Carrier>,
    queue: &mpsc::Sender<Queued>,
    decider: Decider<'_, F>,
) -> bool
where
    F: Future<Output = ()> + Send + 'static,
{
    let frame = match peeked {
        Ok(frame) => frame,
        Err(err) => return Box::pin(refuse_malformed(session, direction, err, queue)).await,
    };
    if direction == Direction::ClientToServer {
        lifecycle::start_once(session, &frame).await;
    }
    if let Frame::Single(message) = &frame {
        if message.kind == MessageKind::Response {
            if let Some(id) = &message.id {
                let ours = session.proxy_requests_to_sender(direction);
                if ours.complete(id, message.bytes.clone()) {
                    return true;
                }
            }
        }
    }
    let initialized = direction == Direction::ClientToServer
        && matches!(&frame, Frame::Single(m) if m.method() == "notifications/initialized");
    let (slot, rx) = oneshot::channel();
    decider.start(Undecided {
        session: session.clone(),
        direction,
        frame,
        carrier,
        slot,
    });
    if queue.send(Queued::Slot(rx)).await.is_err() {
        return false;
    }
    if initialized && session.config.hooks.inventory {
        if !barrier(queue).await {
            return false;
        }
        Box::pin(inventory::take_snapshot(session)).await;
    }
    true
}

/// A frame to decide, with what its decision needs.
struct Undecided {
    session: Arc<Session>,
    direction: Direction,
    frame: Frame,
    carrier: Option<Carrier>,
    /// Where the deliveries go, in arrival order.
    slot: oneshot::Sender<Outcome>,
}

/// Decides one frame and hands its deliveries to its slot, or writes them
/// itself once the slot was given up (a held message).
async fn decide(undecided: Undecided) {
    let Undecided {
        session,
        direction,
        frame,
        carrier,
        slot,
    } = undecided;
    let mut slot = Some(slot);
    let writers = session.writers.clone();
    let deliveries =
        frame::handle_frame(session, direction, frame, carrier.as_ref(), &mut slot).await;
    match slot {
        Some(slot) => {
            let _ = slot.send(Outcome::Deliver(deliveries));
        }
        None => write(&writers, direction, deliveries).await,
    }
}

/// Starts decisions, reusing the memory of the last one that completed
/// while messages keep coming: a decision's future is several kilobytes,
/// and allocating one per message (from the allocator's slow path for
/// blocks that size) cost more than most of what it decides.
struct Decider<'a, F> {
    /// A completed decision's allocation, ready for the next.
    spare: &'a mut Option<Pin<Box<F>>>,
    /// [`decide`], as a function pointer, so `F` names its future.
    decide: fn(Undecided) -> F,
}

impl<F> Decider<'_, F>
where
    F: Future<Output = ()> + Send + 'static,
{
    /// Starts deciding a frame: inline while it does not need to wait, in
    /// its own task as soon as it does.
    fn start(self, undecided: Undecided) {
        let future = (self.decide)(undecided);
        let mut decision = match self.spare.take() {
            Some(mut completed) => {
                completed.as_mut().set(future);
                completed
            }
            None => Box::pin(future),
        };
        let waker = futures_util::task::noop_waker();
        if decision.as_mut().poll(&mut Context::from_waker(&waker)) == Poll::Pending {
            tokio::spawn(decision);
        } else {
            *self.spare = Some(decision);
        }
    }
}

/// Waits until everything queued so far has been written.
async fn barrier(queue: &mpsc::Sender<Queued>) -> bool {
    let (tx, rx) = oneshot::channel();
    if queue.send(Queued::Barrier(tx)).await.is_err() {
        return false;
    }
    rx.await.is_ok()
}

/// Writes slots in arrival order.
async fn release(mut queue: mpsc::Receiver<Queued>, writers: Writers, direction: Direction) {
    while let Some(queued) = queue.recv().await {
        match queued {
            Queued::Slot(slot) => {
                if let Ok(Outcome::Deliver(deliveries)) = slot.await {
                    write(&writers, direction, deliveries).await;
                }
            }
            Queued::Barrier(done) => {
                let _ = done.send(());
            }
        }
    }
}

async fn write(writers: &Writers, direction: Direction, deliveries: Vec<Delivery>) {
    for delivery in deliveries {
        let sent = match delivery {
            Delivery::Forward(bytes) => writers.toward(direction).send(bytes).await,
            Delivery::Answer(bytes, id) => writers.toward(direction).send_answer(bytes, &id).await,
            Delivery::Reply(bytes) => writers.toward(direction.reverse()).send(bytes).await,
        };
        if sent.is_err() {
            tracing::debug!(
                direction = direction.as_str(),
                "dropped a frame for a closed peer"
            );
        }
    }
}

/// Answers a frame that is not a usable JSON-RPC message (-32700 / -32600)
/// when it came from the client, and records it either way; the session
/// goes on.
async fn refuse_malformed(
    session: &Arc<Session>,
    direction: Direction,
    err: PeekError,
    queue: &mpsc::Sender<Queued>,
) -> bool {
    let (code, id) = match &err {
        PeekError::Parse(_) => (codes::PARSE_ERROR, None),
        PeekError::Invalid { id, .. } => (codes::INVALID_REQUEST, id.clone()),
    };
    let reply = error_response(id.as_ref(), code, &err.to_string(), None);
    record_refusal(session, direction, err.to_string()).await;
    refuse(direction, reply, queue).await
}

async fn refuse_oversized(
    session: &Arc<Session>,
    direction: Direction,
    queue: &mpsc::Sender<Queued>,
) {
    let limit = session.config.limits.max_message_bytes;
    let message = format!("message exceeds the {limit}-byte limit and was discarded");
    let reply = error_response(None, codes::INVALID_REQUEST, &message, None);
    record_refusal(session, direction, message).await;
    refuse(direction, reply, queue).await;
}

/// Queues an error reply to the client. A server that sends garbage is not
/// answered (it asked nothing); the event is only recorded.
async fn refuse(direction: Direction, reply: Bytes, queue: &mpsc::Sender<Queued>) -> bool {
    if direction != Direction::ClientToServer {
        return true;
    }
    let (tx, rx) = oneshot::channel();
    let _ = tx.send(Outcome::Deliver(vec![Delivery::Reply(reply)]));
    queue.send(Queued::Slot(rx)).await.is_ok()
}

async fn record_refusal(session: &Session, direction: Direction, detail: String) {
    if direction == Direction::ServerToClient {
        tracing::warn!(%detail, "skipped a line from the upstream server");
        METRICS
            .upstream_errors_total
            .with_label_values(&[session.upstream.as_str(), "malformed"])
            .inc();
    }
    let context = MessageContext {
        direction,
        mcp_method: String::new(),
        mcp_id: None,
    };
    let decision = Decision::deny("malformed input refused by the proxy", None);
    let step = uuid::Uuid::new_v4().to_string();
    let _ = decide::record_event(session, step, &decision, &context, Action::Dropped, detail).await;
}
