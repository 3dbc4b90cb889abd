//! The task that owns one outgoing byte stream.
//!
//! Everything written to a peer goes through one [`FrameWriter`], so frames
//! from different tasks never interleave, and bursts are coalesced into one
//! write and one flush: on the multi-thread runtime the writer first lets
//! the other ready tasks queue theirs (see `gather`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures_util::future::BoxFuture;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::jsonrpc::RequestId;

mod gather;

use gather::Gather;

/// Frames coalesced into one write at most.
const MAX_BATCH: usize = 64;

/// A cloneable handle for queueing newline-terminated frames to one peer.
#[derive(Clone)]
pub struct FrameWriter {
    tx: mpsc::Sender<Bytes>,
    close: CancellationToken,
    divert: Option<Arc<dyn Divert>>,
}

impl std::fmt::Debug for FrameWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameWriter")
            .field("closed", &self.tx.is_closed())
            .field("diverting", &self.divert.is_some())
            .finish()
    }
}

/// Sends some of a writer's frames elsewhere as they are written, in the
/// writing task, instead of through the writer's own queue: a virtual
/// server's leg hands the answers to routed calls straight to the agent,
/// without a task of its own in between.
pub trait Divert: Send + Sync + 'static {
    /// Takes `frame` and returns where it goes instead (the writer and the
    /// frame as it goes there); gives `frame` back, unchanged, when it goes
    /// through the writer's own queue.
    fn divert(&self, frame: Bytes) -> Result<Diverted<'_>, Bytes>;

    /// As [`divert`](Self::divert), for the answer to the request `id`,
    /// so the diversion need not read the id out of the frame.
    fn divert_answer(&self, frame: Bytes, id: &RequestId) -> Result<Diverted<'_>, Bytes> {
        let _ = id;
        self.divert(frame)
    }
}

/// A frame on its way elsewhere than its writer's own queue.
pub enum Diverted<'a> {
    /// To this writer.
    To(&'a FrameWriter, Bytes),
    /// Nowhere more: the diversion delivered it itself.
    Delivered,
    /// Delivered once this completes: its receiver had no room for it yet.
    Pending(BoxFuture<'static, ()>),
}

/// The frames a diverting writer let through to its own queue that its
/// reader has not yet handed on. While there are any, a frame diverted past
/// the queue would overtake them, so a [`Divert`] diverts only when the
/// backlog is clear.
#[derive(Debug, Default)]
pub struct Backlog(Arc<AtomicUsize>);

/// One frame of a [`Backlog`], counted until this is dropped (once its
/// reader has handed it on).
#[derive(Debug)]
pub struct BacklogEntry(Arc<AtomicUsize>);

impl Backlog {
    /// Hands `frame` to `deliver` while the backlog is clear; otherwise,
    /// or when `deliver` gives it back, lets it through to the writer's
    /// own queue, counted.
    pub fn unless_behind<'a>(
        &self,
        frame: Bytes,
        deliver: impl FnOnce(Bytes) -> Result<Diverted<'a>, Bytes>,
    ) -> Result<Diverted<'a>, Bytes> {
        let frame = if self.is_clear() {
            match deliver(frame) {
                Ok(diverted) => return Ok(diverted),
                Err(frame) => frame,
            }
        } else {
            frame
        };
        self.let_through(frame)
    }

    /// Lets `frame` through to the writer's own queue, counted.
    pub fn let_through<'a>(&self, frame: Bytes) -> Result<Diverted<'a>, Bytes> {
        self.0.fetch_add(1, Ordering::AcqRel);
        Err(frame)
    }

    /// Whether every frame let through has been handed on.
    pub fn is_clear(&self) -> bool {
        self.0.load(Ordering::Acquire) == 0
    }

    /// The reader's count of a frame it took off the queue.
    pub fn entry(&self) -> BacklogEntry {
        BacklogEntry(self.0.clone())
    }
}

impl Drop for BacklogEntry {
    fn drop(&mut self) {
        // A frame queued through a permit was never counted; the count
        // stays at zero for it rather than wrapping.
        let _ = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }
}

