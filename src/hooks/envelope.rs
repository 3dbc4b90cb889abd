//! The ACS request envelope (§3): what every hook carries.

use std::borrow::Cow;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde_json::{json, Map, Value};
use uuid::fmt::Hyphenated;
use uuid::Uuid;

use super::clock::HookTime;
use super::identity::Identity;
use super::payload::HookPayload;
use crate::jcs::{self, HashSink, HexDigest, JcsError, Sink};
use crate::telemetry::Trace;

/// The ACS version this proxy speaks.
pub const ACS_VERSION: &str = "0.1.0";

/// `params.metadata.platform`.
pub const PLATFORM: &str = "acs-proxy";

/// `params.metadata`: who the agent is and which session this is. Guardians
/// key policy on these, so every field the proxy knows is filled.
#[derive(Debug, Clone, PartialEq)]
pub struct Metadata {
    /// The agent (configured, else the client's `clientInfo.name`).
    pub agent_id: String,
    /// A UUID per MCP session.
    pub session_id: Uuid,
    /// `development` | `staging` | `production`, when configured.
    pub environment: Option<String>,
    /// Who is calling: `metadata.user_context` and `params.tenant_id`.
    pub user: Option<Arc<Identity>>,
}

impl Metadata {
    /// `params.tenant_id`: the caller's tenant, when it has one.
    pub fn tenant(&self) -> Option<&str> {
        self.user.as_deref().and_then(|user| user.tenant.as_deref())
    }

    /// `"acs_version":…,"metadata":{"agent_id":…` through `"session_id":…`
    /// in canonical (RFC 8785) member order, the metadata object left open
    /// for what follows `session_id`: the part of every hook's `params`
    /// that the writers streaming an envelope's canonical form share.
    pub fn write_canonical_head<S: Sink>(&self, sink: &mut S) {
        let mut uuid = Uuid::encode_buffer();
        sink.put(b"\"acs_version\":");
        jcs::write_str(sink, ACS_VERSION);
        sink.put(b",\"metadata\":{\"agent_id\":");
        jcs::write_str(sink, &self.agent_id);
        if let Some(environment) = &self.environment {
            sink.put(b",\"environment\":");
            jcs::write_str(sink, environment);
        }
        sink.put(b",\"platform\":");
        jcs::write_str(sink, PLATFORM);
        sink.put(b",\"platform_version\":");
        jcs::write_str(sink, env!("CARGO_PKG_VERSION"));
        sink.put(b",\"session_id\":");
        jcs::write_str(
            sink,
            Hyphenated::from_uuid(self.session_id).encode_lower(&mut uuid),
        );
    }

    pub(crate) fn to_value(&self) -> Value {
        let mut map = Map::new();
        map.insert("agent_id".into(), Value::from(self.agent_id.as_str()));
        map.insert(
            "session_id".into(),
            Value::from(self.session_id.to_string()),
        );
        map.insert("platform".into(), Value::from(PLATFORM));
        map.insert(
            "platform_version".into(),
            Value::from(env!("CARGO_PKG_VERSION")),
        );
        if let Some(environment) = &self.environment {
            map.insert("environment".into(), Value::from(environment.as_str()));
        }
        if let Some(user) = &self.user {
            map.insert("user_context".into(), user.user_context());
        }
        Value::Object(map)
    }
}

/// A hook's ACS method. Static for the step methods and the wrapped known
/// MCP methods (see [`super::mcp::wrapped_method`]), copied only for
/// others: every proxied call makes several hooks, and a `String` each was
/// an allocation per hook.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct HookMethod(Cow<'static, str>);

impl HookMethod {
    /// The method's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The method as an audit record names it: shared with this hook when
    /// static, so a record costs no lookup and no copy.
    pub fn to_cow(&self) -> Cow<'static, str> {
        self.0.clone()
    }
}

/// Read as the `&str` the field was when it was a `String`.
impl Deref for HookMethod {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for HookMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for HookMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

/// A method the proxy names by a constant, kept without a copy.
impl From<&'static str> for HookMethod {
    fn from(method: &'static str) -> Self {
        Self(Cow::Borrowed(method))
    }
}

/// A method read at run time (a hook file's).
impl From<String> for HookMethod {
    fn from(method: String) -> Self {
        Self(Cow::Owned(method))
    }
}

