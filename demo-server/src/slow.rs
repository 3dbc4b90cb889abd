//! The `slow` tool: a timed sleep with progress notifications and cancellation.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::output::Output;
use crate::rpc;
use crate::tools::text_result;

/// How often a sleeping call looks at its cancellation flag.
const POLL: Duration = Duration::from_millis(5);

/// One `slow` call in progress.
pub struct SlowCall {
    /// The `tools/call` request id.
    pub id: Value,
    /// `params._meta.progressToken`, when the client asked for progress.
    pub progress_token: Option<Value>,
    /// Total sleep in milliseconds.
    pub ms: u64,
    /// Number of progress notifications (progress 1..=steps).
    pub steps: u64,
    /// Set by `notifications/cancelled`.
    pub cancelled: Arc<AtomicBool>,
}

impl SlowCall {
    /// Sleeps through every step, sending progress after each; returns the
    /// response, or `None` when the call was cancelled.
    pub fn run(self, out: &Output) -> Option<Value> {
        let start = Instant::now();
        for step in 1..=self.steps {
            let due = start + Duration::from_millis(self.ms * step / self.steps);
            if !self.sleep_until(due) {
                return None;
            }
            if let Some(token) = &self.progress_token {
                let params =
                    json!({ "progressToken": token, "progress": step, "total": self.steps });
                out.send(&rpc::notification("notifications/progress", Some(params)));
            }
        }
        let text = format!("slept {} ms", self.ms);
        Some(rpc::response(self.id, text_result(text)))
    }

    /// Sleeps until `due`; false as soon as the call is cancelled.
    fn sleep_until(&self, due: Instant) -> bool {
        loop {
            if self.cancelled.load(Ordering::SeqCst) {
                return false;
            }
            let now = Instant::now();
            if now >= due {
                return true;
            }
            thread::sleep(POLL.min(due - now));
        }
    }
}
