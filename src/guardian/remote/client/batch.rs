//! The hooks of one message as one JSON-RPC batch (§3), and what a
//! Guardian's answer to the array means for each hook.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use serde_json::Value;

use super::exchange::{authenticated, error_code, parse_reply};
use super::{RemoteGuardian, BODY_CAPACITY};
use crate::guardian::remote::json_view::JsonView;
use crate::guardian::remote::signing::SessionKey;
use crate::guardian::{BatchAnswer, GuardianError};
use crate::hooks::{HookRequest, Metadata};
use crate::jsonrpc::BorrowedJson;

impl RemoteGuardian {
    /// One batch exchange: every hook sealed as its own element, the array
    /// sent as one body, each answer found by its JSON-RPC id, verified and
    /// bound to its hook on its own.
    pub(super) async fn batch_exchange(
        &self,
        hooks: &[&HookRequest],
        metadata: &Metadata,
    ) -> BatchAnswer {
        if !self.accepts_batches() {
            return BatchAnswer::Unsupported;
        }
        let every = |err: GuardianError| BatchAnswer::Answers(vec![Err(err); hooks.len()]);
        if let Err(err) = self.rehandshake_if_needed(metadata).await {
            return every(err);
        }
        let (key, head) = self.session_key(metadata);
        let signer = self.signer(&key);
        let mut ids = Vec::with_capacity(hooks.len());
        let mut body = Vec::with_capacity(BODY_CAPACITY * hooks.len());
        body.push(b'[');
        for (index, hook) in hooks.iter().enumerate() {
            if index > 0 {
                body.push(b',');
            }
            let id = self.next_id();
            if let Err(err) = signer.write_hook(&mut body, hook, id, metadata, head.as_deref()) {
                return every(err);
            }
            ids.push(id);
        }
        body.push(b']');
        let bytes = match self.send(Bytes::from(body), Some(metadata)).await {
            Ok(bytes) => bytes,
            Err(err) => return every(err),
        };
        let reply = match parse_reply(&bytes) {
            Ok(reply) => reply,
            Err(err) => return every(err),
        };
        let elements = match &reply {
            BorrowedJson::Array(elements) => elements,
            single if refuses_batches(single) => {
                if self.batches_accepted.swap(false, Ordering::Relaxed) {
                    tracing::warn!(
                        transport = self.transport.name(),
                        "the Guardian does not accept JSON-RPC batches (-32600); \
                         hooks go one at a time from now on"
                    );
                }
                return BatchAnswer::Unsupported;
            }
            single => return every(batch_wide_failure(single, &key)),
        };
        let answers = hooks
            .iter()
            .zip(&ids)
            .map(|(hook, &id)| {
                let reply = answer_for(elements, id, &ids)?;
                authenticated(reply, &key)?;
                self.read_decision(reply, id, hook, metadata)
            })
            .collect();
        BatchAnswer::Answers(answers)
    }
}

/// A single -32600 error answering an array: the Guardian does not take
/// batches (§3). Accepted unsigned: such a Guardian answers before it
/// looks at any element, and believing a forged one only costs batching.
fn refuses_batches(reply: &BorrowedJson<'_>) -> bool {
    reply.as_object().is_some() && error_code(reply) == Some(crate::jsonrpc::codes::INVALID_REQUEST)
}

/// A single reply other than -32600 to a batch answers no element, so it
/// is every element's failure: the Guardian's error if it authenticates,
/// else an unauthenticated answer.
fn batch_wide_failure(reply: &BorrowedJson<'_>, key: &SessionKey) -> GuardianError {
    if let Err(err) = authenticated(reply, key) {
        return err;
    }
    match (error_code(reply), reply.member("error")) {
        (Some(code), Some(error)) => GuardianError::Refused {
            code,
            message: error
                .member("message")
                .and_then(JsonView::as_str)
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
fn answer_for<'r, 'a>(
    elements: &'r [BorrowedJson<'a>],
    id: u64,
    asked: &[u64],
) -> Result<&'r BorrowedJson<'a>, GuardianError> {
    let wanted = Value::from(id);
    let mut found = elements
        .iter()
        .filter(|e| e.member("id").is_some_and(|got| got.equals(&wanted)));
    match (found.next(), found.next()) {
        (Some(answer), None) => Ok(answer),
        (Some(_), Some(_)) => Err(GuardianError::Malformed(format!(
            "the batch reply answers id {id} more than once"
        ))),
        (None, _) => {
            let foreign = elements
                .iter()
                .filter_map(|e| e.member("id"))
                .find(|got| !got.is_null() && !asked.iter().any(|&a| got.as_u64() == Some(a)));
            Err(match foreign {
                Some(got) => GuardianError::Binding(format!(
                    "the batch reply has no answer for id {} but one for id {}, which was not asked",
                    id,
                    got.to_value()
                )),
                None => GuardianError::Malformed(format!(
                    "the batch reply has no answer for id {id}"
                )),
            })
        }
    }
}
