//! `Deadlines`: the requests a session forwarded upstream, in the order
//! their upstream timeouts fall due.
//!
//! One watcher per session sleeps until the earliest deadline, instead of a
//! timer task per request: spawning a task and arming a timer for every
//! request, then waking it to end it when the answer came, was a measurable
//! part of each call's cost. Every request gets the same limit, so
//! deadlines fall due in the order requests were forwarded and the queue
//! needs no sorting.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::jsonrpc::RequestId;

/// Below this length the queue is never compacted.
const COMPACT_FLOOR: usize = 64;

/// One forwarded request whose answer is awaited by `due`.
#[derive(Debug)]
pub struct Due {
    /// When the request times out.
    pub due: Instant,
    /// Its JSON-RPC id.
    pub id: RequestId,
    /// When it was read, which tells it apart from a later request reusing the id.
    pub started: Instant,
    /// Cancelled once the request is answered (or failed), ending the watch.
    pub answered: CancellationToken,
}

/// What is due by a given time.
#[derive(Debug)]
pub struct Expired {
    /// Requests past their deadline and not answered.
    pub requests: Vec<Due>,
    /// The next deadline; `None` when nothing is left to watch, and the
    /// watcher must stop (the next [`Deadlines::push`] asks for a new one).
    pub next: Option<Instant>,
}

/// The session's forwarded requests in deadline order.
#[derive(Debug, Default)]
pub struct Deadlines {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    queue: VecDeque<Due>,
    /// A watcher is running (or was asked for) and will take what is due.
    watched: bool,
    /// Length past which answered requests are dropped from the whole queue,
    /// not only from its front: a request that hangs at the front must not
    /// keep every later, answered one in memory until it times out.
    compact_at: usize,
}

impl Default for State {
    fn default() -> Self {
        Self {
            queue: VecDeque::new(),
            watched: false,
            compact_at: COMPACT_FLOOR,
        }
    }
}

impl Deadlines {
    /// Queues `request`, whose deadline is no earlier than any queued one.
    /// Returns `true` when no watcher is running: the caller starts one.
    pub fn push(&self, request: Due) -> bool {
        let mut state = self.lock();
        while state
            .queue
            .front()
            .is_some_and(|front| front.answered.is_cancelled())
        {
            state.queue.pop_front();
        }
        if state.queue.len() >= state.compact_at {
            state.queue.retain(|queued| !queued.answered.is_cancelled());
            state.compact_at = (state.queue.len() * 2).max(COMPACT_FLOOR);
        }
        state.queue.push_back(request);
        !std::mem::replace(&mut state.watched, true)
    }

    /// Takes the requests due by `now` that were not answered, and says
    /// when to look again.
    pub fn take_due(&self, now: Instant) -> Expired {
        let mut state = self.lock();
        let mut requests = Vec::new();
        while let Some(front) = state.queue.front() {
            if front.answered.is_cancelled() {
                state.queue.pop_front();
            } else if front.due <= now {
                requests.extend(state.queue.pop_front());
            } else {
                break;
            }
        }
        let next = state.queue.front().map(|front| front.due);
        state.watched = next.is_some();
        Expired { requests, next }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update leaves the queue consistent, so a panic elsewhere
        // while locked leaves nothing half-done.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn due(at: Instant, id: u64) -> Due {
        Due {
            due: at,
            id: RequestId::from_json(&id.to_string()),
            started: at,
            answered: CancellationToken::new(),
        }
    }

    #[test]
    fn the_first_request_asks_for_a_watcher_and_an_empty_queue_stops_it() {
        let deadlines = Deadlines::default();
        let now = Instant::now();
        assert!(deadlines.push(due(now, 1)));
        assert!(!deadlines.push(due(now + Duration::from_secs(1), 2)));
        let expired = deadlines.take_due(now);
        assert_eq!(expired.requests.len(), 1);
        assert_eq!(expired.next, Some(now + Duration::from_secs(1)));
        let expired = deadlines.take_due(now + Duration::from_secs(2));
        assert_eq!(expired.requests.len(), 1);
        assert_eq!(expired.next, None);
        assert!(deadlines.push(due(now, 3)), "the watcher stopped");
    }

    #[test]
    fn answered_requests_never_expire() {
        let deadlines = Deadlines::default();
        let now = Instant::now();
        let answered = due(now, 1);
        answered.answered.cancel();
        deadlines.push(answered);
        deadlines.push(due(now, 2));
        let expired = deadlines.take_due(now);
        assert_eq!(expired.requests.len(), 1);
        assert_eq!(expired.requests[0].id, RequestId::from_json("2"));
    }

    /// One request left hanging does not keep every answered one queued
    /// behind it until its deadline.
    #[test]
    fn answered_requests_behind_a_hanging_one_are_dropped() {
        let deadlines = Deadlines::default();
        let now = Instant::now();
        deadlines.push(due(now, 0));
        for id in 1..10_000 {
            let request = due(now, id);
            let answered = request.answered.clone();
            deadlines.push(request);
            answered.cancel();
        }
        assert!(deadlines.lock().queue.len() <= 2 * COMPACT_FLOOR);
    }
}
