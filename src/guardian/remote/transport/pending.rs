//! The calls waiting for a reply on a pipelined stream, and the routing of
//! each reply to its caller.
//!
//! A caller registers before its request is written and holds a
//! [`Waiting`] until the reply comes. Dropping it (the caller's timeout
//! fired) removes the entry, so a late reply is dropped instead of reaching
//! some later call: cancelling one call never disturbs another.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use tokio::sync::oneshot;

use super::call_id::{leading_key, reply_ids, CallId, ReplyIds, Shape};
use super::error::TransportError;

type Reply = Result<Bytes, TransportError>;
type Key = (Shape, CallId);

/// The table of calls in flight on one stream.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    waiters: HashMap<Key, Waiter>,
    /// Registration order; picks the oldest call for a reply without an id.
    next_seq: u64,
    /// Set once the stream is gone; every later call fails with it.
    closed: Option<TransportError>,
}

#[derive(Debug)]
struct Waiter {
    seq: u64,
    reply: oneshot::Sender<Reply>,
}

/// One registered call: await [`Waiting::reply`]; drop it to give up.
#[derive(Debug)]
pub(crate) struct Waiting {
    pending: Arc<Pending>,
    key: Key,
    seq: u64,
    reply: oneshot::Receiver<Reply>,
}

impl Pending {
    /// Registers a call that will be answered under `shape` and `id`.
    pub(crate) fn register(
        self: &Arc<Self>,
        shape: Shape,
        id: CallId,
    ) -> Result<Waiting, TransportError> {
        let mut table = self.lock();
        if let Some(err) = &table.closed {
            return Err(err.clone());
        }
        let key = (shape, id);
        if table.waiters.contains_key(&key) {
            return Err(TransportError::DuplicateId(key.1.to_string()));
        }
        let seq = table.next_seq;
        table.next_seq += 1;
        let (tx, rx) = oneshot::channel();
        table.waiters.insert(key.clone(), Waiter { seq, reply: tx });
        Ok(Waiting {
            pending: Arc::clone(self),
            key,
            seq,
            reply: rx,
        })
    }

    /// Hands a reply to the call it answers. A reply nobody waits for (its
    /// caller gave up, or the Guardian invented an id) is dropped.
    ///
    /// A reply that leads with the id of a waiting call (a batch: its first
    /// element) goes to it as it is, unparsed; the caller parses it in full
    /// anyway, and fails at once if the rest is not JSON. Any other is
    /// peeked for its ids, and dropped (its caller times out) if it has
    /// none that can be read.
    pub(crate) fn deliver(&self, body: Bytes) {
        let leading = leading_key(&body).and_then(|(shape, id)| self.lock().remove(shape, &id));
        if let Some(waiter) = leading {
            let _ = waiter.reply.send(Ok(body));
            return;
        }
        let Some(ids) = reply_ids(&body) else {
            tracing::warn!(
                bytes = body.len(),
                "dropping a Guardian reply that is not JSON-RPC"
            );
            return;
        };
        let Some(waiter) = self.lock().take_for(&ids) else {
            tracing::debug!(?ids, "dropping a Guardian reply no call is waiting for");
            return;
        };
        // The caller may have just given up; then nobody needs the reply.
        let _ = waiter.reply.send(Ok(body));
    }

    /// Fails every call now waiting, without closing the stream (a reply
    /// was lost but framing is intact, and any of them may have been its
    /// target).
    pub(crate) fn fail_waiting(&self, err: &TransportError) {
        let waiters = std::mem::take(&mut self.lock().waiters);
        for waiter in waiters.into_values() {
            let _ = waiter.reply.send(Err(err.clone()));
        }
    }

    /// Fails every waiting call with `err`, and every later one at once.
    pub(crate) fn close(&self, err: TransportError) {
        let waiters = {
            let mut table = self.lock();
            table.closed.get_or_insert(err.clone());
            std::mem::take(&mut table.waiters)
        };
        for waiter in waiters.into_values() {
            let _ = waiter.reply.send(Err(err.clone()));
        }
    }

    /// Why the stream is closed, if it is.
    pub(crate) fn closed(&self) -> Option<TransportError> {
        self.lock().closed.clone()
    }

