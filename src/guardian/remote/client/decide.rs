//! One hook decided on its own: its signed request carrying the session's
//! chain head, the exchange, and reading the decision it is answered with.

use bytes::Bytes;
use serde_json::Value;
use uuid::Uuid;

use super::exchange::{authenticated, parse_reply, wire_error};
use super::{RemoteGuardian, BODY_CAPACITY};
use crate::guardian::remote::wire::{self, Reply};
use crate::guardian::{Decision, GuardianError};
use crate::hooks::{HookRequest, Metadata};
use crate::jsonrpc::BorrowedJson;

impl RemoteGuardian {
    pub(super) async fn decide_exchange(
        &self,
        hook: &HookRequest,
        metadata: &Metadata,
    ) -> Result<Decision, GuardianError> {
        self.rehandshake_if_needed(metadata).await?;
        let (key, head) = self.session_key(metadata);
        let id = self.next_id();
        let mut body = Vec::with_capacity(BODY_CAPACITY);
        self.signer(&key)
            .write_hook(&mut body, hook, id, metadata, head.as_deref())?;
        let bytes = self.send(Bytes::from(body), Some(metadata)).await?;
        let reply = parse_reply(&bytes)?;
        authenticated(&reply, &key)?;
        self.read_decision(&reply, id, hook, metadata)
    }

    /// Reads an authenticated reply to `hook` (sent under JSON-RPC `id`),
    /// from the tree its signature was checked over, and remembers the
    /// chain head it publishes.
    pub(super) fn read_decision(
        &self,
        reply: &BorrowedJson<'_>,
        id: u64,
        hook: &HookRequest,
        metadata: &Metadata,
    ) -> Result<Decision, GuardianError> {
        // The id spelled on the stack: this runs for every decision.
        let mut spelling = Uuid::encode_buffer();
        let request_id = hook.request_id.hyphenated().encode_lower(&mut spelling);
        match wire::parse_decision(reply, &Value::from(id), request_id).map_err(wire_error)? {
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
