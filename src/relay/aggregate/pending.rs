//! The requests a leg has sent its relay session and not yet seen answered,
//! by the leg's own id, and where each answer goes (see
//! [`answers`](super::answers)).

use std::sync::{Mutex, MutexGuard, PoisonError};

use foldhash::HashMap;
use serde_json::Value;
use tokio::sync::oneshot;

use crate::jsonrpc::RequestId;

/// Where the answer to one request goes.
#[derive(Debug)]
pub(super) enum Answer {
    /// To a router task waiting for it as a parsed message.
    Waiter(oneshot::Sender<Value>),
    /// Straight to the agent, under the agent's id: the leg's reader
    /// gives the answer back that id in its own bytes.
    Agent,
}

/// One request in flight through a leg.
#[derive(Debug)]
struct Entry {
    /// The agent's id; `None` for the router's own requests.
    agent_id: Option<RequestId>,
    answer: Answer,
}

/// A leg's requests in flight.
#[derive(Debug, Default)]
pub(super) struct PendingRequests {
    entries: Mutex<HashMap<u64, Entry>>,
}

impl PendingRequests {
    /// Notes that the leg's request `id` is to be answered by `answer`;
    /// `agent_id` names the agent's request it stands for, if any.
    pub(super) fn insert(&self, id: u64, agent_id: Option<RequestId>, answer: Answer) {
        self.lock().insert(id, Entry { agent_id, answer });
    }

    /// Takes the request `id` out, with the agent's id it stood for.
    pub(super) fn take(&self, id: u64) -> Option<(Option<RequestId>, Answer)> {
        self.lock()
            .remove(&id)
            .map(|entry| (entry.agent_id, entry.answer))
    }

    /// The leg's id for the agent's request `agent_id` (JSON text), while
    /// it is in flight: where the agent's cancellation of it goes.
    pub(super) fn leg_id_of(&self, agent_id: &str) -> Option<u64> {
        self.lock()
            .iter()
            .find(|(_, entry)| entry.agent_id.as_ref().map(RequestId::as_json) == Some(agent_id))
            .map(|(id, _)| *id)
    }

    /// Forgets every request: the leg is gone. Waiters see their senders
    /// dropped; requests answered straight to the agent are returned, to
    /// be answered as unavailable.
    pub(super) fn drain(&self) -> Vec<RequestId> {
        self.lock()
            .drain()
            .filter_map(|(_, entry)| match entry.answer {
                Answer::Agent => entry.agent_id,
                Answer::Waiter(_) => None,
            })
            .collect()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancellation_finds_the_legs_id_and_a_gone_leg_returns_the_agents_ids() {
        let pending = PendingRequests::default();
        let (waiter, _receiver) = oneshot::channel();
        let id = RequestId::from_json;
        pending.insert(1, Some(id("\"a\"")), Answer::Waiter(waiter));
        pending.insert(2, Some(id("7")), Answer::Agent);
        pending.insert(3, None, Answer::Agent);
        assert_eq!(pending.leg_id_of("7"), Some(2));
        assert_eq!(pending.leg_id_of("\"a\""), Some(1));
        assert_eq!(pending.leg_id_of("8"), None);
        assert_eq!(pending.drain(), vec![id("7")]);
        assert!(pending.take(2).is_none());
    }
}
