//! One upstream of a virtual server: a relay session of its own (hooks,
//! Guardian, enforcement and audit exactly as for a plain route), whose
//! agent side is a pair of in-memory channels the router drives.
//!
//! A routed call goes in its own bytes, under the agent's id where the
//! upstream will write that id back unchanged (see
//! [`pending`](super::pending)), and its answer straight back to the agent
//! (see [`splice`](super::splice) and [`answers`](super::answers)); other
//! requests are JSON values whose answers come back to a waiting router
//! task. Everything else the upstream sends (its requests and
//! notifications) goes to the router as [`LegEvent`]s.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::stream::{self, StreamExt};
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::answers::Answers;
use super::context::AggregateContext;
use super::names::Target;
use super::pending::Answer;
use super::splice::{self, NamedCall};
use crate::config::UpstreamConfig;
use crate::hooks::{Identity, VirtualRoute};
use crate::jsonrpc::{Message, MessageKind, RequestId};
use crate::metrics::METRICS;
use crate::relay::intake::SharedIntake;
use crate::relay::run::{run_session, SessionContext, SessionExit};
use crate::transport::downstream::Downstream;
use crate::transport::writer::{BacklogEntry, Diverted, FrameReceiver, FrameWriter};
use crate::transport::LineFrame;

/// What a leg's upstream sent that is not an answer to the router.
#[derive(Debug)]
pub(super) enum LegEvent {
    /// A request or notification from the upstream (index of the leg),
    /// counted as ahead of the leg's answers until the router has handled
    /// it.
    Message(usize, Value, BacklogEntry),
    /// An answer to a routed call that was held behind the leg's earlier
    /// messages, to be written to the agent after them.
    Answer(Bytes, BacklogEntry),
    /// The leg's session ended: its upstream is gone.
    Closed(usize),
}

/// The leg is no longer there to send to.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the upstream is no longer available")]
pub(super) struct LegGone;

/// One upstream behind the virtual server.
pub(super) struct Leg {
    /// The `[[upstream]]` name: the prefix, and the route its audit names.
    pub(super) name: String,
    /// Its place in the aggregate's `upstreams`.
    pub(super) index: usize,
    to_leg: LegInput,
    answers: Arc<Answers>,
    gone: CancellationToken,
    session: Mutex<Option<JoinHandle<SessionExit>>>,
    /// The names the agent knows this upstream's tools by, for its hooks.
    pub(super) route: Arc<VirtualRoute>,
}

/// How the agent's side looks to every leg of one session.
pub(super) struct AgentSide {
    /// `stdio`, `http`, `ws` or `sse`.
    pub(super) transport: &'static str,
    /// Who the listener authenticated.
    pub(super) identity: Option<Arc<Identity>>,
    /// The agent's network address; `None` over stdio.
    pub(super) client_address: Option<String>,
    /// Headers that go on to a network upstream unchanged.
    pub(super) upstream_headers: Vec<(String, String)>,
    /// Frames to the agent, where routed calls are answered.
    pub(super) client: FrameWriter,
}

impl Leg {
    /// Connects the upstream and starts its relay session; its messages
    /// arrive on `events` until it ends. A `returning` upstream (started
    /// again during the session) reports its own inventory to the Guardian.
    pub(super) async fn open(
        index: usize,
        mut upstream_config: UpstreamConfig,
        context: &AggregateContext,
        agent: &AgentSide,
        events: mpsc::UnboundedSender<LegEvent>,
        stop: CancellationToken,
        returning: bool,
    ) -> Result<Arc<Leg>, String> {
        upstream_config
            .headers
            .extend(agent.upstream_headers.iter().cloned());
        let upstream = context.connector.connect(&upstream_config).await;
        METRICS.upstream_started(&upstream_config.name, upstream.is_ok());
        let upstream = upstream.map_err(|err| err.to_string())?;
        let queue = context.config.limits.max_in_flight.max(1);
        let answers = Arc::new(Answers::new(
            upstream_config.name.clone(),
            agent.client.clone(),
        ));
        let (to_leg, leg_reads) = LegInput::channel(queue);
        let (leg_writes, from_leg) = FrameWriter::diverting(queue, answers.clone());
        let downstream = Downstream {
            frames: frames_of(leg_reads).boxed(),
            writer: leg_writes.clone(),
            transport: agent.transport,
            upstream_headers: Vec::new(),
            identity: agent.identity.clone(),
            client_address: agent.client_address.clone(),
        };
        let aggregate = context.aggregate.name.clone();
        let route = Arc::new(if returning {
            VirtualRoute::returning(aggregate)
        } else {
            VirtualRoute::new(aggregate)
        });
        let session_context = SessionContext {
            config: context.config.clone(),
            upstream: upstream_config.clone(),
            guardian: context.guardian.clone(),
            audit: context.audit.clone(),
            requests: context.requests.clone(),
            virtual_route: Some(route.clone()),
            client_intake: Some(to_leg.intake.clone()),
        };
        let session = tokio::spawn(async move {
            let exit = run_session(session_context, downstream, upstream, stop).await;
            // What the relay wrote last (its -32011 replies) is still read.
            leg_writes.close();
            exit
        });
        let leg = Arc::new(Leg {
            name: upstream_config.name,
            index,
            to_leg,
            answers,
            gone: CancellationToken::new(),
            session: Mutex::new(Some(session)),
            route,
        });
        tokio::spawn(read_leg(leg.clone(), from_leg, events));
        Ok(leg)
    }

