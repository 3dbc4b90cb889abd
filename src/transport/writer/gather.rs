//! Letting the frames other tasks are about to queue join a write.
//!
//! On tokio's multi-thread runtime, where the HTTP and WebSocket listeners
//! run, a task woken by the running task runs next (the worker's LIFO
//! slot). Each frame a request's task queues wakes the writer, which then
//! writes that frame alone before the other ready requests queue theirs,
//! and the peer behind the stream is woken once per frame. So before a
//! write the writer first lets the tasks that are ready run. While its
//! writes carry several frames (calls overlap), it also waits for the I/O
//! driver's next poll, so requests that arrived meanwhile are read and
//! join the write. A lone frame (calls one at a time) costs no system call
//! more.
//!
//! A stdio session's one-thread runtime runs ready tasks in the order they
//! were woken, so its writer already runs after them and does not wait.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::runtime::{Handle, RuntimeFlavor};

/// Whether, and how long, a writer waits for other tasks before a write.
pub(super) struct Gather {
    enabled: bool,
    /// The last write carried more than one frame.
    overlapping: bool,
}

impl Gather {
    /// Enabled on the multi-thread runtime only (see the module docs).
    pub(super) fn for_current_runtime() -> Self {
        let flavor = Handle::try_current().map(|handle| handle.runtime_flavor());
        Self {
            enabled: matches!(flavor, Ok(RuntimeFlavor::MultiThread)),
            overlapping: false,
        }
    }

    /// Lets the tasks that are ready queue their frames first; `false`
    /// (at once) when this writer does not wait for them.
    pub(super) async fn let_others_queue(&self) -> bool {
        if !self.enabled {
            return false;
        }
        if self.overlapping {
            tokio::task::yield_now().await;
        } else {
            YieldToReady::default().await;
        }
        true
    }

    /// Notes how many frames the write about to go out carries.
    pub(super) fn writing(&mut self, frames: usize) {
        self.overlapping = frames > 1;
    }
}

/// Lets every task that is ready to run go first, once.
///
/// Waking itself while polled puts the task at the back of the runtime's
/// queue of ready tasks, without the I/O driver poll that
/// `tokio::task::yield_now` waits for: with nothing else ready it runs
/// again at once.
#[derive(Default)]
struct YieldToReady {
    yielded: bool,
}

impl Future for YieldToReady {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn a_one_thread_runtime_does_not_wait() {
        let gather = Gather::for_current_runtime();
        assert!(!gather.let_others_queue().await);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_multi_thread_runtime_lets_ready_tasks_queue_first() {
        // On the one worker, as a writer task runs (the test's own body
        // runs on the thread that blocks on it).
        let writer = tokio::spawn(async {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            let gather = Gather::for_current_runtime();
            tokio::spawn(async move {
                let _ = tx.send("queued by another task");
            });
            let waited = gather.let_others_queue().await;
            (waited, rx.try_recv().ok())
        });
        let (waited, queued) = writer.await.expect("the writer task ran");
        assert!(waited);
        assert_eq!(queued, Some("queued by another task"));
    }
}
