//! `RemoteGuardian`: acs-proxy as an ACS Observed Agent of a remote Guardian.
//!
//! Every exchange is signed and every answer verified (§10, DESIGN §3.8):
//! the per-session key is HKDF-derived from the deployment secret and the
//! session id. Answers are bound to their request by JSON-RPC `id` and
//! `result.request_id`; the Guardian's published chain head is remembered
//! and sent back on the next request as `metadata.session_state.chain_hash`
//! (§8.6) so either side can notice a diverging chain.
//!
//! Hooks asked together ([`Guardian::decide_batch`]) go as one JSON-RPC
//! batch (§3): every element signed on its own, every answer verified and
//! bound on its own, so one bad element fails only its own hook. A
//! Guardian that answers the array with a single -32600 does not take
//! batches; from then on this client reports [`BatchAnswer::Unsupported`]
//! without asking, and the caller goes one hook at a time.
//!
//! With `nonce` set, every signed request (not `system/ping`) carries a
//! fresh `params.nonce` of 32 lowercase hex digits (128 random bits, §10.3).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::{BoxFuture, FutureExt};
use uuid::Uuid;

use super::signing::{SessionKey, SigningSecret};
use super::transport::GuardianTransport;
use super::wire;
use crate::guardian::{
    BatchAnswer, Decision, DecisionSource, FailurePosture, Guardian, GuardianError, Negotiated,
};
use crate::hooks::{HookRequest, Metadata};
use crate::metrics::METRICS;

/// What the remote Guardian needs besides its transport.
pub struct RemoteSettings {
    /// The deployment secret the session keys derive from.
    pub secret: SigningSecret,
    /// `key_id` sent with every signature.
    pub key_id: String,
    /// Every method the proxy may emit (the ClientHello's `methods_implemented`).
    pub methods_implemented: Vec<String>,
    /// `transports_supported`: the transport in use.
    pub transport: wire::Transport,
    /// A local failure posture that can only make the negotiated one stricter.
    pub local_posture: Option<FailurePosture>,
    /// How long the handshake and pings may take.
    pub timeout: Duration,
    /// Put a fresh random `params.nonce` on every signed request.
    pub nonce: bool,
}

mod batch;
mod decide;
mod exchange;
mod handshake;
mod rehandshake;
mod request;
#[cfg(test)]
mod tests;

/// Room reserved for one request body: a hook envelope with a small
/// payload fits without growing the buffer.
const BODY_CAPACITY: usize = 1024;

/// Per-session state: the derived key, the Guardian's last chain head, and
/// what a re-handshake needs.
struct RemoteSession {
    key: SessionKey,
    chain_head: Option<String>,
    /// The MCP revision the handshake declared.
    mcp_version: Option<String>,
    /// An exchange failed in transport since the last handshake.
    unreachable: bool,
}

/// A Guardian reached over the ACS wire.
pub struct RemoteGuardian {
    transport: Arc<dyn GuardianTransport>,
    settings: RemoteSettings,
    sessions: Mutex<HashMap<Uuid, RemoteSession>>,
    next_id: AtomicU64,
    /// Cleared for good the first time the Guardian refuses a batch.
    batches_accepted: AtomicBool,
}

impl RemoteGuardian {
    /// A client over `transport`.
    pub fn new(transport: Arc<dyn GuardianTransport>, settings: RemoteSettings) -> Self {
        Self {
            transport,
            settings,
            sessions: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            batches_accepted: AtomicBool::new(true),
        }
    }

    /// Whether batches are still sent (no -32600 refusal seen yet).
    pub fn accepts_batches(&self) -> bool {
        self.batches_accepted.load(Ordering::Relaxed)
    }

    fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn session_key(&self, metadata: &Metadata) -> (SessionKey, Option<String>) {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let session = self.session_entry(&mut sessions, metadata);
        (session.key.clone(), session.chain_head.clone())
    }

    /// The session's state, created with its derived key when new.
    fn session_entry<'s>(
        &self,
        sessions: &'s mut HashMap<Uuid, RemoteSession>,
        metadata: &Metadata,
    ) -> &'s mut RemoteSession {
        sessions
            .entry(metadata.session_id)
            .or_insert_with(|| RemoteSession {
                key: SessionKey::derive(&self.settings.secret, &metadata.session_id.to_string()),
                chain_head: None,
                mcp_version: None,
                unreachable: false,
            })
    }

    fn remember_head(&self, metadata: &Metadata, head: &str) {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(session) = sessions.get_mut(&metadata.session_id) {
            session.chain_head = Some(head.to_owned());
        }
    }
}

impl Guardian for RemoteGuardian {
    fn hello<'a>(
        &'a self,
        metadata: &'a Metadata,
        mcp_version: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Negotiated, GuardianError>> {
        self.hello_exchange(metadata, mcp_version).boxed()
    }

    fn decide<'a>(
        &'a self,
        hook: &'a HookRequest,
        metadata: &'a Metadata,
    ) -> BoxFuture<'a, Result<Decision, GuardianError>> {
        async move {
            let started = Instant::now();
            let result = self.decide_exchange(hook, metadata).await;
            observe(hook, &result, started.elapsed().as_secs_f64());
            result
        }
        .boxed()
    }

    fn decide_batch<'a>(
        &'a self,
        hooks: &'a [&'a HookRequest],
        metadata: &'a Metadata,
    ) -> BoxFuture<'a, BatchAnswer> {
        async move {
            let started = Instant::now();
            let answer = self.batch_exchange(hooks, metadata).await;
            if let BatchAnswer::Answers(answers) = &answer {
                let elapsed = started.elapsed().as_secs_f64();
                for (hook, result) in hooks.iter().zip(answers) {
                    observe(hook, result, elapsed);
                }
            }
            answer
        }
        .boxed()
    }

    fn source(&self) -> DecisionSource {
        DecisionSource::Remote
    }

    fn close_session(&self, metadata: &Metadata) {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        sessions.remove(&metadata.session_id);
    }
}

/// Observes one hook's round trip to the Guardian, by its decision or by
/// why there was none.
fn observe(hook: &HookRequest, result: &Result<Decision, GuardianError>, seconds: f64) {
    match result {
        Ok(decision) => METRICS.observe_guardian_decision(&hook.method, decision.decision, seconds),
        Err(err) => METRICS.guardian_request_failed(&hook.method, err.reason(), seconds),
    }
}