    /// Sends a request of the router's own; the reply (the whole message)
    /// arrives on the receiver, which fails if the leg ends first.
    pub(super) async fn request(
        &self,
        method: &str,
        params: Option<Value>,
    ) -> Result<oneshot::Receiver<Value>, LegGone> {
        let mut message = json!({"jsonrpc": "2.0", "id": 0, "method": method});
        if let Some(params) = params {
            message["params"] = params;
        }
        self.forward_request(message, None).await
    }

    /// Sends the agent's request `agent_id` under an id of the leg's
    /// numbering; the reply arrives on the receiver.
    pub(super) async fn forward_request(
        &self,
        mut message: Value,
        agent_id: Option<RequestId>,
    ) -> Result<oneshot::Receiver<Value>, LegGone> {
        if self.gone.is_cancelled() {
            return Err(LegGone);
        }
        let (reply, receiver) = oneshot::channel();
        let answer = Answer::Waiter(reply);
        let pending = &self.answers.pending;
        let id = match agent_id {
            Some(agent_id) => pending
                .insert_agent_request(&agent_id, answer)
                .unwrap_or(agent_id),
            None => pending.insert_router_request(answer),
        };
        message["id"] = id.to_value();
        if self.send(&message).await.is_err() {
            pending.take(id.as_json());
            return Err(LegGone);
        }
        Ok(receiver)
    }

    /// Sends the agent's routed `call` with `target`'s name for what it
    /// calls (the name the server knows) spliced in, and a fresh id when
    /// the agent's cannot be kept; already peeked and parsed, its tree
    /// changed as its bytes are, so the leg's relay reads it neither way
    /// again. The answer goes straight to the agent, and so does the
    /// refusal when the leg is gone.
    pub(super) async fn forward_call(&self, call: NamedCall, target: &Target) {
        let NamedCall {
            id: agent_id,
            request,
            ..
        } = call;
        let name = target.quoted.as_bytes();
        if self.gone.is_cancelled() {
            return self.answers.unavailable(&agent_id).await;
        }
        let renumbered = self
            .answers
            .pending
            .insert_agent_request(&agent_id, Answer::Agent);
        let original = &request.message.bytes;
        let name_edit = (original.get(request.name_at.clone()) != Some(name))
            .then_some((request.name_at, name));
        let id_edit = renumbered
            .as_ref()
            .map(|leg_id| (request.id_at, leg_id.as_json().as_bytes()));
        let renamed = name_edit.is_some().then_some(&*target.original);
        let bytes = match (name_edit, id_edit) {
            // Under the agent's id and name, the call goes as the agent wrote it.
            (None, None) => original.clone(),
            (Some(edit), None) | (None, Some(edit)) => splice::splice(original, &mut [edit]),
            (Some(name), Some(id)) => splice::splice(original, &mut [name, id]),
        };
        let tree = request
            .message
            .tree
            .and_then(|tree| splice::spliced_tree(tree, &bytes, renamed, renumbered.as_ref()));
        let leg_id = renumbered.unwrap_or(agent_id);
        let message = Message {
            bytes,
            kind: MessageKind::Request,
            id: Some(leg_id.clone()),
            method: request.message.method,
            tree,
        };
        if self.to_leg.send_now(message).await.is_err() {
            if let Some(taken) = self.answers.pending.take(leg_id.as_json()) {
                if let Some(agent_id) = taken.agent_id {
                    self.answers.unavailable(&agent_id).await;
                }
            }
        }
    }

    /// The id the leg sent the agent's request `agent_id` (JSON text)
    /// under, while it runs here.
    pub(super) fn leg_id_of(&self, agent_id: &str) -> Option<RequestId> {
        self.answers.pending.leg_id_of(agent_id)
    }

