//! The requests a leg has sent its relay session and not yet seen answered,
//! by the id the leg sent them under, and where each answer goes (see
//! [`answers`](super::answers)).
//!
//! The agent's routed calls keep the agent's own id, so their answers
//! reach the agent byte for byte and the leg's audit entries name the id
//! the agent used. An id the upstream might write back differently (a
//! number past what a double holds exactly, a string with characters a
//! JSON writer may escape), or one already in flight on this leg, is
//! renumbered instead, like the router's own requests: into a namespace
//! of string ids neither the agent's usual ids nor the relay's own use.

use std::sync::atomic::{AtomicU64, Ordering};
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
    /// Straight to the agent, under the agent's id.
    Agent,
}

/// Whom a request in flight through a leg stands for.
#[derive(Debug)]
enum Caller {
    /// The router itself (a list, `logging/setLevel`).
    Router,
    /// The agent's request, sent under its own id.
    AgentAsIs,
    /// The agent's request with this id, sent renumbered.
    Renumbered(RequestId),
}

/// One request in flight through a leg.
#[derive(Debug)]
struct Entry {
    caller: Caller,
    answer: Answer,
}

/// A request taken out once answered (or once the leg is gone).
#[derive(Debug)]
pub(super) struct Taken {
    /// The agent's id; `None` for the router's own requests.
    pub(super) agent_id: Option<RequestId>,
    /// Whether the leg sent it under an id other than the agent's.
    pub(super) renumbered: bool,
    /// Where its answer goes.
    pub(super) answer: Answer,
}

/// A leg's requests in flight.
#[derive(Debug, Default)]
pub(super) struct PendingRequests {
    entries: Mutex<HashMap<RequestId, Entry>>,
    next_id: AtomicU64,
}

/// The prefix of the ids the router mints; the relay's own ids
/// (`"acs-proxy-…"`) are another namespace, which it takes out of the
/// stream before the router sees them.
const ROUTER_ID_PREFIX: &str = "\"acs-aggregate-";

impl PendingRequests {
    /// Registers the agent's request `agent_id`, answered by `answer`;
    /// the id to send it under, when that is not the agent's own.
    pub(super) fn insert_agent_request(
        &self,
        agent_id: &RequestId,
        answer: Answer,
    ) -> Option<RequestId> {
        let mut entries = self.lock();
        if kept_as_is(agent_id.as_json()) && !entries.contains_key(agent_id) {
            let entry = Entry {
                caller: Caller::AgentAsIs,
                answer,
            };
            entries.insert(agent_id.clone(), entry);
            return None;
        }
        let caller = Caller::Renumbered(agent_id.clone());
        Some(self.insert_fresh(&mut entries, caller, answer))
    }

    /// Registers a request of the router's own, answered by `answer`,
    /// under a fresh id, which it returns.
    pub(super) fn insert_router_request(&self, answer: Answer) -> RequestId {
        let mut entries = self.lock();
        self.insert_fresh(&mut entries, Caller::Router, answer)
    }

    fn insert_fresh(
        &self,
        entries: &mut HashMap<RequestId, Entry>,
        caller: Caller,
        answer: Answer,
    ) -> RequestId {
        let id = loop {
            let n = self.next_id.fetch_add(1, Ordering::Relaxed);
            let id = RequestId::from_json(&format!("{ROUTER_ID_PREFIX}{n}\""));
            // Only an agent's string id of this very form can be in the way.
            if !entries.contains_key(&id) {
                break id;
            }
        };
        entries.insert(id.clone(), Entry { caller, answer });
        id
    }

    /// Takes the request the leg sent as `id` (JSON text) out.
    pub(super) fn take(&self, id: &str) -> Option<Taken> {
        let (id, entry) = self.lock().remove_entry(id)?;
        let (agent_id, renumbered) = match entry.caller {
            Caller::Router => (None, true),
            Caller::AgentAsIs => (Some(id), false),
            Caller::Renumbered(agent_id) => (Some(agent_id), true),
        };
        Some(Taken {
            agent_id,
            renumbered,
            answer: entry.answer,
        })
    }