/// The peer stopped accepting frames (it closed, or a write failed).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the peer is no longer writable")]
pub struct WriterClosed;

impl FrameWriter {
    /// Starts the writer task over `sink`; `capacity` frames may queue
    /// before senders wait (backpressure).
    pub fn spawn<W>(sink: W, capacity: usize) -> (FrameWriter, JoinHandle<std::io::Result<()>>)
    where
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (tx, rx) = mpsc::channel(capacity);
        let close = CancellationToken::new();
        let task = tokio::spawn(run(sink, rx, close.clone()));
        let writer = FrameWriter {
            tx,
            close,
            divert: None,
        };
        (writer, task)
    }

    /// A writer whose frames are consumed by the caller instead of being
    /// written to a byte stream (HTTP responses, WebSocket messages).
    pub fn channel(capacity: usize) -> (FrameWriter, FrameReceiver) {
        let (tx, rx) = mpsc::channel(capacity);
        let close = CancellationToken::new();
        let receiver = FrameReceiver::new(rx, close.clone());
        let writer = FrameWriter {
            tx,
            close,
            divert: None,
        };
        (writer, receiver)
    }

    /// A [`channel`](Self::channel) writer whose frames `divert` may send
    /// elsewhere as they are written.
    pub fn diverting(capacity: usize, divert: Arc<dyn Divert>) -> (FrameWriter, FrameReceiver) {
        let (mut writer, receiver) = Self::channel(capacity);
        writer.divert = Some(divert);
        (writer, receiver)
    }

    /// Queues one frame (without its newline).
    pub async fn send(&self, frame: Bytes) -> Result<(), WriterClosed> {
        self.send_diverted(frame, None).await
    }

    /// Queues the answer to the request `id` (without its newline); a
    /// diverting writer routes it by that id.
    pub async fn send_answer(&self, frame: Bytes, id: &RequestId) -> Result<(), WriterClosed> {
        self.send_diverted(frame, Some(id)).await
    }

    async fn send_diverted(
        &self,
        frame: Bytes,
        answering: Option<&RequestId>,
    ) -> Result<(), WriterClosed> {
        let frame = match &self.divert {
            None => frame,
            Some(divert) => {
                let diverted = match answering {
                    Some(id) => divert.divert_answer(frame, id),
                    None => divert.divert(frame),
                };
                match diverted {
                    Ok(Diverted::To(writer, frame)) => return writer.queue(frame).await,
                    Ok(Diverted::Delivered) => return Ok(()),
                    Ok(Diverted::Pending(delivery)) => {
                        delivery.await;
                        return Ok(());
                    }
                    Err(frame) => frame,
                }
            }
        };
        self.queue(frame).await
    }

    /// Queues `frame` (without its newline) when that needs no waiting: the
    /// writer diverts nothing and its queue has room. Gives it back
    /// otherwise, to be sent with [`Self::send`].
    pub fn send_now(&self, frame: Bytes) -> Result<(), Bytes> {
        if self.divert.is_some() {
            return Err(frame);
        }
        self.tx.try_send(frame).map_err(|err| err.into_inner())
    }

    /// Queues one frame on this writer's own queue.
    async fn queue(&self, frame: Bytes) -> Result<(), WriterClosed> {
        self.tx.send(frame).await.map_err(|_| WriterClosed)
    }

    /// Reserves room for one frame, so that a later send cannot wait. A
    /// frame sent through the permit goes to this writer's own queue,
    /// never to a diversion.
    pub async fn reserve(&self) -> Result<mpsc::Permit<'_, Bytes>, WriterClosed> {
        self.tx.reserve().await.map_err(|_| WriterClosed)
    }

    /// Writes what is already queued, then closes the stream (for a child
    /// process: closes its stdin), even while other handles still exist.
    pub fn close(&self) {
        self.close.cancel();
    }

    /// Whether the writer task has stopped.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

