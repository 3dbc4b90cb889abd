//! The ordered release of one direction's decided messages.
//!
//! Every message taken gets a slot in a queue, and one task writes the
//! slots strictly in the order they were taken. While that task has
//! nothing left to write, a message decided at once needs no slot: its
//! intake hands it to its writers directly ([`write_now`]), which keeps
//! the order and spares the message a hand-off to the release task (on a
//! one-thread runtime, one more turn of the runtime's queue before the
//! write). What would have to wait for a writer still goes through the
//! queue, behind what was handed on.

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

/// The sending end of one direction's release queue.
pub(super) struct ReleaseQueue {
    queue: mpsc::Sender<Queued>,
    /// Slots queued and not yet written by the release task.
    unreleased: Arc<AtomicUsize>,
}

impl ReleaseQueue {
    /// A queue of `capacity` slots, and the task that releases them toward
    /// `direction`'s receiver.
    pub(super) fn start(
        capacity: usize,
        writers: Writers,
        direction: Direction,
    ) -> (Self, JoinHandle<()>) {
        let (queue, pending) = mpsc::channel(capacity);
        let unreleased = Arc::new(AtomicUsize::new(0));
        let releaser = tokio::spawn(release(
            pending,
            writers,
            direction,
            Arc::clone(&unreleased),
        ));
        (Self { queue, unreleased }, releaser)
    }

    /// Whether everything queued so far has been written: a message
    /// written now goes out after all of it.
    pub(super) fn is_drained(&self) -> bool {
        self.unreleased.load(Ordering::Acquire) == 0
    }

    /// Whether a slot can be queued without waiting.
    pub(super) fn has_room(&self) -> bool {
        self.queue.capacity() > 0 && !self.queue.is_closed()
    }

    /// Queues `slot`; `false` once the release task is gone.
    pub(super) async fn queue(&self, slot: oneshot::Receiver<Outcome>) -> bool {
        self.unreleased.fetch_add(1, Ordering::AcqRel);
        self.queue.send(Queued::Slot(slot)).await.is_ok()
    }

    /// Queues `slot` when there is room ([`Self::has_room`]).
    pub(super) fn try_queue(&self, slot: oneshot::Receiver<Outcome>) {
        self.unreleased.fetch_add(1, Ordering::AcqRel);
        // Fails only once the release task has ended, and then nothing is
        // released any more.
        let _ = self.queue.try_send(Queued::Slot(slot));
    }

    /// Queues deliveries that are already known (a refusal).
    pub(super) async fn queue_deliveries(&self, deliveries: Vec<Delivery>) -> bool {
        self.queue(known(deliveries)).await
    }

    /// Waits until everything queued so far has been written.
    pub(super) async fn barrier(&self) -> bool {
        let (tx, rx) = oneshot::channel();
        if self.queue.send(Queued::Barrier(tx)).await.is_err() {
            return false;
        }
        rx.await.is_ok()
    }
}

/// A slot already resolved to `deliveries`.
pub(super) fn known(deliveries: Vec<Delivery>) -> oneshot::Receiver<Outcome> {
    let (tx, rx) = oneshot::channel();
    let _ = tx.send(Outcome::Deliver(deliveries));
    rx
}

/// Writes slots in the order they were queued.
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

/// Writes what of one message's deliveries needs no waiting, in order, and
/// returns the rest (from the first that would wait) to be released.
pub(super) fn write_now(
    writers: &Writers,
    direction: Direction,
    deliveries: Vec<Delivery>,
) -> Vec<Delivery> {
    let mut deliveries = deliveries.into_iter();
    while let Some(delivery) = deliveries.next() {
        let refused = match delivery {
            Delivery::Forward(bytes) => writers
                .toward(direction)
                .send_now(bytes)
                .err()
                .map(Delivery::Forward),
            Delivery::Reply(bytes) => writers
                .toward(direction.reverse())
                .send_now(bytes)
                .err()
                .map(Delivery::Reply),
            // Routed by its id, which only the waiting send does.
            answer @ Delivery::Answer(..) => Some(answer),
        };
        if let Some(refused) = refused {
            return std::iter::once(refused).chain(deliveries).collect();
        }
    }
    Vec::new()
}

/// Writes one message's deliveries, each toward its receiver.
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
