//! JSON-RPC batches (MCP 2025-03-26) on a virtual server: each member is
//! routed as if it had come alone, to whichever upstream it names, and the
//! replies to the batch's requests are gathered and sent back as one array
//! once the last has come.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde_json::{json, Value};

use crate::jsonrpc::codes;

/// The batches whose replies are still being gathered.
#[derive(Debug, Default)]
pub(super) struct Batches {
    /// How many batches are open, so that replies outside any batch pass
    /// without taking the lock.
    open: AtomicUsize,
    gathering: Mutex<Gathering>,
}

#[derive(Debug, Default)]
struct Gathering {
    next: u64,
    /// A request's id (as JSON text) → the batch waiting for its reply.
    waiting: HashMap<String, u64>,
    /// Each open batch: the replies still expected, and those gathered.
    batches: HashMap<u64, (usize, Vec<Value>)>,
}

/// What became of a message on its way to the agent.
#[derive(Debug, PartialEq)]
pub(super) enum Gathered {
    /// It answers no request of an open batch: send it as it is.
    Alone,
    /// It was kept for its batch, which still waits for others.
    Held,
    /// It completed its batch: send this array instead.
    Complete(Value),
}

impl Batches {
    /// Opens a batch that waits for replies to the requests `ids` and
    /// already holds `early` (replies the gateway made without routing).
    /// Returns the array to send at once when no request is to be waited for.
    pub(super) fn open(&self, ids: &[Value], early: Vec<Value>) -> Option<Value> {
        if ids.is_empty() {
            return (!early.is_empty()).then_some(Value::Array(early));
        }
        let mut gathering = self.lock();
        let batch = gathering.next;
        gathering.next += 1;
        for id in ids {
            gathering.waiting.insert(id.to_string(), batch);
        }
        gathering.batches.insert(batch, (ids.len(), early));
        self.open.fetch_add(1, Ordering::AcqRel);
        None
    }

    /// Takes `message` into its batch when it answers a request of one.
    pub(super) fn gather(&self, message: &Value) -> Gathered {
        if self.open.load(Ordering::Acquire) == 0 || message.get("method").is_some() {
            return Gathered::Alone;
        }
        let Some(id) = message.get("id") else {
            return Gathered::Alone;
        };
        let mut gathering = self.lock();
        let Some(batch) = gathering.waiting.remove(&id.to_string()) else {
            return Gathered::Alone;
        };
        let Some((expected, replies)) = gathering.batches.get_mut(&batch) else {
            return Gathered::Alone;
        };
        replies.push(message.clone());
        *expected -= 1;
        if *expected > 0 {
            return Gathered::Held;
        }
        let replies = gathering
            .batches
            .remove(&batch)
            .map(|(_, replies)| replies)
            .unwrap_or_default();
        self.open.fetch_sub(1, Ordering::AcqRel);
        Gathered::Complete(Value::Array(replies))
    }

    /// A panic elsewhere does not make the table unusable.
    fn lock(&self) -> MutexGuard<'_, Gathering> {
        self.gathering
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// How the members of a batch are taken: those to route, in order, the
/// ids of its requests, and the gateway's own replies to members that
/// cannot be routed (not a message, `initialize`, an id used twice).
#[derive(Debug, Default, PartialEq)]
pub(super) struct Members {
    /// The members to route, in the batch's order.
    pub(super) routed: Vec<Value>,
    /// The ids of the routed requests.
    pub(super) ids: Vec<Value>,
    /// Replies made without routing.
    pub(super) early: Vec<Value>,
}

/// Sorts the members of a batch.
pub(super) fn sort(members: Vec<Value>) -> Members {
    let mut sorted = Members::default();
    let mut seen = HashSet::new();
    for member in members {
        let refusal = match (&member, member.get("method"), member.get("id")) {
            (Value::Object(_), Some(method), Some(id)) => {
                if method == "initialize" {
                    Some((
                        id.clone(),
                        "`initialize` must not be part of a JSON-RPC batch",
                    ))
                } else if !seen.insert(id.to_string()) {
                    Some((id.clone(), "the id is used twice in the batch"))
                } else {
                    sorted.ids.push(id.clone());
                    None
                }
            }
            (Value::Object(_), _, _) => None,
            _ => Some((Value::Null, "not a JSON-RPC message")),
        };
        match refusal {
            Some((id, text)) => sorted.early.push(json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": codes::INVALID_REQUEST, "message": text}})),
            None => sorted.routed.push(member),
        }
    }
    sorted
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(id: i64) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "result": {}})
    }

    #[test]
    fn replies_are_held_until_the_last_one_comes() {
        let batches = Batches::default();
        assert_eq!(batches.gather(&reply(1)), Gathered::Alone);
        let early = vec![json!({"jsonrpc": "2.0", "id": null, "error": {}})];
        assert_eq!(batches.open(&[json!(1), json!(2)], early), None);
        assert_eq!(batches.gather(&reply(3)), Gathered::Alone);
        assert_eq!(batches.gather(&reply(2)), Gathered::Held);
        let Gathered::Complete(array) = batches.gather(&reply(1)) else {
            panic!("the batch is complete");
        };
        assert_eq!(array.as_array().map(Vec::len), Some(3));
        assert_eq!(array[1]["id"], 2);
        assert_eq!(batches.gather(&reply(1)), Gathered::Alone);
    }

    #[test]
    fn a_batch_of_notifications_waits_for_nothing() {
        let batches = Batches::default();
        assert_eq!(batches.open(&[], Vec::new()), None);
        let early = vec![json!({"id": null})];
        assert_eq!(batches.open(&[], early.clone()), Some(Value::Array(early)));
    }

    #[test]
    fn members_that_cannot_be_routed_are_answered_at_once() {
        let members = sort(vec![
            json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "initialize"}),
            json!(7),
        ]);
        assert_eq!(members.routed.len(), 2);
        assert_eq!(members.ids, [json!(1)]);
        let ids: Vec<&Value> = members.early.iter().map(|e| &e["id"]).collect();
        assert_eq!(ids, [&json!(1), &json!(2), &Value::Null]);
    }
}