    /// The id the leg sent the agent's request `agent_id` (JSON text)
    /// under, while it is in flight: where the agent's cancellation of it
    /// goes.
    pub(super) fn leg_id_of(&self, agent_id: &str) -> Option<RequestId> {
        let entries = self.lock();
        if let Some((id, entry)) = entries.get_key_value(agent_id) {
            if matches!(entry.caller, Caller::AgentAsIs) {
                return Some(id.clone());
            }
        }
        entries
            .iter()
            .find(|(_, entry)| {
                matches!(&entry.caller, Caller::Renumbered(id) if id.as_json() == agent_id)
            })
            .map(|(id, _)| id.clone())
    }

    /// Forgets every request: the leg is gone. Waiters see their senders
    /// dropped; the agent's ids of requests answered straight to the agent
    /// are returned, to be answered as unavailable.
    pub(super) fn drain(&self) -> Vec<RequestId> {
        self.lock()
            .drain()
            .filter(|(_, entry)| matches!(entry.answer, Answer::Agent))
            .filter_map(|(id, entry)| match entry.caller {
                Caller::Router => None,
                Caller::AgentAsIs => Some(id),
                Caller::Renumbered(agent_id) => Some(agent_id),
            })
            .collect()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<RequestId, Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Whether an upstream writes the id `text` (JSON) back exactly as it
/// came: an integer a double holds exactly, written without a leading
/// zero or a minus zero, or a string of printable ASCII with nothing to
/// escape; and not of the namespaces the proxy mints ids in.
fn kept_as_is(text: &str) -> bool {
    if let Some(inner) = text.strip_prefix('"') {
        let Some(inner) = inner.strip_suffix('"') else {
            return false;
        };
        return !inner.starts_with("acs-")
            && inner
                .bytes()
                .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\');
    }
    let digits = text.strip_prefix('-').unwrap_or(text);
    let canonical = digits == "0" || !digits.starts_with('0');
    !digits.is_empty()
        && digits.len() <= 15
        && digits.bytes().all(|b| b.is_ascii_digit())
        && canonical
        && text != "-0"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(text: &str) -> RequestId {
        RequestId::from_json(text)
    }

    #[test]
    fn the_agents_id_is_kept_unless_it_may_come_back_otherwise_or_is_in_flight() {
        let pending = PendingRequests::default();
        assert_eq!(pending.insert_agent_request(&id("7"), Answer::Agent), None);
        assert_eq!(
            pending.insert_agent_request(&id("\"a-1\""), Answer::Agent),
            None
        );
        for renumbered in ["7", "-0", "007", "12345678901234567", "\"é\"", "\"acs-x\""] {
            let leg_id = pending.insert_agent_request(&id(renumbered), Answer::Agent);
            let leg_id = leg_id.unwrap_or_else(|| panic!("{renumbered} was kept"));
            assert!(leg_id.as_json().starts_with(ROUTER_ID_PREFIX));
        }
    }

    #[test]
    fn a_cancellation_finds_the_legs_id_and_a_gone_leg_returns_the_agents_ids() {
        let pending = PendingRequests::default();
        let (waiter, _receiver) = oneshot::channel();
        let renumbered = pending.insert_agent_request(&id("\"a\\u0062\""), Answer::Waiter(waiter));
        let renumbered = renumbered.expect("an escaped id is renumbered");
        assert_eq!(pending.insert_agent_request(&id("7"), Answer::Agent), None);
        let own = pending.insert_router_request(Answer::Agent);
        assert_eq!(pending.leg_id_of("7"), Some(id("7")));
        assert_eq!(pending.leg_id_of("\"a\\u0062\""), Some(renumbered));
        assert_eq!(pending.leg_id_of("8"), None);
        assert_eq!(pending.leg_id_of(own.as_json()), None);
        assert_eq!(pending.drain(), vec![id("7")]);
        assert!(pending.take("7").is_none());
    }

    #[test]
    fn a_taken_request_says_whose_it_was() {
        let pending = PendingRequests::default();
        pending.insert_agent_request(&id("3"), Answer::Agent);
        let own = pending.insert_router_request(Answer::Agent);
        let taken = pending.take("3").expect("in flight");
        assert_eq!((taken.agent_id, taken.renumbered), (Some(id("3")), false));
        let taken = pending.take(own.as_json()).expect("in flight");
        assert_eq!((taken.agent_id, taken.renumbered), (None, true));
    }
}
