//! One signed exchange: sending a sealed request body, checking the
//! answer's signature, and how a failure along the way maps onto the
//! failure classes the relay acts on.

use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;

use super::request::RequestSigner;
use super::RemoteGuardian;
use crate::guardian::remote::json_view::JsonView;
use crate::guardian::remote::signing::{verify_signed, SessionKey, SignatureError, SignedEnvelope};
use crate::guardian::remote::transport::TransportError;
use crate::guardian::remote::wire::{codes, WireError};
use crate::guardian::GuardianError;
use crate::hooks::Metadata;
use crate::jsonrpc::BorrowedJson;

impl RemoteGuardian {
    /// Sends one body and returns the reply's bytes. With `session` set,
    /// a failure to connect marks that session for a re-handshake: the
    /// Guardian may be restarting.
    pub(super) async fn send(
        &self,
        body: Bytes,
        session: Option<&Metadata>,
    ) -> Result<Bytes, GuardianError> {
        self.transport.call(body).await.map_err(|err| {
            if let (Some(metadata), TransportError::Connect(_)) = (session, &err) {
                self.mark_unreachable(metadata);
            }
            GuardianError::Transport(err.to_string())
        })
    }

    /// Sends one body and parses the reply into a `Value`, for the
    /// handshake and pings: rare, and read by code that keeps parts of
    /// them.
    pub(super) async fn send_in(
        &self,
        body: Bytes,
        session: Option<&Metadata>,
    ) -> Result<Value, GuardianError> {
        let reply = self.send(body, session).await?;
        Ok(parse_reply(&reply)?.to_value())
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

/// Parses a reply once, borrowed from its bytes. A reply with a key twice
/// in any object is malformed: which of the two the Guardian meant, and
/// signed, cannot be known.
pub(super) fn parse_reply(bytes: &[u8]) -> Result<BorrowedJson<'_>, GuardianError> {
    BorrowedJson::parse(bytes).map_err(|err| GuardianError::Malformed(format!("not JSON: {err}")))
}

pub(super) fn error_code<V: JsonView>(reply: &V) -> Option<i64> {
    reply.member("error")?.member("code")?.as_i64()
}

/// Checks a reply's signature. A Guardian that could not authenticate us
/// answers unsigned -32004; that is a refusal, and it fails closed either way.
pub(super) fn authenticated<R: SignedEnvelope>(
    reply: &R,
    key: &SessionKey,
) -> Result<(), GuardianError> {
    match verify_signed(reply, key) {
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
