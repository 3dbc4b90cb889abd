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
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
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
    while let Some(item) = frames.next().await {
        let max_depth = session.config.limits.max_json_depth;
        let (frame, carrier) = match item {
            Ok(LineFrame::Line(bytes)) => (peek_frame_within(bytes, max_depth), None),
            Ok(LineFrame::Traced { line, carrier }) => {
                (peek_frame_within(line, max_depth), Some(carrier))
            }
            Ok(LineFrame::Peeked(message)) => (Ok(Frame::Single(message)), None),
            Ok(LineFrame::TooLong) => {
                refuse_oversized(&session, direction, &queue).await;
                continue;
            }
            Err(err) => {
                tracing::warn!(%err, direction = direction.as_str(), "reading from the peer failed");
                break;
            }
        };
        if !relay_frame(&session, direction, frame, carrier, &queue).await {
            break;
        }
    }
    drop(queue);
    if let Err(err) = releaser.await {
        tracing::error!(%err, "the release task failed");
    }
}

/// Handles one peeked frame; `false` when the release queue is gone.
async fn relay_frame(
    session: &Arc<Session>,
    direction: Direction,
    peeked: Result<Frame, PeekError>,
    carrier: Option<Carrier>,
    queue: &mpsc::Sender<Queued>,
) -> bool {
    let frame = match peeked {
        Ok(frame) => frame,
        Err(err) => return refuse_malformed(session, direction, err, queue).await,
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
    if queue
        .send(Queued::Slot(start(
            session.clone(),
            direction,
            frame,
            carrier,
        )))
        .await
        .is_err()
    {
        return false;
    }
    if initialized && session.config.hooks.inventory {
        if !barrier(queue).await {
            return false;
        }
        inventory::take_snapshot(session).await;
    }
    true
}

/// Starts deciding a frame: inline while it does not need to wait, in its
/// own task as soon as it does.
fn start(
    session: Arc<Session>,
    direction: Direction,
    frame: Frame,
    carrier: Option<Carrier>,
) -> oneshot::Receiver<Outcome> {
    let (tx, rx) = oneshot::channel();
    let mut decision = Box::pin(async move {
        let mut slot = Some(tx);
        let writers = session.writers.clone();
        let deliveries =
            frame::handle_frame(session, direction, frame, carrier.as_ref(), &mut slot).await;
        match slot {
            Some(slot) => {
                let _ = slot.send(Outcome::Deliver(deliveries));
            }
            None => write(&writers, direction, deliveries).await,
        }
    });
    let waker = futures_util::task::noop_waker();
    if decision.as_mut().poll(&mut Context::from_waker(&waker)) == Poll::Pending {
        tokio::spawn(decision);
    }
    rx
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
        let (writer, bytes) = match delivery {
            Delivery::Forward(bytes) => (writers.toward(direction), bytes),
            Delivery::Reply(bytes) => (writers.toward(direction.reverse()), bytes),
        };
        if writer.send(bytes).await.is_err() {
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