impl PartialEq<str> for HookMethod {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<&str> for HookMethod {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

/// One hook invocation: a method, a fresh `request_id`, when it fired, and
/// the payload. The tool name rides along for policy matching only.
#[derive(Debug, Clone)]
pub struct HookRequest {
    /// The ACS method, e.g. `protocols/MCP/tools/call` or `steps/toolCallRequest`.
    pub method: HookMethod,
    /// Unique per hook invocation; the audit entry's `step_id`.
    pub request_id: Uuid,
    /// When the hook fired (RFC 3339).
    pub timestamp: HookTime,
    /// The method-specific payload; shared, because the wrapped hook's
    /// payload is the message itself and the tool steps' are read from it,
    /// and copying it per hook was a measurable share of the per-call cost.
    pub payload: HookPayload,
    /// The tool this hook concerns, if any (not sent on the wire).
    pub tool: Option<Arc<str>>,
    /// The tool's name as the agent of a virtual server called it
    /// (`everything__echo`), when it differs from `tool` (not sent on the
    /// wire): rules may select on either.
    pub called_as: Option<Arc<str>>,
    /// The span of this step (ACS-Trace), its decisions' events go on;
    /// off unless tracing is on and the caller traced it (not sent on the
    /// wire).
    pub trace: Trace,
}

/// The canonical `params` of a session's hooks up to their payload
/// (`acs_version` and `metadata`, which sort first and are the same for
/// every hook of a session), already fed to SHA-256. A session makes it
/// once, so each hook's `request_hash` only hashes what is its own.
#[derive(Clone)]
pub struct ParamsHead {
    sink: HashSink,
}

impl ParamsHead {
    /// The head of `params` for hooks carrying `metadata`.
    pub fn new(metadata: &Metadata) -> Self {
        let mut sink = HashSink::default();
        sink.put(b"{");
        metadata.write_canonical_head(&mut sink);
        if let Some(user) = &metadata.user {
            user.write_canonical_user_context(&mut sink);
        }
        sink.put(b"},\"payload\":");
        // Whole blocks are compressed now, once, rather than per hook.
        sink.absorb();
        Self { sink }
    }
}

impl std::fmt::Debug for ParamsHead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ParamsHead")
    }
}

impl HookRequest {
    /// A hook firing now with a fresh request id.
    pub fn new(
        method: impl Into<HookMethod>,
        payload: impl Into<HookPayload>,
        tool: Option<Arc<str>>,
    ) -> Self {
        Self {
            method: method.into(),
            request_id: Uuid::new_v4(),
            timestamp: HookTime::now(),
            payload: payload.into(),
            tool,
            called_as: None,
            trace: Trace::off(),
        }
    }

    /// The same hook, naming the tool as the agent of a virtual server called it.
    pub fn with_called_as(mut self, called_as: Option<Arc<str>>) -> Self {
        self.called_as = called_as;
        self
    }

    /// This hook with its step span (see [`crate::telemetry::spans::step`]).
    pub fn traced(mut self, trace: Trace) -> Self {
        self.trace = trace;
        self
    }

    /// The envelope's `params` (§3): the object `request_hash` is computed over.
    pub fn params(&self, metadata: &Metadata) -> Value {
        let mut params = json!({
            "acs_version": ACS_VERSION,
            "request_id": self.request_id.to_string(),
            "timestamp": self.timestamp.as_str(),
            "metadata": metadata.to_value(),
            "payload": self.payload.tree(),
        });
        if let Some(tenant) = metadata.tenant() {
            params["tenant_id"] = Value::from(tenant);
        }
        params
    }

    /// The lowercase hex SHA-256 of the JCS form of [`Self::params`]: the
    /// §8.1 `request_hash`, streamed into the hasher without building the
    /// `params` object or copying the payload.
    pub fn params_digest(&self, metadata: &Metadata) -> String {
        self.params_digest_after(&ParamsHead::new(metadata), metadata)
            .as_str()
            .to_owned()
    }

    /// [`Self::params_digest`], continuing from `head`, the hashed part of
    /// `params` every hook of the session shares; `head` must have been
    /// made from `metadata`.
    pub fn params_digest_after(&self, head: &ParamsHead, metadata: &Metadata) -> HexDigest {
        let mut sink = head.sink.clone();
        match self.write_canonical_params_tail(&mut sink, metadata) {
            Ok(()) => sink.finalize_digest(),
            // No canonical form (a number beyond the double range): the
            // same fallback digest as for the built object.
            Err(_) => jcs::value_hex_digest(&self.params(metadata)),
        }
    }

