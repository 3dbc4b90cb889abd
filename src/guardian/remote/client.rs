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
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::future::{BoxFuture, FutureExt};
use rustls::crypto::SecureRandom;
use serde_json::{json, Value};
use uuid::Uuid;

use super::signing::{sign_request, verify_response, SessionKey, SignatureError, SigningSecret};
use super::transport::{GuardianTransport, TransportError};
use super::wire::{self, codes, Reply, WireError};
use crate::guardian::{
    BatchAnswer, Decision, DecisionSource, FailurePosture, Guardian, GuardianError, Negotiated,
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
    /// Put a fresh random `params.nonce` on every signed request.
    pub nonce: bool,
}

mod rehandshake;

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

    /// Sends one envelope and parses the reply as JSON.
    async fn send(&self, envelope: &Value) -> Result<Value, GuardianError> {
        self.send_in(envelope, None).await
    }

    /// Like [`Self::send`], for an exchange of a session: when no
    /// connection can be made the Guardian may be restarting, so the
    /// session is marked for a re-handshake.
    async fn send_in(
        &self,
        envelope: &Value,
        session: Option<&Metadata>,
    ) -> Result<Value, GuardianError> {
        let body = Bytes::from(envelope.to_string());
        let reply = match self.transport.call(body).await {
            Ok(reply) => reply,
            Err(err) => {
                if let (Some(metadata), TransportError::Connect(_)) = (session, &err) {
                    self.mark_unreachable(metadata);
                }
                return Err(GuardianError::Transport(err.to_string()));
            }
        };
        serde_json::from_slice(&reply)
            .map_err(|err| GuardianError::Malformed(format!("not JSON: {err}")))
    }

    /// Makes a request ready to send: its nonce (when configured), then
    /// its signature over everything else.
    fn seal(&self, envelope: &mut Value, key: &SessionKey) -> Result<(), GuardianError> {
        if self.settings.nonce {
            envelope["params"]["nonce"] = Value::String(fresh_nonce()?);
        }
        sign_request(envelope, key, &self.settings.key_id)
            .map_err(|err| GuardianError::Malformed(format!("cannot sign the request: {err}")))
    }

    /// Seals, sends, and verifies one exchange.
    async fn exchange(
        &self,
        mut envelope: Value,
        key: &SessionKey,
        metadata: &Metadata,
    ) -> Result<Value, GuardianError> {
        self.seal(&mut envelope, key)?;
        let reply = self.send_in(&envelope, Some(metadata)).await?;
        authenticated(&reply, key)?;
        Ok(reply)
    }

    /// A hook's envelope, carrying the last chain head the Guardian
    /// published in this session (§8.6).
    fn hook_envelope(
        &self,
        hook: &HookRequest,
        id: u64,
        metadata: &Metadata,
        head: Option<&str>,
    ) -> Value {
        let mut envelope = hook.envelope(id, metadata);
        if let Some(head) = head {
            envelope["params"]["metadata"]["session_state"] = json!({ "chain_hash": head });
        }
        envelope
    }

    async fn hello_exchange(
        &self,
        metadata: &Metadata,
        mcp_version: Option<&str>,
    ) -> Result<Negotiated, GuardianError> {
        let (key, _) = self.session_key(metadata);
        let version = mcp_version.map(str::to_owned);
        self.with_session(metadata, |session| session.mcp_version = version);
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
        let reply = tokio::time::timeout(
            self.settings.timeout,
            self.exchange(envelope, &key, metadata),
        )
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
        self.rehandshake_if_needed(metadata).await?;
        let (key, head) = self.session_key(metadata);
        let id = self.next_id();
        let envelope = self.hook_envelope(hook, id, metadata, head.as_deref());
        let reply = self.exchange(envelope, &key, metadata).await?;
        self.read_decision(&reply, id, hook, metadata)
    }

    /// Reads an authenticated reply to `hook` (sent under JSON-RPC `id`)
    /// and remembers the chain head it publishes.
    fn read_decision(
        &self,
        reply: &Value,
        id: u64,
        hook: &HookRequest,
        metadata: &Metadata,
    ) -> Result<Decision, GuardianError> {
        match wire::parse_decision(reply, &Value::from(id), &hook.request_id.to_string())
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

    /// One batch exchange: every hook sealed as its own element, the array
    /// sent as one body, each answer found by its JSON-RPC id, verified and
    /// bound to its hook on its own.
    async fn batch_exchange(&self, hooks: &[&HookRequest], metadata: &Metadata) -> BatchAnswer {
        if !self.accepts_batches() {
            return BatchAnswer::Unsupported;
        }
        let every = |err: GuardianError| BatchAnswer::Answers(vec![Err(err); hooks.len()]);
        if let Err(err) = self.rehandshake_if_needed(metadata).await {
            return every(err);
        }
        let (key, head) = self.session_key(metadata);
        let mut ids = Vec::with_capacity(hooks.len());
        let mut envelopes = Vec::with_capacity(hooks.len());
        for hook in hooks {
            let id = self.next_id();
            let mut envelope = self.hook_envelope(hook, id, metadata, head.as_deref());
            if let Err(err) = self.seal(&mut envelope, &key) {
                return every(err);
            }
            ids.push(id);
            envelopes.push(envelope);
        }
        let reply = match self.send_in(&Value::Array(envelopes), Some(metadata)).await {
            Ok(reply) => reply,
            Err(err) => return every(err),
        };
        let elements = match reply {
            Value::Array(elements) => elements,
            single if refuses_batches(&single) => {
                if self.batches_accepted.swap(false, Ordering::Relaxed) {
                    tracing::warn!(
                        transport = self.transport.name(),
                        "the Guardian does not accept JSON-RPC batches (-32600); \
                         hooks go one at a time from now on"
                    );
                }
                return BatchAnswer::Unsupported;
            }
            single => return every(batch_wide_failure(&single, &key)),
        };
        let answers = hooks
            .iter()
            .zip(&ids)
            .map(|(hook, &id)| {
                let reply = answer_for(&elements, id, &ids)?;
                authenticated(reply, &key)?;
                self.read_decision(reply, id, hook, metadata)
            })
            .collect();
        BatchAnswer::Answers(answers)
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
                    let outcome = match result {
                        Ok(decision) => decision.decision.as_str(),
                        Err(err) => err.reason(),
                    };
                    METRICS
                        .guardian_request_seconds
                        .with_label_values(&[hook_label(&hook.method), outcome])
                        .observe(elapsed);
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

/// `max_payload_size_bytes` declared in the ClientHello: the proxy's own
/// message limit default.
const MAX_PAYLOAD_BYTES: NonZeroU64 = match NonZeroU64::new(16 * 1024 * 1024) {
    Some(limit) => limit,
    None => NonZeroU64::MIN,
};

fn error_code(reply: &Value) -> Option<i64> {
    reply.get("error")?.get("code")?.as_i64()
}

/// Checks a reply's signature. A Guardian that could not authenticate us
/// answers unsigned -32004; that is a refusal, and it fails closed either way.
fn authenticated(reply: &Value, key: &SessionKey) -> Result<(), GuardianError> {
    match verify_response(reply, key) {
        Ok(()) => Ok(()),
        Err(SignatureError::Missing) if error_code(reply) == Some(codes::SIGNATURE_INVALID) => {
            Ok(())
        }
        Err(err) => Err(GuardianError::Signature(err.to_string())),
    }
}

/// A single -32600 error answering an array: the Guardian does not take
/// batches (§3). Accepted unsigned: such a Guardian answers before it
/// looks at any element, and believing a forged one only costs batching.
fn refuses_batches(reply: &Value) -> bool {
    reply.is_object() && error_code(reply) == Some(crate::jsonrpc::codes::INVALID_REQUEST)
}

/// A single reply other than -32600 to a batch answers no element, so it
/// is every element's failure: the Guardian's error if it authenticates,
/// else an unauthenticated answer.
fn batch_wide_failure(reply: &Value, key: &SessionKey) -> GuardianError {
    if let Err(err) = authenticated(reply, key) {
        return err;
    }
    match (error_code(reply), reply.get("error")) {
        (Some(code), Some(error)) => GuardianError::Refused {
            code,
            message: error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        },
        _ => GuardianError::Malformed(
            "a batch was answered with a single reply that is not an error".into(),
        ),
    }
}

/// The element of a batch reply that answers JSON-RPC `id`. An element
/// left unanswered is a binding failure when the reply carries an answer
/// to an id that was never asked (it may be this element's, misfiled), and
/// a malformed reply otherwise.
fn answer_for<'r>(
    elements: &'r [Value],
    id: u64,
    asked: &[u64],
) -> Result<&'r Value, GuardianError> {
    let wanted = Value::from(id);
    let mut found = elements.iter().filter(|e| e.get("id") == Some(&wanted));
    match (found.next(), found.next()) {
        (Some(answer), None) => Ok(answer),
        (Some(_), Some(_)) => Err(GuardianError::Malformed(format!(
            "the batch reply answers id {id} more than once"
        ))),
        (None, _) => {
            let foreign = elements
                .iter()
                .filter_map(|e| e.get("id"))
                .find(|got| !got.is_null() && !asked.iter().any(|&a| got.as_u64() == Some(a)));
            Err(match foreign {
                Some(got) => GuardianError::Binding(format!(
                    "the batch reply has no answer for id {id} but one for id {got}, which was not asked"
                )),
                None => GuardianError::Malformed(format!(
                    "the batch reply has no answer for id {id}"
                )),
            })
        }
    }
}

