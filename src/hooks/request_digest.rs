//! A hook's §8.1 `request_hash`, taken where its audit entry is linked.
//!
//! The digest covers the hook's whole `params`, but only its request id,
//! timestamp and payload are its own; the rest is the session's
//! [`ParamsHead`], hashed once. With `fsync = "batch"` or `"never"` the
//! audit writer links an entry after its message has moved on, so the
//! digest is taken there, off the message's path, from the hook as its
//! digest reads it ([`RequestDigest::Pending`]). With `"always"` the
//! appender links its own entry, so the digest is still taken before the
//! message moves.
//!
//! A payload read from a message longer than [`DEFER_AT_MOST`] bytes is
//! digested at once instead: a queued entry would keep that whole message
//! in memory until the writer reaches it, and hashing it is then the
//! larger cost anyway.

use std::fmt;
use std::sync::Arc;

use super::envelope::{HookRequest, Metadata, ParamsHead};
use crate::jcs::HexDigest;
use crate::telemetry::Trace;

/// The longest message whose hooks' digests wait for the audit writer: a
/// full audit queue (4,096 entries) then holds at most 32 MiB of them.
pub const DEFER_AT_MOST: usize = 8 * 1024;

/// What every hook of one session shares in its `request_hash`: the
/// metadata its `params` carry and their head, already hashed.
pub struct ParamsDigester {
    metadata: Metadata,
    head: ParamsHead,
}

impl ParamsDigester {
    /// The digester for hooks carrying `metadata`.
    pub fn new(metadata: Metadata) -> Self {
        let head = ParamsHead::new(&metadata);
        Self { metadata, head }
    }

    /// The metadata the hooks carry.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// `hook`'s `request_hash`, now.
    pub fn digest(&self, hook: &HookRequest) -> HexDigest {
        hook.params_digest_after(&self.head, &self.metadata)
    }

    /// `hook`'s `request_hash`: taken now when its payload is read from a
    /// long message, otherwise kept to be taken when its entry is linked.
    pub fn digest_later(self: &Arc<Self>, hook: &HookRequest) -> RequestDigest {
        match hook.payload.message_len() {
            Some(len) if len <= DEFER_AT_MOST => RequestDigest::Pending {
                digester: Arc::clone(self),
                hook: Box::new(without_span(hook)),
            },
            _ => RequestDigest::Known(self.digest(hook)),
        }
    }
}

impl fmt::Debug for ParamsDigester {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ParamsDigester")
            .field("metadata", &self.metadata)
            .finish_non_exhaustive()
    }
}

/// `hook` as its digest reads it. Its span stays behind: a queued entry
/// holding it must not keep the step's span open.
fn without_span(hook: &HookRequest) -> HookRequest {
    HookRequest {
        method: hook.method.clone(),
        request_id: hook.request_id,
        timestamp: hook.timestamp.clone(),
        payload: hook.payload.clone(),
        tool: None,
        called_as: None,
        trace: Trace::off(),
    }
}

/// An audit record's `request_hash`: known, or taken when it is written.
#[derive(Clone)]
pub enum RequestDigest {
    /// Already taken.
    Known(HexDigest),
    /// To be taken from the hook, which shares its payload with the
    /// message it came from.
    Pending {
        /// The session's shared part.
        digester: Arc<ParamsDigester>,
        /// The hook (boxed: a record carries one, and most are small).
        hook: Box<HookRequest>,
    },
}

impl RequestDigest {
    /// The digest, taken now if it was pending.
    pub fn digest(&self) -> HexDigest {
        match self {
            Self::Known(digest) => *digest,
            Self::Pending { digester, hook } => digester.digest(hook),
        }
    }
}

impl From<HexDigest> for RequestDigest {
    fn from(digest: HexDigest) -> Self {
        Self::Known(digest)
    }
}

/// Two digests are equal when their values are, taken or not.
impl PartialEq for RequestDigest {
    fn eq(&self, other: &Self) -> bool {
        self.digest() == other.digest()
    }
}

impl fmt::Debug for RequestDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Known(digest) => write!(f, "Known({digest:?})"),
            Self::Pending { hook, .. } => write!(f, "Pending({})", hook.request_id),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use uuid::Uuid;

    use super::*;
    use crate::jcs;
    use crate::jsonrpc::MessageTree;

    fn digester() -> Arc<ParamsDigester> {
        Arc::new(ParamsDigester::new(Metadata {
            agent_id: "agent".into(),
            session_id: Uuid::new_v4(),
            environment: Some("staging".into()),
            user: None,
        }))
    }

    fn message_hook(text: &str) -> HookRequest {
        let line = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": text}}})
        .to_string();
        let tree = MessageTree::parse(bytes::Bytes::from(line)).unwrap();
        HookRequest::new("protocols/MCP/tools/call", Arc::new(tree), None)
    }

    #[test]
    fn a_pending_digest_is_the_digest_taken_now() {
        let digester = digester();
        let hook = message_hook("hello");
        let later = digester.digest_later(&hook);
        assert!(matches!(later, RequestDigest::Pending { .. }));
        let expected = jcs::value_digest(&hook.params(digester.metadata()));
        assert_eq!(later.digest().as_str(), expected);
        assert_eq!(later, RequestDigest::Known(digester.digest(&hook)));
    }

    #[test]
    fn long_messages_and_built_trees_are_digested_at_once() {
        let digester = digester();
        let long = message_hook(&"x".repeat(DEFER_AT_MOST));
        let built = HookRequest::new("steps/sessionStart", json!({"a": 1}), None);
        for hook in [long, built] {
            let digest = digester.digest_later(&hook);
            assert_eq!(digest, RequestDigest::Known(digester.digest(&hook)));
            assert!(matches!(digest, RequestDigest::Known(_)));
        }
    }
}
