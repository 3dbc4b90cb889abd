//! `DecisionTimers`: the timers that bound a session's Guardian decisions,
//! kept from one decision to the next.
//!
//! Every decision asked of a remote Guardian waits under a deadline. A
//! timer registered afresh for each, when no earlier timer is armed, makes
//! tokio wake its own driver to take the new deadline into account: a
//! write to its eventfd and an `epoll_wait` that returns at once, two
//! syscalls per exchange (BENCHMARKS.md, "Remote Guardian"). A timer kept
//! from an earlier decision and moved to a later deadline is only extended
//! where it is, which wakes nothing. A kept timer that falls due while no
//! decision waits on it wakes the task that last did, once, for nothing.

use std::pin::Pin;
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::time::{Instant, Sleep};

/// Timers kept at most: about as many decisions as wait at once.
const KEPT: usize = 16;

/// A session's spare decision timers.
#[derive(Default)]
pub struct DecisionTimers {
    spare: Mutex<Vec<Pin<Box<Sleep>>>>,
}

impl DecisionTimers {
    /// A timer falling due at `deadline`: a kept one moved there, else a
    /// new one. Must be called within a Tokio runtime.
    pub fn until(&self, deadline: Instant) -> Pin<Box<Sleep>> {
        let kept = self.lock().pop();
        match kept {
            Some(mut timer) => {
                timer.as_mut().reset(deadline);
                timer
            }
            None => Box::pin(tokio::time::sleep_until(deadline)),
        }
    }

    /// Keeps `timer` for a later decision, while there is room.
    pub fn keep(&self, timer: Pin<Box<Sleep>>) {
        let mut spare = self.lock();
        if spare.len() < KEPT {
            spare.push(timer);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Pin<Box<Sleep>>>> {
        // A push or a pop leaves the list consistent, so a poisoned lock is
        // still usable.
        self.spare.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_kept_timer_moved_later_falls_due_at_its_new_deadline() {
        let timers = DecisionTimers::default();
        timers.keep(timers.until(Instant::now() + Duration::from_millis(20)));
        let start = Instant::now();
        let timer = timers.until(start + Duration::from_millis(80));
        assert!(timers.lock().is_empty(), "the kept timer was not reused");
        timer.await;
        assert!(start.elapsed() >= Duration::from_millis(80));
    }

    #[tokio::test]
    async fn an_elapsed_timer_can_be_used_again() {
        let timers = DecisionTimers::default();
        let mut timer = timers.until(Instant::now());
        timer.as_mut().await;
        timers.keep(timer);
        let start = Instant::now();
        timers.until(start + Duration::from_millis(20)).await;
        assert!(start.elapsed() >= Duration::from_millis(20));
    }

    #[tokio::test]
    async fn no_more_than_a_few_are_kept() {
        let timers = DecisionTimers::default();
        for _ in 0..KEPT + 4 {
            timers.keep(Box::pin(tokio::time::sleep(Duration::from_secs(60))));
        }
        assert_eq!(timers.lock().len(), KEPT);
    }
}