    /// `params` in canonical (sorted, ASCII keys) member order from
    /// `payload` on; [`ParamsHead`] writes what comes before.
    fn write_canonical_params_tail<S: Sink>(
        &self,
        sink: &mut S,
        metadata: &Metadata,
    ) -> Result<(), JcsError> {
        let mut uuid = Uuid::encode_buffer();
        self.payload.write_canonical(sink)?;
        sink.put(b",\"request_id\":");
        jcs::write_str(
            sink,
            Hyphenated::from_uuid(self.request_id).encode_lower(&mut uuid),
        );
        if let Some(tenant) = metadata.tenant() {
            sink.put(b",\"tenant_id\":");
            jcs::write_str(sink, tenant);
        }
        sink.put(b",\"timestamp\":");
        jcs::write_str(sink, &self.timestamp);
        sink.put(b"}");
        Ok(())
    }

    /// The whole JSON-RPC request envelope, as a remote Guardian receives it.
    pub fn envelope(&self, jsonrpc_id: u64, metadata: &Metadata) -> Value {
        json!({
            "jsonrpc": "2.0",
            "id": jsonrpc_id,
            "method": self.method.as_str(),
            "params": self.params(metadata),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::identity::IdentityDescriptor;

    #[test]
    fn params_digest_is_the_digest_of_params() {
        let user = Arc::new(Identity {
            user_id: "alice \u{e9}".into(),
            roles: vec!["b".into(), "a\"".into()],
            tenant: Some("acme".into()),
            descriptor: IdentityDescriptor::ApiToken {
                name: "alice".into(),
            },
        });
        let no_roles = Arc::new(Identity {
            roles: Vec::new(),
            tenant: None,
            ..(*user).clone()
        });
        let cases = [
            (None, None),
            (Some("production".to_owned()), Some(user)),
            (None, Some(no_roles)),
        ];
        for (environment, user) in cases {
            let metadata = Metadata {
                agent_id: "agent \"x\"".into(),
                session_id: Uuid::new_v4(),
                environment,
                user,
            };
            let payload = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"z": 1.50, "a": "\u{1f600}"}}});
            let hook = HookRequest::new("protocols/MCP/tools/call", payload, None);
            assert_eq!(
                hook.params_digest(&metadata),
                jcs::value_digest(&hook.params(&metadata))
            );
        }
        let metadata = Metadata {
            agent_id: "a".into(),
            session_id: Uuid::nil(),
            environment: None,
            user: None,
        };
        let hostile: Value = serde_json::from_str(r#"{"n": 1e400}"#).unwrap();
        let hook = HookRequest::new("steps/toolCallRequest", hostile, None);
        assert_eq!(
            hook.params_digest(&metadata),
            jcs::value_digest(&hook.params(&metadata))
        );
    }

    #[test]
    fn digest_after_a_shared_head_is_the_digest() {
        let user = Arc::new(Identity {
            user_id: "bob".into(),
            roles: vec!["r".into()],
            tenant: Some("t".into()),
            descriptor: IdentityDescriptor::ApiToken { name: "bob".into() },
        });
        for (environment, user) in [(None, None), (Some("staging".to_owned()), Some(user))] {
            let metadata = Metadata {
                agent_id: "a".repeat(300),
                session_id: Uuid::new_v4(),
                environment,
                user,
            };
            let head = ParamsHead::new(&metadata);
            for payload in [
                json!({}),
                json!({"k": "v".repeat(500)}),
                serde_json::from_str(r#"{"n": 1e400}"#).unwrap(),
            ] {
                let hook = HookRequest::new("steps/toolCallRequest", payload, None);
                assert_eq!(
                    hook.params_digest_after(&head, &metadata).as_str(),
                    jcs::value_digest(&hook.params(&metadata))
                );
            }
        }
    }

    #[test]
    fn envelope_carries_required_fields() {
        let metadata = Metadata {
            agent_id: "agent".into(),
            session_id: Uuid::new_v4(),
            environment: None,
            user: None,
        };
        let hook = HookRequest::new("steps/sessionStart", json!({}), None);
        let envelope = hook.envelope(1, &metadata);
        let params = &envelope["params"];
        assert_eq!(params["acs_version"], "0.1.0");
        assert_eq!(params["metadata"]["agent_id"], "agent");
        assert_eq!(params["metadata"]["platform"], "acs-proxy");
        assert!(Uuid::parse_str(params["request_id"].as_str().unwrap()).is_ok());
    }
}
