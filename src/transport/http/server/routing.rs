//! Where each frame the relay sends to the agent goes, for one Streamable
//! HTTP session, and the per-stream replay buffers that make streams
//! resumable.
//!
//! A session has streams: stream 0 is the standalone GET stream, and every
//! POST that carries requests opens a new one (1, 2, ...). Each stream is a
//! log of events with sequence numbers; an event's SSE id is
//! `<stream>-<seq>`, unique within the session and naming its stream. A
//! connection is a cursor into one log: it gets the retained events after
//! its cursor, then live ones through a channel.
//!
//! Routing (each message goes to exactly one stream):
//! - a response, or a batch holding responses, goes to the stream of the
//!   POST that carried that request id; a response for an unknown id
//!   (cancelled, or never asked over HTTP) is dropped;
//! - `notifications/progress` goes to the stream of the request whose
//!   `_meta.progressToken` it names, while that stream is open;
//! - everything else (server→client requests, other notifications) goes to
//!   the standalone stream if a GET holds it, else to the most recently
//!   opened POST stream that still has a connection, else it is kept
//!   (bounded) on the standalone stream until a GET opens it.
//!
//! This is pure state: no I/O, no locks; [`super::session`] drives it.
//! `delivery` appends events and finishes streams; `messages` reads the
//! few facts routing needs from messages and writes the ones it sends.

mod delivery;
mod messages;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::jsonrpc::{peek_frame, Frame, Message, MessageKind, RequestId};

pub(crate) use self::messages::{cancellation, cancelled_request};
use self::messages::{
    negotiated_version, progress_token_of_notification, progress_token_of_request,
};

/// The standalone (GET) stream.
pub(crate) const STANDALONE: u64 = 0;

/// The first protocol revision whose clients expect a priming event.
const PRIMING_SINCE: &str = "2025-11-25";

/// Bounds on what a session keeps for resumption.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReplayLimits {
    /// Events kept per stream.
    pub(crate) events: usize,
    /// Bytes kept per stream (the newest event is always kept).
    pub(crate) bytes: usize,
    /// Finished POST streams kept for resumption.
    pub(crate) finished_streams: usize,
    /// Live events queued per connection before the router waits.
    pub(crate) channel: usize,
}

/// One SSE event.
#[derive(Debug, Clone)]
pub(crate) struct Event {
    pub(crate) stream: u64,
    pub(crate) seq: u64,
    /// The message; empty for a priming event.
    pub(crate) data: Bytes,
}

/// How a POST wants its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// An SSE stream.
    Sse,
    /// One JSON body (a single response, or an array for a batch).
    Json,
}

/// A connection's view of a stream.
#[derive(Debug)]
pub(crate) struct Attachment {
    pub(crate) stream: u64,
    pub(crate) generation: u64,
    /// The events to send first (retained ones after the cursor, or a priming event).
    pub(crate) replay: Vec<Event>,
    /// Live events; `None` when the stream is already finished.
    pub(crate) live: Option<mpsc::Receiver<Event>>,
    /// Cancelled when another connection takes the stream over, or the
    /// router gives up on this one.
    pub(crate) kick: CancellationToken,
}

/// What opening a POST gives its handler.
#[derive(Debug)]
pub(crate) enum Opened {
    Sse(Attachment),
    Json {
        stream: u64,
        reply: oneshot::Receiver<Bytes>,
    },
}

/// A hand-off the router performs outside the lock.
#[derive(Debug)]
pub(crate) enum Dispatch {
    /// Send to a live connection.
    Live {
        tx: mpsc::Sender<Event>,
        kick: CancellationToken,
        event: Event,
    },
    /// Complete a JSON-mode POST.
    Json {
        tx: oneshot::Sender<Bytes>,
        body: Bytes,
    },
}

/// Why a GET cannot attach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AttachError {
    /// The stream is unknown or no longer kept.
    UnknownStream,
    /// The session has ended.
    Closed,
}

#[derive(Debug)]
struct Live {
    tx: mpsc::Sender<Event>,
    kick: CancellationToken,
    generation: u64,
}

#[derive(Debug)]
struct JsonReply {
    tx: oneshot::Sender<Bytes>,
    parts: Vec<Bytes>,
    batch: bool,
}

#[derive(Debug, Default)]
struct Post {
    pending: HashSet<RequestId>,
    tokens: Vec<Box<str>>,
    json: Option<JsonReply>,
}

#[derive(Debug, Default)]
struct StreamLog {
    /// `None` for the standalone stream.
    post: Option<Post>,
    last_seq: u64,
    replay: VecDeque<Event>,
    replay_bytes: usize,
    /// Events up to this seq have been handed to a connection.
    sent_upto: u64,
    live: Option<Live>,
    generation: u64,
    finished: bool,
}

impl StreamLog {
    fn is_open_post_stream(&self) -> bool {
        !self.finished
            && self.live.is_some()
            && self.post.as_ref().is_some_and(|p| p.json.is_none())
    }
}