    fn forget(&self, key: &Key, seq: u64) {
        let mut table = self.lock();
        // Only our own entry: the id may since have been reused.
        if table.waiters.get(key).is_some_and(|w| w.seq == seq) {
            table.waiters.remove(key);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        // The table stays consistent across a panic (single inserts and
        // removes), so a poisoned lock is still usable.
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Table {
    /// Finds the call a reply answers and removes it.
    ///
    /// A reply with no usable id cannot be matched exactly; JSON-RPC sends
    /// one when the request could not be read, and ACS when a Guardian
    /// without batch support refuses an array (`-32600`). It goes to the
    /// oldest waiting batch, else the oldest call, which is the request a
    /// Guardian answering in order was looking at.
    fn take_for(&mut self, ids: &ReplyIds) -> Option<Waiter> {
        match ids {
            ReplyIds::Single(Some(id)) => self.remove(Shape::Single, id),
            ReplyIds::Single(None) => self
                .oldest(Shape::Batch)
                .or_else(|| self.oldest(Shape::Single)),
            // Elements may come in any order (JSON-RPC 2.0 §6), so any id
            // of the batch identifies it.
            ReplyIds::Batch(ids) if ids.iter().any(Option::is_some) => ids
                .iter()
                .flatten()
                .find_map(|id| self.remove(Shape::Batch, id)),
            ReplyIds::Batch(_) => self.oldest(Shape::Batch),
        }
    }

    fn remove(&mut self, shape: Shape, id: &CallId) -> Option<Waiter> {
        self.waiters.remove(&(shape, id.clone()))
    }

    fn oldest(&mut self, shape: Shape) -> Option<Waiter> {
        let key = self
            .waiters
            .iter()
            .filter(|((s, _), _)| *s == shape)
            .min_by_key(|(_, waiter)| waiter.seq)
            .map(|(key, _)| key.clone())?;
        self.waiters.remove(&key)
    }
}

impl Waiting {
    /// Waits for the reply, or for the stream's failure.
    pub(crate) async fn reply(mut self) -> Reply {
        match (&mut self.reply).await {
            Ok(reply) => reply,
            // Only reachable if the table itself went away.
            Err(_) => Err(TransportError::Closed("the transport was shut down".into())),
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.pending.forget(&self.key, self.seq);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u32) -> CallId {
        CallId::Number(n.to_string())
    }

    fn reply(text: &'static str) -> Bytes {
        Bytes::from_static(text.as_bytes())
    }

    #[tokio::test]
    async fn replies_reach_their_callers_in_any_order() {
        let pending = Arc::new(Pending::default());
        let first = pending.register(Shape::Single, id(1)).unwrap();
        let second = pending.register(Shape::Single, id(2)).unwrap();
        pending.deliver(reply(r#"{"id":2,"result":"b"}"#));
        pending.deliver(reply(r#"{"id":1,"result":"a"}"#));
        assert_eq!(
            first.reply().await.unwrap(),
            reply(r#"{"id":1,"result":"a"}"#)
        );
        assert_eq!(
            second.reply().await.unwrap(),
            reply(r#"{"id":2,"result":"b"}"#)
        );
    }

    #[tokio::test]
    async fn a_batch_reply_matches_by_any_element_id() {
        let pending = Arc::new(Pending::default());
        let single = pending.register(Shape::Single, id(1)).unwrap();
        let batch = pending.register(Shape::Batch, id(1)).unwrap();
        pending.deliver(reply(r#"[{"id":2},{"id":1}]"#));
        assert_eq!(
            batch.reply().await.unwrap(),
            reply(r#"[{"id":2},{"id":1}]"#)
        );
        pending.deliver(reply(r#"{"id":1}"#));
        assert_eq!(single.reply().await.unwrap(), reply(r#"{"id":1}"#));
    }

    #[tokio::test]
    async fn a_null_id_refusal_goes_to_the_oldest_batch() {
        let pending = Arc::new(Pending::default());
        let _single = pending.register(Shape::Single, id(1)).unwrap();
        let batch = pending.register(Shape::Batch, id(2)).unwrap();
        pending.deliver(reply(r#"{"error":{"code":-32600},"id":null}"#));
        assert!(batch.reply().await.unwrap().starts_with(b"{\"error\""));
    }

    #[tokio::test]
    async fn a_reply_leading_with_a_waiting_id_is_handed_over_unparsed() {
        let pending = Arc::new(Pending::default());
        let batch = pending.register(Shape::Batch, id(1)).unwrap();
        let single = pending.register(Shape::Single, id(2)).unwrap();
        pending.deliver(reply(r#"[{"id":1,"result":{}},{"id":3"#));
        assert_eq!(
            batch.reply().await.unwrap(),
            reply(r#"[{"id":1,"result":{}},{"id":3"#)
        );
        pending.deliver(reply(r#"{"id":2,"result":"#));
        assert_eq!(single.reply().await.unwrap(), reply(r#"{"id":2,"result":"#));
    }

    #[test]
    fn a_malformed_reply_the_walk_cannot_route_is_dropped() {
        let pending = Arc::new(Pending::default());
        let mut waiting = pending.register(Shape::Single, id(1)).unwrap();
        pending.deliver(reply(r#"{"result":"cut,"id":1}"#));
        assert!(waiting.reply.try_recv().is_err());
    }

    #[test]
    fn a_duplicate_id_in_flight_is_refused() {
        let pending = Arc::new(Pending::default());
        let _first = pending.register(Shape::Single, id(1)).unwrap();
        let err = pending.register(Shape::Single, id(1)).unwrap_err();
        assert!(matches!(err, TransportError::DuplicateId(id) if id == "1"));
    }

    #[test]
    fn a_dropped_call_frees_its_id_and_its_late_reply_is_dropped() {
        let pending = Arc::new(Pending::default());
        drop(pending.register(Shape::Single, id(1)).unwrap());
        pending.deliver(reply(r#"{"id":1}"#));
        let again = pending.register(Shape::Single, id(1));
        assert!(again.is_ok());
    }

    #[tokio::test]
    async fn closing_fails_waiting_and_later_calls() {
        let pending = Arc::new(Pending::default());
        let waiting = pending.register(Shape::Single, id(1)).unwrap();
        pending.close(TransportError::Closed("gone".into()));
        assert!(matches!(waiting.reply().await, Err(TransportError::Closed(m)) if m == "gone"));
        let later = pending.register(Shape::Single, id(2)).unwrap_err();
        assert!(matches!(later, TransportError::Closed(m) if m == "gone"));
    }
}
