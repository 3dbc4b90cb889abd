//! One signed exchange: sending a sealed request body, checking the
//! answer's signature, and how a failure along the way maps onto the
//! failure classes the relay acts on.

use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;

use super::request::RequestSigner;
use super::RemoteGuardian;
use crate::guardian::remote::signing::{verify_response, SessionKey, SignatureError};
use crate::guardian::remote::transport::TransportError;
use crate::guardian::remote::wire::{codes, WireError};
use crate::guardian::GuardianError;
use crate::hooks::Metadata;

impl RemoteGuardian {
    /// Sends one body and parses the reply as JSON. With `session` set,
    /// a failure to connect marks that session for a re-handshake: the
    /// Guardian may be restarting.
    pub(super) async fn send_in(
        &self,
        body: Bytes,
        session: Option<&Metadata>,
    ) -> Result<Value, GuardianError> {
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

    /// What signs this session's requests under `key`.
    pub(super) fn signer<'a>(&'a self, key: &'a SessionKey) -> RequestSigner<'a> {
        RequestSigner {
            key,
            key_id: &self.settings.key_id,
            nonce: self.settings.nonce,
        }
    }

    /// Sends one sealed request body of a session and verifies the answer.
    pub(super) async fn exchange(
        &self,
        body: Vec<u8>,
        key: &SessionKey,
        metadata: &Metadata,
    ) -> Result<Value, GuardianError> {
        let reply = self.send_in(Bytes::from(body), Some(metadata)).await?;
        authenticated(&reply, key)?;
        Ok(reply)
    }
}

pub(super) fn error_code(reply: &Value) -> Option<i64> {
    reply.get("error")?.get("code")?.as_i64()
}

/// Checks a reply's signature. A Guardian that could not authenticate us
/// answers unsigned -32004; that is a refusal, and it fails closed either way.
pub(super) fn authenticated(reply: &Value, key: &SessionKey) -> Result<(), GuardianError> {
    match verify_response(reply, key) {
        Ok(()) => Ok(()),
        Err(SignatureError::Missing) if error_code(reply) == Some(codes::SIGNATURE_INVALID) => {
            Ok(())
        }
        Err(err) => Err(GuardianError::Signature(err.to_string())),
    }
}

/// Maps wire validation failures onto the failure classes the relay acts on.
pub(super) fn wire_error(err: WireError) -> GuardianError {
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

pub(super) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