/// The routing state of one session.
#[derive(Debug)]
pub(crate) struct Routes {
    limits: ReplayLimits,
    next_stream: u64,
    streams: BTreeMap<u64, StreamLog>,
    by_request: HashMap<RequestId, u64>,
    by_token: HashMap<Box<str>, u64>,
    finished: VecDeque<u64>,
    init_request: Option<RequestId>,
    protocol_version: Option<String>,
    closed: bool,
}

/// A request carried by a POST: its id and its progress token, if any.
#[derive(Debug, Clone)]
pub(crate) struct PostedRequest {
    pub(crate) id: RequestId,
    pub(crate) progress_token: Option<Box<str>>,
}

impl PostedRequest {
    /// The request's id and `params._meta.progressToken`.
    pub(crate) fn of(message: &Message) -> Option<Self> {
        let id = message.id.clone()?;
        (message.kind == MessageKind::Request).then(|| PostedRequest {
            id,
            progress_token: progress_token_of_request(&message.bytes),
        })
    }
}

impl Routes {
    pub(crate) fn new(limits: ReplayLimits) -> Self {
        let mut streams = BTreeMap::new();
        streams.insert(STANDALONE, StreamLog::default());
        Self {
            limits,
            next_stream: 1,
            streams,
            by_request: HashMap::new(),
            by_token: HashMap::new(),
            finished: VecDeque::new(),
            init_request: None,
            protocol_version: None,
            closed: false,
        }
    }

    /// The version the `initialize` result named, once seen.
    pub(crate) fn protocol_version(&self) -> Option<&str> {
        self.protocol_version.as_deref()
    }

    /// Whether an answer to this id is still awaited.
    pub(crate) fn is_pending(&self, id: &RequestId) -> bool {
        self.by_request.contains_key(id)
    }

    /// Whether any connection is attached.
    pub(crate) fn has_live(&self) -> bool {
        self.streams.values().any(|s| s.live.is_some())
    }

    /// Opens a stream for a POST carrying `requests` (at least one); fails
    /// once the session is closed.
    /// `initialize` marks the POST that carries `initialize`, whose result
    /// names the session's protocol version.
    pub(crate) fn open_post(
        &mut self,
        requests: &[PostedRequest],
        mode: Mode,
        batch: bool,
        initialize: bool,
    ) -> Result<Opened, AttachError> {
        if self.closed {
            return Err(AttachError::Closed);
        }
        let stream = self.next_stream;
        self.next_stream += 1;
        let mut post = Post::default();
        for request in requests {
            post.pending.insert(request.id.clone());
            self.by_request.insert(request.id.clone(), stream);
            if initialize {
                self.init_request = Some(request.id.clone());
            }
            if mode == Mode::Sse {
                if let Some(token) = &request.progress_token {
                    post.tokens.push(token.clone());
                    self.by_token.insert(token.clone(), stream);
                }
            }
        }
        let reply = (mode == Mode::Json).then(|| {
            let (tx, rx) = oneshot::channel();
            post.json = Some(JsonReply {
                tx,
                parts: Vec::new(),
                batch,
            });
            rx
        });
        self.streams.insert(
            stream,
            StreamLog {
                post: Some(post),
                ..StreamLog::default()
            },
        );
        match reply {
            Some(reply) => Ok(Opened::Json { stream, reply }),
            None => self.attach(stream, Some(0)).map(Opened::Sse),
        }
    }

    /// Attaches a connection to `stream`, after `cursor` (the seq of the
    /// last event the client saw), or, without one, after what was already
    /// handed out. A connection already attached is kicked.
    pub(crate) fn attach(
        &mut self,
        stream: u64,
        cursor: Option<u64>,
    ) -> Result<Attachment, AttachError> {
        if self.closed {
            return Err(AttachError::Closed);
        }
        let priming = self.priming();
        let capacity = self.limits.channel;
        let log = self
            .streams
            .get_mut(&stream)
            .ok_or(AttachError::UnknownStream)?;
        let cursor = cursor.unwrap_or(log.sent_upto).min(log.last_seq);
        let mut replay: Vec<Event> = log
            .replay
            .iter()
            .filter(|e| e.seq > cursor)
            .cloned()
            .collect();
        let first_kept = replay.first().map_or(log.last_seq + 1, |e| e.seq);
        if first_kept > cursor + 1 {
            tracing::warn!(
                stream,
                lost = first_kept - cursor - 1,
                "events after the client's cursor are no longer kept"
            );
        }
        if let Some(old) = log.live.take() {
            old.kick.cancel();
        }
        log.generation += 1;
        if replay.is_empty() && priming {
            // An id the client can resume from, before anything else.
            log.last_seq += 1;
            replay.push(Event {
                stream,
                seq: log.last_seq,
                data: Bytes::new(),
            });
        }
        log.sent_upto = log.last_seq;
        let kick = CancellationToken::new();
        let live = if log.finished {
            None
        } else {
            let (tx, rx) = mpsc::channel(capacity);
            log.live = Some(Live {
                tx,
                kick: kick.clone(),
                generation: log.generation,
            });
            Some(rx)
        };
        Ok(Attachment {
            stream,
            generation: log.generation,
            replay,
            live,
            kick,
        })
    }