/// 16 random bytes from the operating system's CSPRNG (through the ring
/// provider rustls is built with), as 32 lowercase hex digits.
fn fresh_nonce() -> Result<String, GuardianError> {
    static RANDOM: OnceLock<&'static dyn SecureRandom> = OnceLock::new();
    let random = RANDOM.get_or_init(|| rustls::crypto::ring::default_provider().secure_random);
    let mut bytes = [0u8; NONCE_BYTES];
    random
        .fill(&mut bytes)
        .map_err(|_| GuardianError::Malformed("no randomness for the request nonce".into()))?;
    Ok(hex::encode(bytes))
}

/// Nonce length in bytes: 32 hex digits, inside ACS's 16–64 characters.
const NONCE_BYTES: usize = 16;

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

#[cfg(test)]
mod tests {
    //! The batch exchange and the nonce against an in-process transport
    //! whose answers each test scripts (signed with the session key).

    use std::collections::HashSet;

    use futures_util::future;

    use super::*;
    use crate::guardian::remote::signing::sign_response;
    use crate::guardian::remote::transport::TransportError;
    use crate::guardian::Disposition;

    const SECRET: [u8; 32] = [7; 32];

    type Answerer = Box<dyn Fn(&Value, &SessionKey) -> Value + Send + Sync>;

