//! The per-direction pump: read frames from one side, decide them
//! concurrently, and release them to the other side in the order they
//! arrived.
//!
//! Each message's decision runs at once (inline when it completes without
//! waiting, otherwise in its own task), and messages are released strictly
//! in arrival order ([`super::release`]), so a notification never
//! overtakes the request it follows. A message held for an approver gives
//! up its slot ([`Outcome::Detached`]) and is written directly once
//! resolved, so one pending approval does not stall the rest.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::{FutureExt, Stream, StreamExt};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::decide::{self, MessageContext};
use super::delivery::{Delivery, Outcome};
use super::frame;
use super::intake::{FrameIntake, SharedIntake};
use super::release::{self, ReleaseQueue};
use super::{inventory, lifecycle};
use crate::enforce::Action;
use crate::guardian::Decision;
use crate::jsonrpc::{
    codes, error_response, peek_frame_within, Frame, Message, MessageKind, PeekError,
};
use crate::metrics::METRICS;
use crate::session::{Direction, Session};
use crate::telemetry::Carrier;
use crate::transport::LineFrame;

/// Reads `frames` from the peer sending in `direction` until it closes,
/// and relays them. Returns once everything read has been released.
pub async fn run<S>(session: Arc<Session>, direction: Direction, mut frames: S)
where
    S: Stream<Item = std::io::Result<LineFrame>> + Unpin,
{
    let mut intake = intake(session, direction);
    loop {
        let item = match frames.next().now_or_never() {
            Some(item) => item,
            None => {
                intake.idle();
                frames.next().await
            }
        };
        let Some(item) = item else { break };
        if !intake.take(item).await {
            break;
        }
    }
    intake.finish().await;
}

/// Like [`run`], with the intake in `shared`, so the task that sends the
/// frames may also take one itself ([`SharedIntake::take_now`]) when
/// nothing is ahead of it, instead of waking this one.
///
/// The intake keeps the memory of its last decision while the session
/// lives: the frames it takes in the sender's task are not seen here, so
/// this loop cannot tell when the session is idle.
pub async fn run_shared<S>(
    session: Arc<Session>,
    direction: Direction,
    mut frames: S,
    shared: Arc<SharedIntake>,
) where
    S: Stream<Item = std::io::Result<LineFrame>> + Unpin,
{
    shared.open(Box::new(intake(session, direction))).await;
    while let Some(item) = frames.next().await {
        if !shared.take_queued(item).await {
            break;
        }
    }
    // What is sent from now on fails to send, rather than waiting unread.
    drop(frames);
    if let Some(intake) = shared.close().await {
        intake.finish().await;
    }
}

/// One direction's intake: each frame read is peeked and its decision
/// started; a message decided at once while nothing waits for release is
/// handed to its writers here, any other queued for the releaser, which
/// writes them in the order they were taken.
struct Intake<D: Decider> {
    session: Arc<Session>,
    direction: Direction,
    release: ReleaseQueue,
    releaser: JoinHandle<()>,
    /// A completed decision's allocation, ready for the next: a
    /// decision's future is several kilobytes, and allocating one per
    /// message (from the allocator's slow path for blocks that size) cost
    /// more than most of what it decides.
    spare: Option<Pin<Box<D::Future>>>,
    /// [`decide`]: called directly, not through a pointer, so a new
    /// decision's future is built where it is stored (see [`Decider`]).
    decide: D,
}

/// What starts a frame's decision: [`decide`], through a type that names
/// its future, which an `async fn`'s own type cannot.
///
/// A decision's future is several kilobytes, of which a new one fills a
/// few hundred bytes. Called through a function pointer it was built on
/// the stack and copied whole into its box, twice for a new box; called
/// directly the compiler stores only the bytes it fills.
trait Decider {
    /// The future of one decision.
    type Future: Future<Output = ()> + Send + 'static;

    /// Starts deciding `undecided`.
    fn start(&self, undecided: Undecided) -> Self::Future;
}

impl<D, F> Decider for D
where
    D: Fn(Undecided) -> F,
    F: Future<Output = ()> + Send + 'static,
{
    type Future = F;

    fn start(&self, undecided: Undecided) -> F {
        self(undecided)
    }
}

