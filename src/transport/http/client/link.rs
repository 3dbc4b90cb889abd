//! The plumbing every network upstream shares: the stream of frames from
//! the server, one close signal that stops every task of the connection,
//! and the [`UpstreamControl`] the relay drives.
//!
//! Frames queued before the close are still delivered: the stream drains
//! what it holds, then ends. The first close reason wins and is what
//! [`UpstreamControl::wait`] reports.

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use futures_util::{FutureExt, StreamExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::transport::line::LineFrame;
use crate::transport::upstream::{UpstreamControl, UpstreamExit};

/// The reason given when the proxy itself ends the connection.
pub(crate) const CLOSED_BY_PROXY: &str = "the proxy closed the connection";

/// One upstream connection's shared state.
#[derive(Debug)]
pub(crate) struct Link {
    tx: mpsc::Sender<io::Result<LineFrame>>,
    stop: CancellationToken,
    reason: Mutex<Option<String>>,
    /// The proxy began an orderly shutdown: whatever closes the link now,
    /// the proxy closed it.
    ending: AtomicBool,
}

struct CloseOnDrop(Arc<Link>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close("the relay stopped reading from the upstream");
    }
}

impl Link {
    /// A link and the stream of frames it feeds (`queue` frames may wait
    /// before senders do).
    pub fn new(queue: usize) -> (Arc<Link>, BoxStream<'static, io::Result<LineFrame>>) {
        let (tx, rx) = mpsc::channel(queue.max(1));
        let stop = CancellationToken::new();
        let link = Arc::new(Link {
            tx,
            stop: stop.clone(),
            reason: Mutex::new(None),
            ending: AtomicBool::new(false),
        });
        // Dropping the stream closes the link, so no task outlives a relay
        // that stopped reading.
        let guard = CloseOnDrop(link.clone());
        let frames = futures_util::stream::unfold((rx, stop, false, guard), |state| async move {
            let (mut rx, stop, mut draining, guard) = state;
            let item = if draining {
                rx.recv().await
            } else {
                tokio::select! {
                    biased;
                    item = rx.recv() => item,
                    _ = stop.cancelled() => {
                        rx.close();
                        draining = true;
                        rx.recv().await
                    }
                }
            };
            item.map(|item| (item, (rx, stop, draining, guard)))
        });
        (link, frames.boxed())
    }

    /// Hands one message to the relay; `false` once the link is closed.
    pub async fn emit(&self, bytes: Bytes) -> bool {
        self.send(LineFrame::Line(bytes)).await
    }

    /// Reports a message that passed the size limit and was dropped.
    pub async fn emit_too_long(&self) -> bool {
        self.send(LineFrame::TooLong).await
    }

    async fn send(&self, frame: LineFrame) -> bool {
        tokio::select! {
            biased;
            _ = self.stop.cancelled() => false,
            sent = self.tx.send(Ok(frame)) => sent.is_ok(),
        }
    }

    /// Ends the connection: every task stops, the frame stream ends once
    /// drained. Only the first reason is kept.
    pub fn close(&self, reason: impl Into<String>) {
        {
            let mut slot = self.reason.lock().unwrap_or_else(|e| e.into_inner());
            if slot.is_none() {
                *slot = Some(match self.ending.load(Ordering::SeqCst) {
                    true => CLOSED_BY_PROXY.to_owned(),
                    false => reason.into(),
                });
            }
        }
        self.stop.cancel();
    }

    /// Whether the connection was closed.
    pub fn is_closed(&self) -> bool {
        self.stop.is_cancelled()
    }

    /// Resolves once the connection is closed.
    pub fn closed(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.stop.cancelled()
    }

    /// Why the connection closed (empty while it is open).
    pub fn reason(&self) -> String {
        self.reason
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .unwrap_or_default()
    }

    /// Runs `task` until it ends or the connection closes.
    pub fn spawn<F>(&self, task: F) -> JoinHandle<()>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let stop = self.stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = task => {}
            }
        })
    }
}

/// An orderly goodbye to the server (DELETE of a session, a WebSocket
/// close frame), run by [`UpstreamControl::shutdown`] while the link is
/// still open.
pub(crate) type Goodbye = Box<dyn FnOnce() -> BoxFuture<'static, ()> + Send>;

/// The [`UpstreamControl`] of a network upstream.
pub(crate) struct LinkControl {
    link: Arc<Link>,
    goodbye: Option<Goodbye>,
}

impl LinkControl {
    /// Control over `link`, saying `goodbye` at shutdown.
    pub fn new(link: Arc<Link>, goodbye: Option<Goodbye>) -> Self {
        Self { link, goodbye }
    }
}

impl UpstreamControl for LinkControl {
    fn wait(&mut self) -> BoxFuture<'_, UpstreamExit> {
        async move {
            self.link.closed().await;
            UpstreamExit::Closed(self.link.reason())
        }
        .boxed()
    }

    fn shutdown(&mut self) -> BoxFuture<'_, UpstreamExit> {
        async move {
            self.link.ending.store(true, Ordering::SeqCst);
            if let Some(goodbye) = self.goodbye.take() {
                if !self.link.is_closed() {
                    goodbye().await;
                }
            }
            self.link.close(CLOSED_BY_PROXY);
            UpstreamExit::Closed(self.link.reason())
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_queued_before_the_close_are_delivered() {
        let (link, mut frames) = Link::new(4);
        assert!(link.emit(Bytes::from_static(b"a")).await);
        link.close("gone");
        link.close("ignored");
        assert!(!link.emit(Bytes::from_static(b"late")).await);
        let first = frames.next().await.unwrap().unwrap();
        assert_eq!(first, LineFrame::Line(Bytes::from_static(b"a")));
        assert!(frames.next().await.is_none());
        let mut control = LinkControl::new(link.clone(), None);
        assert_eq!(control.wait().await, UpstreamExit::Closed("gone".into()));
    }

    #[tokio::test]
    async fn dropping_the_frames_closes_the_link() {
        let (link, frames) = Link::new(4);
        let task = link.spawn(std::future::pending());
        drop(frames);
        assert!(link.is_closed());
        task.await.unwrap();
    }

    #[tokio::test]
    async fn shutdown_says_goodbye_then_closes() {
        let (link, mut frames) = Link::new(4);
        let said = Arc::new(Mutex::new(false));
        let flag = said.clone();
        let goodbye: Goodbye = Box::new(move || {
            async move {
                *flag.lock().unwrap() = true;
            }
            .boxed()
        });
        let task = link.spawn(std::future::pending());
        let mut control = LinkControl::new(link.clone(), Some(goodbye));
        let exit = control.shutdown().await;
        assert_eq!(exit, UpstreamExit::Closed(CLOSED_BY_PROXY.into()));
        assert!(*said.lock().unwrap());
        task.await.unwrap();
        assert!(frames.next().await.is_none());
    }
}
