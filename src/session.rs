//! One agent↔server pairing: who the agent is, what it agreed with the
//! Guardian, which requests are in flight in each direction, and what the
//! server offers.
//!
//! State lives behind short-lived `std::sync::Mutex` locks that are never
//! held across an `.await`; everything slow (Guardian, audit, I/O) happens
//! outside them.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

use bytes::Bytes;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::audit::AuditChain;
use crate::config::{Config, UpstreamConfig};
use crate::enforce::approval::DeferralBudget;
use crate::enforce::integrity::SessionView;
use crate::guardian::Decided;
use crate::guardian::{Guardian, Negotiated};
use crate::hooks::agbom::{Inventory, ListKind};
use crate::hooks::{HookRequest, Identity, Metadata, ParamsDigester, RequestDigest, VirtualRoute};
use crate::jsonrpc::RequestId;
use crate::limits::{LimitExceeded, RequestBudget};
use crate::policy::limit::Admitted;
use crate::telemetry::Trace;
use crate::transport::writer::FrameWriter;

/// Defined with the message formats, below every layer that records or
/// routes a direction.
pub use crate::jsonrpc::Direction;
pub use deadlines::{Deadlines, Due, Expired};
pub use decision_timers::DecisionTimers;

mod deadlines;
mod decision_timers;

/// A decided `steps/sessionStart` the audit log has not taken yet.
#[derive(Debug, Clone)]
pub struct UnrecordedStart {
    /// The hook as decided.
    pub hook: HookRequest,
    /// Its decision.
    pub decided: Decided,
}

/// Where a request stands between being read and being answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PendingState {
    /// Hooks are being decided.
    Deciding,
    /// Held for an approver (ASK) or a deferral.
    Held,
    /// Sent on to the other side; waiting for its response.
    Forwarded,
}

/// A request read from one side and not yet answered.
#[derive(Debug, Clone)]
pub struct PendingRequest {
    /// The MCP method, static when the proxy knows it
    /// ([`crate::hooks::mcp::method_name`]).
    pub method: Cow<'static, str>,
    /// The tool of a `tools/call`.
    pub tool: Option<Arc<str>>,
    /// When it was read.
    pub started: Instant,
    /// The `steps/toolCallRequest` hook's request id, for `request_id_ref`.
    pub step_request_id: Option<Uuid>,
    /// Its progress.
    pub state: PendingState,
    /// Cancels its decision or hold (a `notifications/cancelled` arrived).
    pub cancel: CancellationToken,
    /// Its places under `[[policy.limit]]` concurrency limits, given back
    /// when the last copy of the entry is dropped.
    pub admitted: Option<Arc<Admitted>>,
    /// Its server span (off unless traced); ends when the answer is relayed.
    pub trace: Trace,
    /// The span of its trip to the server, from forwarding to the answer.
    pub upstream_trace: Trace,
}

/// Requests in flight from one sender, keyed by their id.
#[derive(Debug, Default)]
pub struct PendingTable {
    entries: Mutex<HashMap<RequestId, PendingRequest>>,
    /// Ids recently blocked, so a later cancellation of one is not forwarded
    /// for a request the other side never saw.
    blocked: Mutex<VecDeque<RequestId>>,
    /// The in-flight limits every entry counts against (the agent's
    /// requests only).
    budget: Option<Arc<RequestBudget>>,
}

/// Why a request could not be registered as in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AdmissionError {
    /// A request with this id is already in flight.
    #[error("a request with this id is already in flight")]
    DuplicateId,
    /// A limit on requests in flight was reached.
    #[error(transparent)]
    Limit(#[from] LimitExceeded),
}

/// How many blocked ids are remembered per direction.
const BLOCKED_MEMORY: usize = 64;

impl PendingTable {
    fn lock(&self) -> MutexGuard<'_, HashMap<RequestId, PendingRequest>> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A table whose entries count against `budget`.
    pub fn limited(budget: Arc<RequestBudget>) -> Self {
        Self {
            budget: Some(budget),
            ..Self::default()
        }
    }