/// The intake of `session`'s `direction`, with its releaser running.
fn intake(session: Arc<Session>, direction: Direction) -> Intake<impl Decider> {
    let (release, releaser) = ReleaseQueue::start(
        session.config.limits.max_in_flight,
        session.writers.clone(),
        direction,
    );
    Intake {
        session,
        direction,
        release,
        releaser,
        spare: None,
        decide,
    }
}

impl<D: Decider> Intake<D> {
    /// Takes one frame read from the peer; `false` once the pump should
    /// stop (the peer failed, or the release queue is gone).
    async fn take(&mut self, item: std::io::Result<LineFrame>) -> bool {
        let max_depth = self.session.config.limits.max_json_depth;
        let (frame, carrier) = match item {
            Ok(LineFrame::Line(bytes)) => (peek_frame_within(bytes, max_depth), None),
            Ok(LineFrame::Traced { line, carrier }) => {
                (peek_frame_within(line, max_depth), Some(*carrier))
            }
            Ok(LineFrame::Peeked(message)) => (Ok(Frame::Single(*message)), None),
            Ok(LineFrame::TooLong) => {
                Box::pin(refuse_oversized(
                    &self.session,
                    self.direction,
                    &self.release,
                ))
                .await;
                return true;
            }
            Err(err) => {
                let direction = self.direction.as_str();
                tracing::warn!(%err, direction, "reading from the peer failed");
                return false;
            }
        };
        self.relay(frame, carrier).await
    }

    /// Takes a request its sender already peeked without waiting, when
    /// nothing would make it wait here: the session has started and the
    /// release queue has room. Gives it back otherwise, to be taken in
    /// order by [`Intake::take`].
    fn take_request_now(&mut self, message: Message) -> Result<(), Message> {
        if message.kind != MessageKind::Request || !lifecycle::started(&self.session) {
            return Err(message);
        }
        if !self.release.has_room() {
            return Err(message);
        }
        let slot = self.start_deciding(Frame::Single(message), None);
        // Only this intake queues, so the room seen above is still there.
        if let Some(slot) = self.hand_on_now(slot) {
            self.release.try_queue(slot);
        }
        Ok(())
    }

