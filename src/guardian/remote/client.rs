//! `RemoteGuardian`: acs-proxy as an ACS Observed Agent of a remote Guardian.
//!
//! Every exchange is signed and every answer verified (§10, DESIGN §3.8):
//! the per-session key is HKDF-derived from the deployment secret and the
//! session id. Answers are bound to their request by JSON-RPC `id` and
//! `result.request_id`; the Guardian's published chain head is remembered
//! and sent back on the next request as `metadata.session_state.chain_hash`
//! (§8.6) so either side can notice a diverging chain.

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::future::{BoxFuture, FutureExt};
use serde_json::{json, Value};
use uuid::Uuid;

use super::signing::{sign_request, verify_response, SessionKey, SignatureError, SigningSecret};
use super::transport::GuardianTransport;
use super::wire::{self, codes, Reply, WireError};
use crate::guardian::{
    Decision, DecisionSource, FailurePosture, Guardian, GuardianError, Negotiated,
};
use crate::hooks::{now_rfc3339, HookRequest, Metadata, ACS_VERSION};
use crate::metrics::{hook_label, METRICS};

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
}

/// Per-session state: the derived key and the Guardian's last chain head.
struct RemoteSession {
    key: SessionKey,
    chain_head: Option<String>,
}

/// A Guardian reached over the ACS wire.
pub struct RemoteGuardian {
    transport: Arc<dyn GuardianTransport>,
    settings: RemoteSettings,
    sessions: Mutex<HashMap<Uuid, RemoteSession>>,
    next_id: AtomicU64,
}

impl RemoteGuardian {
    /// A client over `transport`.
    pub fn new(transport: Arc<dyn GuardianTransport>, settings: RemoteSettings) -> Self {
        Self {
            transport,
            settings,
            sessions: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
        }
    }

    /// `system/ping` (unsigned, never chained): is the Guardian answering?
    pub async fn ping(&self) -> Result<(), GuardianError> {
        let id = self.next_id();
        let request_id = Uuid::new_v4().to_string();
        let envelope = json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": crate::hooks::SYSTEM_PING,
            "params": {
                "acs_version": ACS_VERSION,
                "request_id": request_id,
                "timestamp": now_rfc3339(),
                "metadata": { "agent_id": "acs-proxy", "session_id": Uuid::nil().to_string() },
                "payload": { "echo": "acs-proxy" },
            },
        });
        let reply = tokio::time::timeout(self.settings.timeout, self.send(&envelope))
            .await
            .map_err(|_| GuardianError::Timeout(millis(self.settings.timeout)))??;
        wire::parse_ping(&reply, &Value::from(id), &request_id)
            .map(|_| ())
            .map_err(wire_error)
    }

    fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn session_key(&self, metadata: &Metadata) -> (SessionKey, Option<String>) {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let session = sessions
            .entry(metadata.session_id)
            .or_insert_with(|| RemoteSession {
                key: SessionKey::derive(&self.settings.secret, &metadata.session_id.to_string()),
                chain_head: None,
            });
        (session.key.clone(), session.chain_head.clone())
    }

    fn remember_head(&self, metadata: &Metadata, head: &str) {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(session) = sessions.get_mut(&metadata.session_id) {
            session.chain_head = Some(head.to_owned());
        }
    }

    /// Sends one envelope and parses the reply as JSON.
    async fn send(&self, envelope: &Value) -> Result<Value, GuardianError> {
        let body = Bytes::from(envelope.to_string());
        let reply = self
            .transport
            .call(body)
            .await
            .map_err(|err| GuardianError::Transport(err.to_string()))?;
        serde_json::from_slice(&reply)
            .map_err(|err| GuardianError::Malformed(format!("not JSON: {err}")))
    }

    /// Signs, sends, and verifies one exchange.
    async fn exchange(
        &self,
        mut envelope: Value,
        key: &SessionKey,
    ) -> Result<Value, GuardianError> {
        sign_request(&mut envelope, key, &self.settings.key_id)
            .map_err(|err| GuardianError::Malformed(format!("cannot sign the request: {err}")))?;
        let reply = self.send(&envelope).await?;
        match verify_response(&reply, key) {
            Ok(()) => Ok(reply),
            // A Guardian that could not authenticate us answers unsigned
            // -32004; that is a refusal, and it fails closed either way.
            Err(SignatureError::Missing)
                if error_code(&reply) == Some(codes::SIGNATURE_INVALID) =>
            {
                Ok(reply)
            }
            Err(err) => Err(GuardianError::Signature(err.to_string())),
        }
    }

    async fn hello_exchange(
        &self,
        metadata: &Metadata,
        mcp_version: Option<&str>,
    ) -> Result<Negotiated, GuardianError> {
        let (key, _) = self.session_key(metadata);
        let payload = wire::client_hello_payload(
            &self.settings.methods_implemented,
            mcp_version,
            self.settings.transport,
            wire::DEFAULT_PROFILES,
            MAX_PAYLOAD_BYTES,
        );
        let hook = HookRequest::new(crate::hooks::HANDSHAKE_HELLO, payload, None);
        let id = self.next_id();
        let envelope = hook.envelope(id, metadata);
        let reply = tokio::time::timeout(self.settings.timeout, self.exchange(envelope, &key))
            .await
            .map_err(|_| GuardianError::Timeout(millis(self.settings.timeout)))??;
        wire::check_reply_id(&reply, &Value::from(id)).map_err(wire_error)?;
        let hello = wire::parse_server_hello(&reply).map_err(wire_error)?;
        Ok(hello.negotiated(self.settings.local_posture))
    }

    async fn decide_exchange(
        &self,
        hook: &HookRequest,
        metadata: &Metadata,
    ) -> Result<Decision, GuardianError> {
        let (key, head) = self.session_key(metadata);
        let id = self.next_id();
        let mut envelope = hook.envelope(id, metadata);
        if let Some(head) = head {
            envelope["params"]["metadata"]["session_state"] = json!({ "chain_hash": head });
        }
        let reply = self.exchange(envelope, &key).await?;
        match wire::parse_decision(&reply, &Value::from(id), &hook.request_id.to_string())
            .map_err(wire_error)?
        {
            Reply::Decision(decision) => {
                if let Some(head) = &decision.chain_hash {
                    self.remember_head(metadata, head);
                }
                Ok(*decision)
            }
            Reply::Error(error) => Err(GuardianError::Refused {
                code: error.code,
                message: error.message,
            }),
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
            let outcome = match &result {
                Ok(decision) => decision.decision.as_str(),
                Err(err) => err.reason(),
            };
            METRICS
                .guardian_request_seconds
                .with_label_values(&[hook_label(&hook.method), outcome])
                .observe(started.elapsed().as_secs_f64());
            result
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

/// `max_payload_size_bytes` declared in the ClientHello: the proxy's own
/// message limit default.
const MAX_PAYLOAD_BYTES: NonZeroU64 = match NonZeroU64::new(16 * 1024 * 1024) {
    Some(limit) => limit,
    None => NonZeroU64::MIN,
};

fn error_code(reply: &Value) -> Option<i64> {
    reply.get("error")?.get("code")?.as_i64()
}

/// Maps wire validation failures onto the failure classes the relay acts on.
fn wire_error(err: WireError) -> GuardianError {
    if let WireError::Refused { code, message, .. } = &err {
        return GuardianError::Refused {
            code: *code,
            message: message.clone(),
        };
    }
    if matches!(
        err,
        WireError::IdMismatch { .. } | WireError::RequestIdMismatch { .. }
    ) {
        return GuardianError::Binding(err.to_string());
    }
    GuardianError::Malformed(err.to_string())
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
