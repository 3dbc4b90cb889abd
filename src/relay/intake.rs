//! A session's intake that the task sending it frames may drive itself.
//!
//! A virtual server's router hands each upstream's relay session the
//! agent's frames through a queue, which that session's pump reads in a
//! task of its own: one more task woken per message than on a plain route,
//! whose pump reads the agent's transport directly. When nothing queued
//! is ahead of a routed call, the pump is not taking a frame and nothing
//! would make the call wait, the router takes it in its own task instead:
//! the same decision and slot in the release queue, in the same order,
//! without the hand-off.

use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::future::BoxFuture;
use tokio::sync::Mutex;

use crate::jsonrpc::Message;
use crate::transport::LineFrame;

/// One direction's intake, whichever task drives it: each frame taken is
/// peeked, its decision started and its slot queued for release.
pub trait FrameIntake: Send {
    /// Takes one frame read from the peer; `false` once the session reads
    /// no more.
    fn take(&mut self, item: std::io::Result<LineFrame>) -> BoxFuture<'_, bool>;

    /// Takes a request its sender already peeked at once, when nothing
    /// makes it wait; gives it back otherwise.
    fn take_request_now(&mut self, message: Message) -> Result<(), Message>;

    /// Resolves once everything taken has been released.
    fn finish(self: Box<Self>) -> BoxFuture<'static, ()>;
}

/// A session's client-side intake, shared by its pump (which takes the
/// queued frames) and the task that sends it frames (which may take one
/// itself).
#[derive(Default)]
pub struct SharedIntake {
    /// `None` until the session's pump opens it and after it closed it.
    intake: Mutex<Option<Box<dyn FrameIntake>>>,
    /// Frames put on the session's queue and not yet taken by its pump.
    queued: AtomicUsize,
}

impl SharedIntake {
    /// Counts a frame about to go on the session's queue: until the pump
    /// has taken it, no frame is taken ahead of it.
    pub fn queue(&self) {
        self.queued.fetch_add(1, Ordering::AcqRel);
    }

    /// A counted frame that could not be queued after all.
    pub fn unqueue(&self) {
        self.queued.fetch_sub(1, Ordering::AcqRel);
    }

    /// Takes the peeked request `message` in the caller's task, when
    /// nothing queued is ahead of it, the pump is not taking a frame and
    /// nothing makes it wait; gives it back otherwise, to be queued.
    pub fn take_now(&self, message: Message) -> Result<(), Message> {
        let Ok(mut intake) = self.intake.try_lock() else {
            return Err(message);
        };
        if self.queued.load(Ordering::Acquire) != 0 {
            return Err(message);
        }
        match intake.as_mut() {
            Some(open) => open.take_request_now(message),
            None => Err(message),
        }
    }

    /// Installs the session's intake; frames are taken from now on.
    pub(super) async fn open(&self, intake: Box<dyn FrameIntake>) {
        *self.intake.lock().await = Some(intake);
    }

    /// The pump takes a frame it read from the queue.
    pub(super) async fn take_queued(&self, item: std::io::Result<LineFrame>) -> bool {
        let mut intake = self.intake.lock().await;
        self.queued.fetch_sub(1, Ordering::AcqRel);
        match intake.as_mut() {
            Some(open) => open.take(item).await,
            None => false,
        }
    }

    /// Takes no more frames; the intake, if it was still open, to finish.
    pub(super) async fn close(&self) -> Option<Box<dyn FrameIntake>> {
        self.intake.lock().await.take()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use bytes::Bytes;
    use futures_util::FutureExt;

    use super::*;
    use crate::jsonrpc::MessageKind;

    /// Records the order frames are taken in, by their bytes.
    #[derive(Default)]
    struct Recorder(Arc<Mutex<Vec<String>>>);

    impl FrameIntake for Recorder {
        fn take(&mut self, item: std::io::Result<LineFrame>) -> BoxFuture<'_, bool> {
            let text = match item {
                Ok(LineFrame::Line(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
                _ => String::from("?"),
            };
            self.0.lock().unwrap().push(text);
            async { true }.boxed()
        }

        fn take_request_now(&mut self, message: Message) -> Result<(), Message> {
            let text = String::from_utf8_lossy(&message.bytes).into_owned();
            self.0.lock().unwrap().push(text);
            Ok(())
        }

        fn finish(self: Box<Self>) -> BoxFuture<'static, ()> {
            async {}.boxed()
        }
    }

    fn request(text: &'static str) -> Message {
        Message {
            bytes: Bytes::from_static(text.as_bytes()),
            kind: MessageKind::Request,
            id: None,
            method: Some("tools/call".into()),
            tree: None,
        }
    }

    async fn opened() -> (SharedIntake, Arc<Mutex<Vec<String>>>) {
        let taken = Arc::new(Mutex::new(Vec::new()));
        let shared = SharedIntake::default();
        shared.open(Box::new(Recorder(taken.clone()))).await;
        (shared, taken)
    }

    #[tokio::test]
    async fn nothing_is_taken_before_the_intake_opens_or_after_it_closes() {
        let shared = SharedIntake::default();
        assert!(shared.take_now(request("early")).is_err());
        let (shared, taken) = opened().await;
        assert!(shared.close().await.is_some());
        assert!(shared.take_now(request("late")).is_err());
        assert!(taken.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_call_waits_behind_a_queued_frame_until_the_pump_takes_it() {
        let (shared, taken) = opened().await;
        shared.queue();
        let given_back = shared.take_now(request("second"));
        assert!(given_back.is_err(), "taken ahead of a queued frame");
        let queued = LineFrame::Line(Bytes::from_static(b"first"));
        assert!(shared.take_queued(Ok(queued)).await);
        assert!(shared.take_now(request("third")).is_ok());
        assert_eq!(*taken.lock().unwrap(), ["first", "third"]);
    }

    #[tokio::test]
    async fn a_call_is_not_taken_while_the_pump_is_taking_a_frame() {
        let (shared, taken) = opened().await;
        let pump = shared.intake.lock().await;
        assert!(shared.take_now(request("meanwhile")).is_err());
        drop(pump);
        assert!(shared.take_now(request("after")).is_ok());
        assert_eq!(*taken.lock().unwrap(), ["after"]);
    }

    #[tokio::test]
    async fn a_frame_that_could_not_be_queued_does_not_hold_the_others_back() {
        let (shared, _taken) = opened().await;
        shared.queue();
        shared.unqueue();
        assert!(shared.take_now(request("next")).is_ok());
    }
}