    /// Registers a new request, unless its id is already in flight or a
    /// limit is reached.
    pub fn insert(&self, id: RequestId, request: PendingRequest) -> Result<(), AdmissionError> {
        let mut entries = self.lock();
        if entries.contains_key(&id) {
            return Err(AdmissionError::DuplicateId);
        }
        if let Some(budget) = &self.budget {
            budget.acquire(entries.len())?;
        }
        entries.insert(id, request);
        Ok(())
    }

    /// Updates an in-flight request in place.
    pub fn update(&self, id: &RequestId, change: impl FnOnce(&mut PendingRequest)) {
        if let Some(request) = self.lock().get_mut(id) {
            change(request);
        }
    }

    /// A copy of an in-flight request.
    pub fn get(&self, id: &RequestId) -> Option<PendingRequest> {
        self.lock().get(id).cloned()
    }

    /// Removes a request (answered, blocked or cancelled).
    pub fn remove(&self, id: &RequestId) -> Option<PendingRequest> {
        let removed = self.lock().remove(id);
        if removed.is_some() {
            self.release(1);
        }
        removed
    }

    /// Removes a request that was blocked and remembers its id.
    pub fn remove_blocked(&self, id: &RequestId) {
        self.remove(id);
        let mut blocked = self.blocked.lock().unwrap_or_else(|p| p.into_inner());
        if blocked.len() == BLOCKED_MEMORY {
            blocked.pop_front();
        }
        blocked.push_back(id.clone());
    }

    /// Whether a request with this id was blocked recently.
    pub fn was_blocked(&self, id: &RequestId) -> bool {
        let blocked = self.blocked.lock().unwrap_or_else(|p| p.into_inner());
        blocked.contains(id)
    }

    /// Empties the table, returning what was in flight (the peer is gone).
    pub fn drain(&self) -> Vec<(RequestId, PendingRequest)> {
        let drained: Vec<_> = self.lock().drain().collect();
        self.release(drained.len());
        drained
    }

    fn release(&self, count: usize) {
        if let Some(budget) = &self.budget {
            budget.release(count);
        }
    }

    /// How many requests are in flight.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Requests the proxy itself sent to one side (inventory fetches, approval
/// prompts), whose responses are taken out of the stream before the relay
/// sees them. Their ids live in a namespace no peer uses.
#[derive(Debug, Default)]
pub struct ProxyRequests {
    waiting: Mutex<HashMap<RequestId, oneshot::Sender<Bytes>>>,
}

/// The prefix of every id the proxy mints.
const PROXY_ID_PREFIX: &str = "\"acs-proxy-";

static NEXT_PROXY_ID: AtomicU64 = AtomicU64::new(1);

impl ProxyRequests {
    /// Mints an id and registers interest in its response.
    pub fn register(&self) -> (RequestId, oneshot::Receiver<Bytes>) {
        let n = NEXT_PROXY_ID.fetch_add(1, Ordering::Relaxed);
        let id = RequestId::from_json(&format!("{PROXY_ID_PREFIX}{n}\""));
        let (tx, rx) = oneshot::channel();
        self.lock().insert(id.clone(), tx);
        (id, rx)
    }

    /// Hands a response to whoever is waiting for it; `false` when the id is
    /// not one of ours.
    pub fn complete(&self, id: &RequestId, response: Bytes) -> bool {
        if !id.as_json().starts_with(PROXY_ID_PREFIX) {
            return false;
        }
        match self.lock().remove(id) {
            Some(tx) => {
                let _ = tx.send(response);
                true
            }
            None => id.as_json().starts_with(PROXY_ID_PREFIX),
        }
    }