    /// Handles one peeked frame; `false` when the release queue is gone.
    ///
    /// What runs once per session or for bad input only (the session
    /// start, the inventory snapshot, a refusal) is boxed: this future is
    /// part of every session's pump, idle ones too, and would otherwise be
    /// as large as the largest of them.
    async fn relay(&mut self, peeked: Result<Frame, PeekError>, carrier: Option<Carrier>) -> bool {
        let (session, direction) = (&self.session, self.direction);
        let frame = match peeked {
            Ok(frame) => frame,
            Err(err) => {
                return Box::pin(refuse_malformed(session, direction, err, &self.release)).await
            }
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
        let slot = self.start_deciding(frame, carrier);
        if let Some(slot) = self.hand_on_now(slot) {
            if !self.release.queue(slot).await {
                return false;
            }
        }
        if initialized && self.session.config.hooks.inventory {
            if !self.release.barrier().await {
                return false;
            }
            Box::pin(inventory::take_snapshot(&self.session)).await;
        }
        true
    }

    /// Starts deciding a frame: inline while it does not need to wait, in
    /// its own task as soon as it does. Its deliveries arrive on the slot
    /// returned.
    fn start_deciding(
        &mut self,
        frame: Frame,
        carrier: Option<Carrier>,
    ) -> oneshot::Receiver<Outcome> {
        let (slot, rx) = oneshot::channel();
        let undecided = Undecided {
            session: self.session.clone(),
            direction: self.direction,
            frame,
            carrier,
            slot,
        };
        // Built inside the call that stores it (`set`, `Box::write`). Built
        // in a local first, or handed to `Box::pin`, it is copied whole.
        let mut decision = match self.spare.take() {
            Some(mut completed) => {
                completed.as_mut().set(self.decide.start(undecided));
                completed
            }
            None => Box::into_pin(Box::write(Box::new_uninit(), self.decide.start(undecided))),
        };
        let waker = futures_util::task::noop_waker();
        if decision.as_mut().poll(&mut Context::from_waker(&waker)) == Poll::Pending {
            tokio::spawn(decision);
        } else {
            self.spare = Some(decision);
        }
        rx
    }

    /// Hands a decision that completed at once to its writers, when
    /// everything taken before it has been written; returns what must
    /// still go through the release queue (the slot itself, or what of its
    /// deliveries would have had to wait). Only what needs no waiting is
    /// handed on here: waiting on a writer would make the intake's future,
    /// which every idle session's pump holds, as large as the write's.
    fn hand_on_now(
        &self,
        mut slot: oneshot::Receiver<Outcome>,
    ) -> Option<oneshot::Receiver<Outcome>> {
        if !self.release.is_drained() {
            return Some(slot);
        }
        match slot.try_recv() {
            Ok(Outcome::Deliver(deliveries)) => {
                let rest = release::write_now(&self.session.writers, self.direction, deliveries);
                (!rest.is_empty()).then(|| release::known(rest))
            }
            Ok(Outcome::Detached) => None,
            Err(_) => Some(slot),
        }
    }

    /// The peer is idle: an idle session keeps no decision's memory.
    fn idle(&mut self) {
        self.spare = None;
    }

    /// Returns once everything taken has been released.
    async fn finish(self) {
        drop(self.release);
        if let Err(err) = self.releaser.await {
            tracing::error!(%err, "the release task failed");
        }
    }
}

impl<D: Decider + Send + 'static> FrameIntake for Intake<D> {
    fn take(&mut self, item: std::io::Result<LineFrame>) -> BoxFuture<'_, bool> {
        Intake::take(self, item).boxed()
    }

    fn take_request_now(&mut self, message: Message) -> Result<(), Message> {
        Intake::take_request_now(self, message)
    }

    fn finish(self: Box<Self>) -> BoxFuture<'static, ()> {
        Intake::finish(*self).boxed()
    }
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
        None => release::write(&writers, direction, deliveries).await,
    }
}

/// Answers a frame that is not a usable JSON-RPC message (-32700 / -32600)
/// when it came from the client, and records it either way; the session
/// goes on.
async fn refuse_malformed(
    session: &Arc<Session>,
    direction: Direction,
    err: PeekError,
    release: &ReleaseQueue,
) -> bool {
    let (code, id) = match &err {
        PeekError::Parse(_) => (codes::PARSE_ERROR, None),
        PeekError::Invalid { id, .. } => (codes::INVALID_REQUEST, id.clone()),
    };
    let reply = error_response(id.as_ref(), code, &err.to_string(), None);
    record_refusal(session, direction, err.to_string()).await;
    refuse(direction, reply, release).await
}

async fn refuse_oversized(session: &Arc<Session>, direction: Direction, release: &ReleaseQueue) {
    let limit = session.config.limits.max_message_bytes;
    let message = format!("message exceeds the {limit}-byte limit and was discarded");
    let reply = error_response(None, codes::INVALID_REQUEST, &message, None);
    record_refusal(session, direction, message).await;
    refuse(direction, reply, release).await;
}

/// Queues an error reply to the client. A server that sends garbage is not
/// answered (it asked nothing); the event is only recorded.
async fn refuse(direction: Direction, reply: Bytes, release: &ReleaseQueue) -> bool {
    if direction != Direction::ClientToServer {
        return true;
    }
    release.queue_deliveries(vec![Delivery::Reply(reply)]).await
}

async fn record_refusal(session: &Session, direction: Direction, detail: String) {
    if direction == Direction::ServerToClient {
        tracing::warn!(%detail, "skipped a line from the upstream server");
        METRICS
            .upstream_errors_total
            .with_label_values(&[session.upstream.as_str(), "malformed"])
            .inc();
    }
    let context = MessageContext::new(direction, "", None);
    let decision = Decision::deny("malformed input refused by the proxy", None);
    let step = uuid::Uuid::new_v4().to_string();
    let _ = decide::record_event(session, step, &decision, &context, Action::Dropped, detail).await;
}