/// The consuming end of [`FrameWriter::channel`], or of any queue that
/// its writers can close while handles remain.
#[derive(Debug)]
pub struct FrameReceiver<T = Bytes> {
    rx: mpsc::Receiver<T>,
    close: CancellationToken,
}

impl<T> FrameReceiver<T> {
    /// The receiving end of `rx`, which ends once `close` fires and what
    /// was queued is drained.
    pub fn new(rx: mpsc::Receiver<T>, close: CancellationToken) -> Self {
        Self { rx, close }
    }

    /// The next frame; `None` once every handle is dropped, or once
    /// [`FrameWriter::close`] was called (the `close` token fired) and
    /// what was queued is drained.
    pub async fn recv(&mut self) -> Option<T> {
        tokio::select! {
            biased;
            frame = self.rx.recv() => frame,
            _ = self.close.cancelled() => {
                self.rx.close();
                self.rx.recv().await
            }
        }
    }
}

async fn run<W>(
    mut sink: W,
    mut rx: mpsc::Receiver<Bytes>,
    close: CancellationToken,
) -> std::io::Result<()>
where
    W: AsyncWrite + Unpin,
{
    let mut buf = BytesMut::new();
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let mut gather = Gather::for_current_runtime();
    loop {
        let received = tokio::select! {
            biased;
            received = rx.recv_many(&mut batch, MAX_BATCH) => received,
            _ = close.cancelled() => {
                rx.close();
                while let Ok(frame) = rx.try_recv() {
                    batch.push(frame);
                }
                write_batch(&mut sink, &mut buf, &mut batch).await?;
                break;
            }
        };
        if received == 0 {
            break;
        }
        if batch.len() < MAX_BATCH && gather.let_others_queue().await {
            while batch.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(frame) => batch.push(frame),
                    Err(_) => break,
                }
            }
        }
        gather.writing(batch.len());
        write_batch(&mut sink, &mut buf, &mut batch).await?;
    }
    sink.shutdown().await
}

async fn write_batch<W>(
    sink: &mut W,
    buf: &mut BytesMut,
    batch: &mut Vec<Bytes>,
) -> std::io::Result<()>
where
    W: AsyncWrite + Unpin,
{
    if batch.is_empty() {
        return Ok(());
    }
    for frame in batch.drain(..) {
        buf.extend_from_slice(&frame);
        buf.extend_from_slice(b"\n");
    }
    sink.write_all(buf).await?;
    sink.flush().await?;
    buf.clear();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn frames_are_newline_terminated_in_order() {
        let (client, mut server) = tokio::io::duplex(1024);
        let (writer, task) = FrameWriter::spawn(client, 4);
        writer.send(Bytes::from_static(b"one")).await.unwrap();
        writer.send(Bytes::from_static(b"two")).await.unwrap();
        drop(writer);
        task.await.unwrap().unwrap();
        let mut out = String::new();
        server.read_to_string(&mut out).await.unwrap();
        assert_eq!(out, "one\ntwo\n");
    }

    #[tokio::test]
    async fn channel_writer_drains_then_ends_on_close() {
        let (writer, mut receiver) = FrameWriter::channel(4);
        let other_handle = writer.clone();
        writer.send(Bytes::from_static(b"a")).await.unwrap();
        writer.close();
        assert_eq!(receiver.recv().await, Some(Bytes::from_static(b"a")));
        assert_eq!(receiver.recv().await, None);
        assert!(other_handle
            .send(Bytes::from_static(b"late"))
            .await
            .is_err());
    }

    #[tokio::test]
    async fn close_flushes_queued_frames_while_handles_remain() {
        let (client, mut server) = tokio::io::duplex(1024);
        let (writer, task) = FrameWriter::spawn(client, 4);
        let other_handle = writer.clone();
        writer.send(Bytes::from_static(b"last")).await.unwrap();
        writer.close();
        task.await.unwrap().unwrap();
        let mut out = String::new();
        server.read_to_string(&mut out).await.unwrap();
        assert_eq!(out, "last\n");
        assert!(other_handle
            .send(Bytes::from_static(b"late"))
            .await
            .is_err());
    }
}
