//! The ordered release of one direction's messages: each message's
//! decision gets a slot in a queue, and a release task writes the slots in
//! arrival order, whatever order their decisions finish in.
//!
//! A decision that finished while nothing is queued has nothing to wait
//! behind: the pump writes it itself ([`ReleaseQueue::is_idle`]), without
//! handing it to the release task, which would cost a wake-up and a task
//! switch for every message of a session that is not busy.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::delivery::{Delivery, Outcome};
use crate::session::{Direction, Writers};

/// An entry of the ordered release queue.
enum Queued {
    /// A message being decided.
    Slot(oneshot::Receiver<Outcome>),
    /// Signalled once everything queued before it has been written.
    Barrier(oneshot::Sender<()>),
}

/// The pump's end of one direction's release queue.
pub(super) struct ReleaseQueue {
    tx: mpsc::Sender<Queued>,
    /// Slots queued and not yet written by the release task.
    unreleased: Arc<AtomicUsize>,
}

/// The release task is gone: the session is ending.
#[derive(Debug, Clone, Copy)]
pub(super) struct ReleaseGone;

impl ReleaseQueue {
    /// Starts the release task writing `direction`'s slots to `writers`;
    /// `capacity` slots may wait before the pump does.
    pub(super) fn start(
        writers: Writers,
        direction: Direction,
        capacity: usize,
    ) -> (ReleaseQueue, JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(capacity);
        let unreleased = Arc::new(AtomicUsize::new(0));
        let task = tokio::spawn(release(rx, writers, direction, unreleased.clone()));
        (ReleaseQueue { tx, unreleased }, task)
    }

    /// Whether every slot queued so far has been written: a message
    /// decided now may be written at once without overtaking any.
    pub(super) fn is_idle(&self) -> bool {
        self.unreleased.load(Ordering::Acquire) == 0
    }

    /// Queues the slot of the next message.
    pub(super) async fn slot(
        &self,
        outcome: oneshot::Receiver<Outcome>,
    ) -> Result<(), ReleaseGone> {
        self.unreleased.fetch_add(1, Ordering::AcqRel);
        if self.tx.send(Queued::Slot(outcome)).await.is_err() {
            self.unreleased.fetch_sub(1, Ordering::AcqRel);
            return Err(ReleaseGone);
        }
        Ok(())
    }

    /// Queues a slot already filled with `deliveries`.
    pub(super) async fn deliveries(&self, deliveries: Vec<Delivery>) -> Result<(), ReleaseGone> {
        let (tx, rx) = oneshot::channel();
        let _ = tx.send(Outcome::Deliver(deliveries));
        self.slot(rx).await
    }

    /// Waits until everything queued so far has been written.
    pub(super) async fn barrier(&self) -> Result<(), ReleaseGone> {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Queued::Barrier(tx)).await.is_err() {
            return Err(ReleaseGone);
        }
        rx.await.map_err(|_| ReleaseGone)
    }
}

/// Writes slots in arrival order.
async fn release(
    mut queue: mpsc::Receiver<Queued>,
    writers: Writers,
    direction: Direction,
    unreleased: Arc<AtomicUsize>,
) {
    while let Some(queued) = queue.recv().await {
        match queued {
            Queued::Slot(slot) => {
                if let Ok(Outcome::Deliver(deliveries)) = slot.await {
                    write(&writers, direction, deliveries).await;
                }
                unreleased.fetch_sub(1, Ordering::AcqRel);
            }
            Queued::Barrier(done) => {
                let _ = done.send(());
            }
        }
    }
}

/// Writes one message's deliveries: forwards on to the other side, replies
/// back to the sender.
pub(super) async fn write(writers: &Writers, direction: Direction, deliveries: Vec<Delivery>) {
    for delivery in deliveries {
        let sent = match delivery {
            Delivery::Forward(bytes) => writers.toward(direction).send(bytes).await,
            Delivery::Answer(bytes, id) => writers.toward(direction).send_answer(bytes, &id).await,
            Delivery::Reply(bytes) => writers.toward(direction.reverse()).send(bytes).await,
        };
        if sent.is_err() {
            tracing::debug!(
                direction = direction.as_str(),
                "dropped a frame for a closed peer"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::transport::writer::FrameWriter;

    #[tokio::test]
    async fn the_queue_is_idle_once_every_slot_is_written() {
        let (server, mut to_server) = FrameWriter::channel(4);
        let (client, _to_client) = FrameWriter::channel(4);
        let writers = Writers { client, server };
        let (queue, _task) = ReleaseQueue::start(writers, Direction::ClientToServer, 4);
        assert!(queue.is_idle());
        let (decided, outcome) = oneshot::channel();
        queue.slot(outcome).await.unwrap();
        assert!(!queue.is_idle(), "a slot still being decided");
        let frame = Bytes::from_static(b"{}");
        let deliveries = vec![Delivery::Forward(frame.clone())];
        decided.send(Outcome::Deliver(deliveries)).unwrap();
        assert_eq!(to_server.recv().await, Some(frame));
        queue.barrier().await.unwrap();
        assert!(queue.is_idle());
    }
}