    /// Answers each body with `answer(request, key)` and keeps the bodies.
    struct Scripted {
        answer: Answerer,
        key: SessionKey,
        bodies: Mutex<Vec<Value>>,
    }

    impl GuardianTransport for Scripted {
        fn call<'a>(&'a self, body: Bytes) -> BoxFuture<'a, Result<Bytes, TransportError>> {
            let request: Value = serde_json::from_slice(&body).unwrap();
            let reply = (self.answer)(&request, &self.key);
            self.bodies.lock().unwrap().push(request);
            future::ready(Ok(Bytes::from(reply.to_string()))).boxed()
        }

        fn name(&self) -> &'static str {
            "http"
        }
    }

    struct Fixture {
        guardian: RemoteGuardian,
        transport: Arc<Scripted>,
        metadata: Metadata,
    }

    impl Fixture {
        fn new(nonce: bool, answer: Answerer) -> Self {
            let metadata = Metadata {
                agent_id: "unit".into(),
                session_id: Uuid::new_v4(),
                environment: None,
            };
            let secret = SigningSecret::from_bytes(SECRET.to_vec()).unwrap();
            let key = SessionKey::derive(&secret, &metadata.session_id.to_string());
            let transport = Arc::new(Scripted {
                answer,
                key,
                bodies: Mutex::new(Vec::new()),
            });
            let settings = RemoteSettings {
                secret,
                key_id: "k-unit".into(),
                methods_implemented: vec!["steps/toolCallRequest".into()],
                transport: wire::Transport::Http,
                local_posture: None,
                timeout: Duration::from_secs(1),
                nonce,
            };
            let guardian = RemoteGuardian::new(transport.clone(), settings);
            Self {
                guardian,
                transport,
                metadata,
            }
        }

        async fn batch(&self, hooks: &[HookRequest]) -> BatchAnswer {
            let hooks: Vec<&HookRequest> = hooks.iter().collect();
            self.guardian.decide_batch(&hooks, &self.metadata).await
        }

        fn bodies(&self) -> Vec<Value> {
            self.transport.bodies.lock().unwrap().clone()
        }
    }

    fn hooks() -> [HookRequest; 2] {
        [
            HookRequest::new("protocols/MCP/tools/call", json!({"id": 1}), None),
            HookRequest::new(
                "steps/toolCallRequest",
                json!({"tool": {"name": "t"}}),
                None,
            ),
        ]
    }

    /// A signed decision answering `request`, publishing head `head`.
    fn decision(request: &Value, key: &SessionKey, decision: &str, head: char) -> Value {
        let mut reply = json!({"jsonrpc": "2.0", "id": request["id"], "result": {
            "type": "final", "acs_version": "0.1.0",
            "request_id": request["params"]["request_id"], "decision": decision,
            "reasoning": "scripted", "chain_hash": head.to_string().repeat(64)}});
        sign_response(&mut reply, key, "k-unit").unwrap();
        reply
    }

    fn answered(answer: BatchAnswer) -> Vec<Result<Decision, GuardianError>> {
        match answer {
            BatchAnswer::Answers(answers) => answers,
            BatchAnswer::Unsupported => panic!("the batch was not answered"),
        }
    }

    #[tokio::test]
    async fn one_body_carries_every_hook_and_answers_bind_by_id_in_any_order() {
        let fixture = Fixture::new(
            false,
            Box::new(|batch, key| {
                let elements = batch.as_array().unwrap();
                json!([
                    decision(&elements[1], key, "deny", 'b'),
                    decision(&elements[0], key, "allow", 'a'),
                ])
            }),
        );
        let hooks = hooks();
        let answers = answered(fixture.batch(&hooks).await);
        assert_eq!(answers[0].as_ref().unwrap().decision, Disposition::Allow);
        assert_eq!(answers[1].as_ref().unwrap().decision, Disposition::Deny);
        let bodies = fixture.bodies();
        assert_eq!(bodies.len(), 1, "one exchange");
        let elements = bodies[0].as_array().expect("a batch array");
        assert_eq!(elements.len(), 2);
        assert_ne!(elements[0]["id"], elements[1]["id"]);
        for (element, hook) in elements.iter().zip(&hooks) {
            assert_eq!(element["method"], hook.method.as_str());
            assert_eq!(element["params"]["request_id"], hook.request_id.to_string());
            assert_eq!(element["params"]["signature"]["key_id"], "k-unit");
            assert!(element["params"].get("nonce").is_none());
        }
        // Elements are read in the order asked; the last one's head is the
        // Guardian's newest and goes out on the next request.
        let sessions = fixture.guardian.sessions.lock().unwrap();
        let head = sessions[&fixture.metadata.session_id].chain_head.clone();
        assert_eq!(head, Some("b".repeat(64)));
    }

    #[tokio::test]
    async fn each_element_fails_on_its_own() {
        let fixture = Fixture::new(
            false,
            Box::new(|batch, key| {
                let elements = batch.as_array().unwrap();
                let mut wrong = elements[0].clone();
                wrong["params"]["request_id"] = json!(Uuid::new_v4().to_string());
                let mut forged = decision(&elements[1], key, "allow", 'b');
                forged["result"]["decision"] = json!("deny");
                json!([decision(&wrong, key, "allow", 'a'), forged])
            }),
        );
        let answers = answered(fixture.batch(&hooks()).await);
        assert!(
            matches!(&answers[0], Err(GuardianError::Binding(_))),
            "{answers:?}"
        );
        assert!(
            matches!(&answers[1], Err(GuardianError::Signature(_))),
            "{answers:?}"
        );
    }

    #[tokio::test]
    async fn a_missing_answer_is_malformed_and_a_foreign_id_is_a_binding_failure() {
        let missing = Fixture::new(
            false,
            Box::new(|batch, key| json!([decision(&batch[0], key, "allow", 'a')])),
        );
        let answers = answered(missing.batch(&hooks()).await);
        assert!(answers[0].is_ok(), "{answers:?}");
        assert!(
            matches!(&answers[1], Err(GuardianError::Malformed(m)) if m.contains("no answer")),
            "{answers:?}"
        );

        let foreign = Fixture::new(
            false,
            Box::new(|batch, key| {
                let mut misfiled = batch[1].clone();
                misfiled["id"] = json!(999_999);
                json!([
                    decision(&batch[0], key, "allow", 'a'),
                    decision(&misfiled, key, "allow", 'b'),
                ])
            }),
        );
        let answers = answered(foreign.batch(&hooks()).await);
        assert!(answers[0].is_ok(), "{answers:?}");
        assert!(
            matches!(&answers[1], Err(GuardianError::Binding(m)) if m.contains("999999")),
            "{answers:?}"
        );
    }

    #[tokio::test]
    async fn a_single_minus_32600_turns_batching_off_for_good() {
        let fixture = Fixture::new(
            false,
            Box::new(|_, _| {
                json!({"jsonrpc": "2.0", "id": null,
                       "error": {"code": -32600, "message": "batches are not supported"}})
            }),
        );
        assert!(matches!(
            fixture.batch(&hooks()).await,
            BatchAnswer::Unsupported
        ));
        assert!(!fixture.guardian.accepts_batches());
        assert!(matches!(
            fixture.batch(&hooks()).await,
            BatchAnswer::Unsupported
        ));
        assert_eq!(fixture.bodies().len(), 1, "not asked again");
    }

    #[tokio::test]
    async fn another_single_reply_fails_every_element() {
        let fixture = Fixture::new(
            false,
            Box::new(|_, key| {
                let mut reply = json!({"jsonrpc": "2.0", "id": null,
                    "error": {"code": -32005, "message": "replayed"}});
                sign_response(&mut reply, key, "k-unit").unwrap();
                reply
            }),
        );
        let answers = answered(fixture.batch(&hooks()).await);
        for answer in &answers {
            let err = answer.as_ref().unwrap_err();
            assert!(
                matches!(err, GuardianError::Refused { code: -32005, .. }),
                "{err}"
            );
            assert!(err.fails_closed());
        }
        assert!(fixture.guardian.accepts_batches());

        let unsigned = Fixture::new(
            false,
            Box::new(
                |_, _| json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "parse"}}),
            ),
        );
        for answer in answers_of(&unsigned).await {
            assert!(matches!(answer, Err(GuardianError::Signature(_))));
        }
    }

    async fn answers_of(fixture: &Fixture) -> Vec<Result<Decision, GuardianError>> {
        answered(fixture.batch(&hooks()).await)
    }

    #[tokio::test]
    async fn nonces_are_fresh_32_hex_digits_on_signed_requests_only() {
        let fixture = Fixture::new(
            true,
            Box::new(|request, key| match request {
                Value::Array(elements) => Value::Array(
                    elements
                        .iter()
                        .map(|e| decision(e, key, "allow", 'c'))
                        .collect(),
                ),
                single => {
                    if single["method"] == crate::hooks::SYSTEM_PING {
                        json!({"jsonrpc": "2.0", "id": single["id"], "result": {
                            "type": "final", "acs_version": "0.1.0",
                            "request_id": single["params"]["request_id"], "decision": "allow",
                            "payload": {"status": "ok", "echo": "acs-proxy",
                                        "server_timestamp": "2026-01-01T00:00:00Z"}}})
                    } else {
                        decision(single, key, "allow", 'c')
                    }
                }
            }),
        );
        let [wrapped, step] = hooks();
        fixture.batch(&[wrapped.clone(), step]).await;
        fixture
            .guardian
            .decide(&wrapped, &fixture.metadata)
            .await
            .unwrap();
        fixture.guardian.ping().await.unwrap();
        let mut signed = Vec::new();
        for body in fixture.bodies() {
            match body {
                Value::Array(elements) => signed.extend(elements),
                single if single["method"] == crate::hooks::SYSTEM_PING => {
                    assert!(single["params"].get("nonce").is_none(), "{single}");
                }
                single => signed.push(single),
            }
        }
        assert_eq!(signed.len(), 3);
        let mut seen = HashSet::new();
        for request in &signed {
            let nonce = request["params"]["nonce"].as_str().expect("a nonce");
            assert_eq!(nonce.len(), 32, "{nonce}");
            assert!(
                nonce
                    .bytes()
                    .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
                "{nonce}"
            );
            assert!(seen.insert(nonce.to_owned()), "nonce reused: {nonce}");
            // The nonce is covered by the signature.
            let mut unsigned = request.clone();
            let signature = unsigned["params"]
                .as_object_mut()
                .unwrap()
                .remove("signature")
                .unwrap();
            sign_request(&mut unsigned, &fixture.transport.key, "k-unit").unwrap();
            assert_eq!(unsigned["params"]["signature"], signature);
        }
    }
}
