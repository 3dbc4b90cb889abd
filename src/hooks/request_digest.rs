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
//! A waiting digest keeps its message in memory, and with it the read
//! buffer the message was cut from. So a digest waits only while few do:
//! at most [`WAITING_AT_MOST`] in the whole process, each of a message no
//! longer than [`DEFER_AT_MOST`] bytes. When the writer falls behind (many
//! calls in flight) hooks are digested at once, as they would be without
//! the writer, which costs the same CPU; the writer keeps up whenever
//! calls leave it time, which is when taking the digest off the message's
//! path shortens the call.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::envelope::{HookRequest, Metadata, ParamsHead};
use crate::jcs::HexDigest;
use crate::telemetry::Trace;

/// The longest message whose hooks' digests may wait for the audit writer.
pub const DEFER_AT_MOST: usize = 8 * 1024;

/// The most hooks whose digests wait at once, in the whole process: four
/// hooks per call, so eight calls' worth. A call that comes alone (the
/// case waiting shortens) needs four; more waiting means the writer is
/// behind, where waiting saves nothing and holds memory.
pub const WAITING_AT_MOST: usize = 32;

/// The process's count of waiting digests.
static WAITING: Waiting = Waiting::new(WAITING_AT_MOST);

/// A bounded count of waiting digests.
struct Waiting {
    count: AtomicUsize,
    most: usize,
}

impl Waiting {
    const fn new(most: usize) -> Self {
        Self {
            count: AtomicUsize::new(0),
            most,
        }
    }

    /// A place for one more waiting digest, if there is one.
    fn enter(&'static self) -> Option<WaitingPlace> {
        self.count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |count| {
                (count < self.most).then_some(count + 1)
            })
            .ok()
            .map(|_| WaitingPlace(self))
    }
}

/// One waiting digest's place, given back when the digest is dropped.
struct WaitingPlace(&'static Waiting);

impl Drop for WaitingPlace {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, Ordering::AcqRel);
    }
}

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

    /// `hook`'s `request_hash`, kept to be taken when its entry is linked;
    /// taken now when its payload is not read from a short message or
    /// when too many digests wait already.
    pub fn digest_later(self: &Arc<Self>, hook: &HookRequest) -> RequestDigest {
        self.digest_later_within(hook, &WAITING)
    }

    fn digest_later_within(
        self: &Arc<Self>,
        hook: &HookRequest,
        waiting: &'static Waiting,
    ) -> RequestDigest {
        let short = hook
            .payload
            .message_len()
            .is_some_and(|len| len <= DEFER_AT_MOST);
        match short.then(|| waiting.enter()).flatten() {
            Some(place) => RequestDigest::Pending(Box::new(Pending {
                digester: Arc::clone(self),
                hook: without_span(hook),
                _place: place,
            })),
            None => RequestDigest::Known(self.digest(hook)),
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
pub enum RequestDigest {
    /// Already taken.
    Known(HexDigest),
    /// To be taken from the hook, which shares its payload with the
    /// message it came from (boxed: most records carry none).
    Pending(Box<Pending>),
}

/// A digest waiting to be taken.
pub struct Pending {
    digester: Arc<ParamsDigester>,
    hook: HookRequest,
    _place: WaitingPlace,
}

impl RequestDigest {
    /// The digest, taken now if it was pending.
    pub fn digest(&self) -> HexDigest {
        match self {
            Self::Known(digest) => *digest,
            Self::Pending(pending) => pending.digester.digest(&pending.hook),
        }
    }
}

/// A copy is taken now: a waiting place belongs to one record.
impl Clone for RequestDigest {
    fn clone(&self) -> Self {
        Self::Known(self.digest())
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
            Self::Pending(pending) => write!(f, "Pending({})", pending.hook.request_id),
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

    /// A count of its own, so tests running in parallel do not share one.
    fn waiting(most: usize) -> &'static Waiting {
        Box::leak(Box::new(Waiting::new(most)))
    }

    #[test]
    fn a_pending_digest_is_the_digest_taken_now() {
        let digester = digester();
        let hook = message_hook("hello");
        let later = digester.digest_later_within(&hook, waiting(1));
        assert!(matches!(later, RequestDigest::Pending(_)));
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
            let digest = digester.digest_later_within(&hook, waiting(1));
            assert_eq!(digest, RequestDigest::Known(digester.digest(&hook)));
            assert!(matches!(digest, RequestDigest::Known(_)));
        }
    }

    #[test]
    fn no_more_digests_wait_than_the_bound_and_places_come_back() {
        let digester = digester();
        let hook = message_hook("hello");
        let waiting = waiting(2);
        let first = digester.digest_later_within(&hook, waiting);
        let second = digester.digest_later_within(&hook, waiting);
        let third = digester.digest_later_within(&hook, waiting);
        assert!(matches!(first, RequestDigest::Pending(_)));
        assert!(matches!(second, RequestDigest::Pending(_)));
        assert!(matches!(third, RequestDigest::Known(_)));
        assert_eq!(third, first);
        let copy = first.clone();
        assert!(matches!(copy, RequestDigest::Known(_)));
        drop(first);
        let again = digester.digest_later_within(&hook, waiting);
        assert!(matches!(again, RequestDigest::Pending(_)));
        drop((second, again));
        assert_eq!(waiting.count.load(Ordering::Acquire), 0);
    }
}