    /// Sends a notification or a response as it is.
    pub(super) async fn send(&self, message: &Value) -> Result<(), LegGone> {
        let bytes = serde_json::to_vec(message).map_err(|_| LegGone)?;
        self.to_leg
            .send(LineFrame::Line(Bytes::from(bytes)))
            .await
            .map_err(|_| LegGone)
    }

    /// Whether the leg's session has ended.
    pub(super) fn is_gone(&self) -> bool {
        self.gone.is_cancelled()
    }

    /// Resolves once the leg's session has ended.
    pub(super) async fn gone(&self) {
        self.gone.cancelled().await;
    }

    /// Ends the leg in order: its agent side closes, so its relay shuts the
    /// upstream down and seals its audit chain; returns once it has.
    pub(super) async fn close(&self) {
        self.to_leg.close();
        let session = lock(&self.session).take();
        if let Some(session) = session {
            let _ = session.await;
        }
    }
}

/// What the router sends a leg's relay session, read by that session as
/// its agent's frames; or taken by the router itself, when nothing is
/// queued ahead (see [`SharedIntake`]).
struct LegInput {
    tx: mpsc::Sender<LineFrame>,
    close: CancellationToken,
    intake: Arc<SharedIntake>,
}

impl LegInput {
    /// A queue of `capacity` frames, and the relay session's end of it.
    fn channel(capacity: usize) -> (LegInput, FrameReceiver<LineFrame>) {
        let (tx, rx) = mpsc::channel(capacity);
        let close = CancellationToken::new();
        let receiver = FrameReceiver::new(rx, close.clone());
        let intake = Arc::new(SharedIntake::default());
        (LegInput { tx, close, intake }, receiver)
    }

    /// Queues `frame` for the leg's relay.
    async fn send(&self, frame: LineFrame) -> Result<(), LegGone> {
        self.intake.queue();
        let sent = self.tx.send(frame).await;
        if sent.is_err() {
            self.intake.unqueue();
        }
        sent.map_err(|_| LegGone)
    }

    /// Hands the peeked request `message` to the leg's relay in this
    /// task when nothing is queued ahead of it, else queues it.
    async fn send_now(&self, message: Message) -> Result<(), LegGone> {
        if self.close.is_cancelled() {
            return Err(LegGone);
        }
        match self.intake.take_now(message) {
            Ok(()) => Ok(()),
            Err(message) => self.send(LineFrame::Peeked(Box::new(message))).await,
        }
    }

    /// Ends the relay session's input once what is queued is read.
    fn close(&self) {
        self.close.cancel();
    }
}

/// The leg's relay reads what the router sends as its agent's frames.
fn frames_of(
    receiver: FrameReceiver<LineFrame>,
) -> impl futures_util::Stream<Item = std::io::Result<LineFrame>> + Send + 'static {
    stream::unfold(receiver, |mut receiver| async move {
        let frame = receiver.recv().await?;
        Some((Ok(frame), receiver))
    })
}

/// Reads what the leg's relay sends towards the agent and the answers
/// did not take: the upstream's requests and notifications go to the
/// router, and so do answers to routed calls held behind them, so the
/// router writes them to the agent in the order the upstream sent them.
async fn read_leg(
    leg: Arc<Leg>,
    mut from_leg: FrameReceiver,
    events: mpsc::UnboundedSender<LegEvent>,
) {
    while let Some(frame) = from_leg.recv().await {
        let ahead = leg.answers.counted();
        let frame = match leg.answers.deliver(frame) {
            Ok(Diverted::To(_, reply)) => {
                if events.send(LegEvent::Answer(reply, ahead)).is_err() {
                    break;
                }
                continue;
            }
            Ok(Diverted::Delivered) => continue,
            Ok(Diverted::Pending(delivery)) => {
                delivery.await;
                continue;
            }
            Err(frame) => frame,
        };
        let Ok(message) = serde_json::from_slice::<Value>(&frame) else {
            tracing::warn!(upstream = %leg.name, "an upstream's relay sent a frame that is not JSON");
            continue;
        };
        if events
            .send(LegEvent::Message(leg.index, message, ahead))
            .is_err()
        {
            break;
        }
    }
    leg.gone.cancel();
    // Dropping the waiters fails every request still in flight; the calls
    // answered from here are answered as unavailable.
    for agent_id in leg.answers.pending.drain() {
        leg.answers.unavailable(&agent_id).await;
    }
    let _ = events.send(LegEvent::Closed(leg.index));
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