    /// Forgets a request that timed out.
    pub fn forget(&self, id: &RequestId) {
        self.lock().remove(id);
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<RequestId, oneshot::Sender<Bytes>>> {
        self.waiting
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The two outgoing streams of a session.
#[derive(Debug, Clone)]
pub struct Writers {
    /// Frames to the agent.
    pub client: FrameWriter,
    /// Frames to the MCP server.
    pub server: FrameWriter,
}

impl Writers {
    /// The writer for frames travelling in `direction`.
    pub fn toward(&self, direction: Direction) -> &FrameWriter {
        match direction {
            Direction::ClientToServer => &self.server,
            Direction::ServerToClient => &self.client,
        }
    }
}

/// Facts learned while the session runs.
#[derive(Debug, Default)]
pub struct Learned {
    /// The server's inventory as last reported to the Guardian.
    pub inventory: Inventory,
    /// Whether `agbom/snapshot` has been sent.
    pub snapshot_sent: bool,
    /// Lists the server said changed, not yet re-read.
    pub stale_lists: Vec<ListKind>,
    /// The client declared the `elicitation` capability.
    pub client_elicitation: bool,
    /// The `initialize` result, once seen.
    pub initialize_result: Option<serde_json::Value>,
    /// Why the session is refused (sessionStart or inventory denied).
    pub refused: Option<String>,
    /// The session start, while the audit log has not recorded it.
    pub unrecorded_start: Option<UnrecordedStart>,
    /// The definitions listed to the client, as the integrity checks saw them.
    pub integrity: SessionView,
}

/// One MCP session through the proxy.
pub struct Session {
    /// The configuration in force.
    pub config: Arc<Config>,
    /// The session's id, also the audit chain's.
    pub session_id: Uuid,
    /// The envelope metadata, and the part of every hook's `request_hash`
    /// it makes, hashed once.
    params: OnceLock<Arc<ParamsDigester>>,
    negotiated: OnceLock<Negotiated>,
    /// Who decides.
    pub guardian: Arc<dyn Guardian>,
    /// This session's audit chain.
    pub audit: AuditChain,
    /// The downstream transport (`stdio`, `http`, `ws`, `sse`).
    pub transport: &'static str,
    /// Who opened the session, when the downstream side authenticated it.
    pub identity: Option<Arc<Identity>>,
    /// The agent's network address, when the transport has one.
    pub client_address: Option<String>,
    /// The upstream route name.
    pub upstream: String,
    /// The same name, shared by the tool steps' payloads (`tool.provider`).
    pub provider: Arc<str>,
    /// The upstream as a URI, for the AgBOM.
    pub endpoint: String,
    /// Requests from the agent awaiting the server's answer.
    pub client_pending: PendingTable,
    /// Requests from the server awaiting the agent's answer.
    pub server_pending: PendingTable,
    /// The proxy's own requests to the agent.
    pub proxy_to_client: ProxyRequests,
    /// The proxy's own requests to the server.
    pub proxy_to_server: ProxyRequests,
    /// Outgoing streams.
    pub writers: Writers,
    /// Deferred steps held now.
    pub deferrals: DeferralBudget,
    /// Requests forwarded upstream, watched for `[limits]
    /// upstream_request_timeout_ms`.
    pub upstream_deadlines: Deadlines,
    /// Timers for the deadlines of Guardian decisions, kept between them.
    pub decision_timers: DecisionTimers,
    /// The virtual server this session is one upstream of, when it is.
    pub virtual_route: Option<Arc<VirtualRoute>>,
    /// The session's `acs.session` span, once `steps/sessionStart` fired
    /// with tracing on.
    pub session_trace: OnceLock<Trace>,
    learned: Mutex<Learned>,
    started: AtomicBool,
    finished: AtomicBool,
}

impl Session {
    /// A session that has not started yet (no message read).
    pub fn new(
        config: Arc<Config>,
        upstream: &UpstreamConfig,
        transport: &'static str,
        guardian: Arc<dyn Guardian>,
        audit: AuditChain,
        session_id: Uuid,
        writers: Writers,
    ) -> Self {
        let endpoint = upstream.endpoint_uri();
        let upstream = upstream.name.clone();
        Self {
            provider: Arc::from(upstream.as_str()),
            transport,
            identity: None,
            client_address: None,
            config,
            session_id,
            params: OnceLock::new(),
            negotiated: OnceLock::new(),
            guardian,
            audit,
            upstream,
            endpoint,
            client_pending: PendingTable::default(),
            server_pending: PendingTable::default(),
            proxy_to_client: ProxyRequests::default(),
            proxy_to_server: ProxyRequests::default(),
            writers,
            deferrals: DeferralBudget::default(),
            upstream_deadlines: Deadlines::default(),
            decision_timers: DecisionTimers::default(),
            virtual_route: None,
            session_trace: OnceLock::new(),
            learned: Mutex::new(Learned::default()),
            started: AtomicBool::new(false),
            finished: AtomicBool::new(false),
        }
    }

    /// The session's span (off when untraced), parent of its session-level
    /// steps and of requests that bring no trace context of their own.
    pub fn session_span(&self) -> Trace {
        self.session_trace.get().cloned().unwrap_or_default()
    }

    /// Counts the agent's requests in flight against `budget`.
    pub fn with_request_budget(mut self, budget: Arc<RequestBudget>) -> Self {
        self.client_pending = PendingTable::limited(budget);
        self
    }

    /// Marks the session as one upstream of a virtual server.
    pub fn with_virtual_route(mut self, route: Option<Arc<VirtualRoute>>) -> Self {
        self.virtual_route = route;
        self
    }

    /// The name the agent of a virtual server calls the server's `tool` by.
    pub fn tool_called_as(&self, tool: Option<&str>) -> Option<Arc<str>> {
        let route = self.virtual_route.as_deref()?;
        route.called_as(tool?)
    }

    /// Binds the session to the caller the downstream side authenticated.
    pub fn with_identity(mut self, identity: Option<Arc<Identity>>) -> Self {
        self.identity = identity;
        self
    }

    /// Records the agent's network address (HTTP and WebSocket listeners).
    pub fn with_client_address(mut self, address: Option<String>) -> Self {
        self.client_address = address;
        self
    }

    /// `true` exactly once: for the caller that starts the session.
    pub fn begin(&self) -> bool {
        !self.started.swap(true, Ordering::AcqRel)
    }

    /// Whether [`Session::begin`] has been called.
    pub fn has_begun(&self) -> bool {
        self.started.load(Ordering::Acquire)
    }

    /// `true` exactly once: for the caller that ends the session.
    pub fn finish(&self) -> bool {
        !self.finished.swap(true, Ordering::AcqRel)
    }

    /// Fixes the envelope metadata (once, when the first message is read).
    pub fn set_metadata(&self, metadata: Metadata) {
        let _ = self.params.set(Arc::new(ParamsDigester::new(metadata)));
    }

    /// The §8.1 `request_hash` of `hook` in this session, for its audit
    /// entry: taken when the entry is linked, or now when it may not wait
    /// (see [`ParamsDigester::digest_later`]). The part of its `params`
    /// every hook shares (the metadata) is hashed once per session, not
    /// once per hook.
    pub fn request_digest(&self, hook: &HookRequest) -> RequestDigest {
        self.params().digest_later(hook)
    }

    /// The envelope metadata.
    pub fn metadata(&self) -> &Metadata {
        self.params().metadata()
    }

    fn params(&self) -> &Arc<ParamsDigester> {
        self.params.get_or_init(|| {
            Arc::new(ParamsDigester::new(Metadata {
                agent_id: self
                    .config
                    .hooks
                    .agent_id
                    .clone()
                    .unwrap_or_else(|| "unknown-agent".into()),
                session_id: self.session_id,
                environment: self.config.hooks.environment.clone(),
                user: self.identity.clone(),
            }))
        })
    }

    /// Records the handshake outcome.
    pub fn set_negotiated(&self, negotiated: Negotiated) {
        let _ = self.negotiated.set(negotiated);
    }

    /// The handshake outcome (everything evaluated until it is known).
    pub fn negotiated(&self) -> &Negotiated {
        self.negotiated.get_or_init(Negotiated::default)
    }

    /// The requests in flight *from* the sender of a message travelling in `direction`.
    pub fn pending_from(&self, direction: Direction) -> &PendingTable {
        match direction {
            Direction::ClientToServer => &self.client_pending,
            Direction::ServerToClient => &self.server_pending,
        }
    }

    /// The proxy's own requests to the peer that *sends* in `direction`.
    pub fn proxy_requests_to_sender(&self, direction: Direction) -> &ProxyRequests {
        match direction {
            Direction::ClientToServer => &self.proxy_to_client,
            Direction::ServerToClient => &self.proxy_to_server,
        }
    }

    /// Locks the learned facts (never across an `.await`).
    pub fn learned(&self) -> MutexGuard<'_, Learned> {
        self.learned
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests;
