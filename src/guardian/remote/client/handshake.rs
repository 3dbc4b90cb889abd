//! The ACS handshake (`handshake/hello`) that opens every session, and
//! `system/ping`, the unsigned liveness check.

use std::num::NonZeroU64;

use bytes::Bytes;
use serde_json::{json, Value};
use uuid::Uuid;

use super::exchange::{millis, wire_error};
use super::{RemoteGuardian, BODY_CAPACITY};
use crate::guardian::remote::wire;
use crate::guardian::{GuardianError, Negotiated};
use crate::hooks::{HookRequest, Metadata, PLATFORM};

impl RemoteGuardian {
    /// `system/ping` (unsigned, never chained): is the Guardian answering?
    ///
    /// A liveness probe belongs to no agent session, yet it carries the
    /// metadata every envelope does (a fresh session id, the platform and
    /// its version), so a Guardian that checks envelopes strictly answers
    /// it like any other.
    pub async fn ping(&self) -> Result<(), GuardianError> {
        let id = self.next_id();
        let metadata = Metadata {
            agent_id: PLATFORM.to_owned(),
            session_id: Uuid::new_v4(),
            environment: None,
            user: None,
        };
        let hook = HookRequest::new(crate::hooks::SYSTEM_PING, json!({ "echo": PLATFORM }), None);
        let request_id = hook.request_id.to_string();
        let envelope = hook.envelope(id, &metadata);
        let body = Bytes::from(envelope.to_string());
        let reply = tokio::time::timeout(self.settings.timeout, self.send_in(body, None))
            .await
            .map_err(|_| GuardianError::Timeout(millis(self.settings.timeout)))??;
        wire::parse_ping(&reply, &Value::from(id), &request_id)
            .map(|_| ())
            .map_err(wire_error)
    }

    pub(super) async fn hello_exchange(
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
        let mut body = Vec::with_capacity(BODY_CAPACITY);
        self.signer(&key)
            .write_hook(&mut body, &hook, id, metadata, None)?;
        let reply =
            tokio::time::timeout(self.settings.timeout, self.exchange(body, &key, metadata))
                .await
                .map_err(|_| GuardianError::Timeout(millis(self.settings.timeout)))??;
        wire::check_reply_id(&reply, &Value::from(id)).map_err(wire_error)?;
        let hello = wire::parse_server_hello(&reply).map_err(wire_error)?;
        Ok(hello.negotiated(self.settings.local_posture))
    }
}

/// `max_payload_size_bytes` declared in the ClientHello: the proxy's own
/// message limit default.
const MAX_PAYLOAD_BYTES: NonZeroU64 = match NonZeroU64::new(16 * 1024 * 1024) {
    Some(limit) => limit,
    None => NonZeroU64::MIN,
};