    /// A connection went away. Returns whether requests of its POST are
    /// still unanswered (the caller may cancel them after a grace period).
    pub(crate) fn detach(&mut self, stream: u64, generation: u64) -> bool {
        let Some(log) = self.streams.get_mut(&stream) else {
            return false;
        };
        if log
            .live
            .as_ref()
            .is_some_and(|l| l.generation == generation)
        {
            log.live = None;
        }
        log.generation == generation
            && !log.finished
            && log.post.as_ref().is_some_and(|p| !p.pending.is_empty())
    }

    /// After the grace period: if nobody re-attached to `stream`, its
    /// unanswered requests are abandoned; returns their ids (for
    /// `notifications/cancelled`) and finishes the stream.
    pub(crate) fn abandon(&mut self, stream: u64, generation: u64) -> Vec<RequestId> {
        let Some(log) = self.streams.get_mut(&stream) else {
            return Vec::new();
        };
        if log.generation != generation || log.live.is_some() || log.finished {
            return Vec::new();
        }
        let ids: Vec<RequestId> = match log.post.as_mut() {
            Some(post) => post.pending.drain().collect(),
            None => Vec::new(),
        };
        for id in &ids {
            self.by_request.remove(id);
        }
        let _ = self.finish(stream);
        ids
    }

    /// The client sent `notifications/cancelled` for `id`: its answer is no
    /// longer awaited. Returns a dispatch when that completes a JSON POST.
    pub(crate) fn client_cancelled(&mut self, id: &RequestId) -> Option<Dispatch> {
        let stream = self.by_request.remove(id)?;
        let post = self.streams.get_mut(&stream)?.post.as_mut()?;
        post.pending.remove(id);
        if post.pending.is_empty() {
            self.finish(stream)
        } else {
            None
        }
    }

    /// Routes one frame from the relay.
    pub(crate) fn route(&mut self, frame: Bytes) -> Vec<Dispatch> {
        let mut out = Vec::new();
        match peek_frame(frame.clone()) {
            Ok(Frame::Single(message)) if message.kind == MessageKind::Response => {
                if let Some(id) = message.id.as_ref() {
                    self.route_answer(frame, id, &mut out);
                }
            }
            Ok(Frame::Batch(messages))
                if messages.iter().any(|m| m.kind == MessageKind::Response) =>
            {
                let ids: Vec<RequestId> = messages
                    .iter()
                    .filter(|m| m.kind == MessageKind::Response)
                    .filter_map(|m| m.id.clone())
                    .collect();
                let mut target = None;
                for id in &ids {
                    if let Some(stream) = self.by_request.remove(id) {
                        target.get_or_insert(stream);
                    }
                }
                match target {
                    Some(stream) => self.deliver_responses(stream, frame, &ids, &mut out),
                    None => tracing::debug!("dropped a batch of responses nobody awaits"),
                }
            }
            Ok(Frame::Single(message)) if message.method() == "notifications/progress" => {
                let stream = progress_token_of_notification(&message.bytes)
                    .and_then(|token| self.by_token.get(&token).copied())
                    .filter(|s| self.streams.get(s).is_some_and(|log| !log.finished));
                match stream {
                    Some(stream) => out.extend(self.deliver(stream, frame)),
                    None => self.route_unrelated(frame, &mut out),
                }
            }
            _ => self.route_unrelated(frame, &mut out),
        }
        out
    }

    /// Routes `frame`, the answer to the request `id`, to the stream of
    /// the POST that carried that request.
    pub(crate) fn route_answer(&mut self, frame: Bytes, id: &RequestId, out: &mut Vec<Dispatch>) {
        self.capture_version(id, &frame);
        match self.by_request.remove(id) {
            Some(stream) => self.deliver_responses(stream, frame, std::slice::from_ref(id), out),
            None => tracing::debug!(%id, "dropped a response nobody awaits"),
        }
    }

    /// The requests still waiting for an answer.
    pub(crate) fn unanswered(&self) -> Vec<RequestId> {
        self.by_request.keys().cloned().collect()
    }

    /// Ends every stream: the session is over.
    pub(crate) fn close(&mut self) {
        self.closed = true;
        for log in self.streams.values_mut() {
            log.finished = true;
            log.live = None;
            if let Some(post) = log.post.as_mut() {
                post.json = None;
            }
        }
        self.by_request.clear();
        self.by_token.clear();
    }

    fn priming(&self) -> bool {
        self.protocol_version
            .as_deref()
            .is_some_and(|v| v >= PRIMING_SINCE)
    }

    fn capture_version(&mut self, id: &RequestId, bytes: &[u8]) {
        if self.init_request.as_ref() != Some(id) {
            return;
        }
        self.init_request = None;
        if let Some(version) = negotiated_version(bytes) {
            self.protocol_version = Some(version);
        }
    }
}

#[cfg(test)]
mod tests;
