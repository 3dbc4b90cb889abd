//! The Guardian child's stdin, written by the task that makes each call.
//!
//! A request frame goes out in one non-blocking `write` from the calling
//! task, so a call costs no hand-off to a writer task and no wake-up of
//! one. What the pipe does not take at once (it is full: the Guardian is
//! behind) is kept in a backlog that a flusher task writes as the pipe
//! drains; while the backlog holds anything, later frames join it instead
//! of being written, so frames never interleave. A frame is written or
//! queued whole with no await in between, so a caller dropped mid-call
//! can never leave half a frame on the pipe.
//!
//! The backlog has no bound of its own: each frame in it belongs to a call
//! that is waiting for its reply, so it is bounded by the calls in flight.

use std::io::{self, IoSlice};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::{Buf, BytesMut};
use tokio::net::unix::pipe;
use tokio::process::ChildStdin;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The write end of the Guardian's stdin, shared by every caller.
#[derive(Debug, Clone)]
pub(crate) struct RequestPipe {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// Wakes the flusher: the backlog grew, or the pipe is to be closed.
    work: Notify,
    /// Fired once writing has stopped for good, by failure or by close.
    ended: CancellationToken,
}

#[derive(Debug)]
struct State {
    /// `None` once closed: dropping the last handle closes the child's
    /// stdin.
    pipe: Option<Arc<pipe::Sender>>,
    /// Bytes of whole frames not yet written, oldest first; the first may
    /// be partly written already.
    backlog: BytesMut,
    /// Close once the backlog is written.
    closing: bool,
    /// Why writing stopped, when a write failed.
    failure: Option<String>,
}

/// The pipe takes no more frames: it was closed, or a write to it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PipeClosed;

impl RequestPipe {
    /// Takes over a child's `stdin` and starts the flusher task. Must be
    /// called within a Tokio runtime.
    pub(crate) fn spawn(stdin: ChildStdin) -> io::Result<Self> {
        Ok(Self::over(pipe::Sender::from_owned_fd(
            stdin.into_owned_fd()?,
        )?))
    }

    /// Takes over `pipe` and starts the flusher task.
    fn over(pipe: pipe::Sender) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                pipe: Some(Arc::new(pipe)),
                backlog: BytesMut::new(),
                closing: false,
                failure: None,
            }),
            work: Notify::new(),
            ended: CancellationToken::new(),
        });
        tokio::spawn(flush(Arc::clone(&shared)));
        Self { shared }
    }

    /// Writes one frame, `header` then `body`, or queues what the pipe does
    /// not take at once. A write that fails is not the caller's error: it
    /// ends the pipe, and [`failure`](Self::failure) says why.
    pub(crate) fn send(&self, header: &[u8], body: &[u8]) -> Result<(), PipeClosed> {
        let mut state = self.shared.lock();
        let Some(pipe) = state.writable() else {
            return Err(PipeClosed);
        };
        if !state.backlog.is_empty() {
            state.backlog.extend_from_slice(header);
            state.backlog.extend_from_slice(body);
            return Ok(());
        }
        let written = match write_now(&pipe, header, body) {
            Ok(written) => written,
            Err(err) => {
                state.fail(&err);
                drop(state);
                // The flusher sees the pipe gone and ends too.
                self.shared.work.notify_one();
                self.shared.ended.cancel();
                return Ok(());
            }
        };
        if written == header.len() + body.len() {
            return Ok(());
        }
        let (header_left, body_left) = if written < header.len() {
            (&header[written..], body)
        } else {
            (&[][..], &body[written - header.len()..])
        };
        state.backlog.extend_from_slice(header_left);
        state.backlog.extend_from_slice(body_left);
        drop(state);
        self.shared.work.notify_one();
        Ok(())
    }

    /// Writes what is queued, then closes the child's stdin, even while
    /// other handles still exist.
    pub(crate) fn close(&self) {
        self.shared.lock().closing = true;
        self.shared.work.notify_one();
    }

    /// Waits until writing has stopped for good.
    pub(crate) async fn ended(&self) {
        self.shared.ended.cancelled().await;
    }

    /// Why writing stopped, if a write failed.
    pub(crate) fn failure(&self) -> Option<String> {
        self.shared.lock().failure.clone()
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is consistent between statements, so a poisoned lock is
        // still usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl State {
    /// The pipe, while frames may still be sent.
    fn writable(&self) -> Option<Arc<pipe::Sender>> {
        if self.closing || self.failure.is_some() {
            return None;
        }
        self.pipe.clone()
    }

    fn fail(&mut self, err: &io::Error) {
        self.failure.get_or_insert_with(|| err.to_string());
        self.backlog.clear();
        self.pipe = None;
    }
}

/// One vectored write of as much of the frame as the pipe takes now; a
/// full pipe takes nothing.
fn write_now(pipe: &pipe::Sender, header: &[u8], body: &[u8]) -> io::Result<usize> {
    loop {
        match pipe.try_write_vectored(&[IoSlice::new(header), IoSlice::new(body)]) {
            Ok(written) => return Ok(written),
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Ok(0),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        }
    }
}

/// The flusher: writes the backlog as the pipe drains, and closes the pipe
/// once asked to and the backlog is out.
async fn flush(shared: Arc<Shared>) {
    loop {
        let pipe = {
            let mut state = shared.lock();
            match (&state.pipe, state.backlog.is_empty()) {
                (None, _) => break,
                (Some(_), true) if state.closing => {
                    state.pipe = None;
                    break;
                }
                (Some(pipe), false) => Some(Arc::clone(pipe)),
                (Some(_), true) => None,
            }
        };
        let Some(pipe) = pipe else {
            shared.work.notified().await;
            continue;
        };
        if let Err(err) = write_backlog(&shared, &pipe).await {
            shared.lock().fail(&err);
            break;
        }
    }
    shared.ended.cancel();
}

/// Writes from the backlog once the pipe has room.
async fn write_backlog(shared: &Shared, pipe: &pipe::Sender) -> io::Result<()> {
    pipe.writable().await?;
    let mut state = shared.lock();
    if state.backlog.is_empty() {
        return Ok(());
    }
    match pipe.try_write(&state.backlog) {
        Ok(written) => state.backlog.advance(written),
        Err(err)
            if matches!(
                err.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ) => {}
        Err(err) => return Err(err),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::AsyncReadExt;

    use super::*;

    fn frame(index: usize, size: usize) -> (Vec<u8>, Vec<u8>) {
        let body = vec![b'a' + (index % 26) as u8; size];
        (format!("H{index}:").into_bytes(), body)
    }

    #[tokio::test]
    async fn a_frame_is_written_at_once_and_whole() {
        let (sender, mut receiver) = pipe::pipe().unwrap();
        let requests = RequestPipe::over(sender);
        requests.send(b"head ", b"body").unwrap();
        let mut got = [0u8; 9];
        receiver.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"head body");
        assert!(requests.shared.lock().backlog.is_empty());
    }

    #[tokio::test]
    async fn what_a_full_pipe_does_not_take_follows_in_order() {
        let (sender, mut receiver) = pipe::pipe().unwrap();
        let requests = RequestPipe::over(sender);
        let frames: Vec<_> = (0..40).map(|i| frame(i, 10_000)).collect();
        for (header, body) in &frames {
            requests.send(header, body).unwrap();
        }
        assert!(
            !requests.shared.lock().backlog.is_empty(),
            "the pipe never filled"
        );
        requests.close();
        let mut got = Vec::new();
        receiver.read_to_end(&mut got).await.unwrap();
        let expected: Vec<u8> = frames
            .iter()
            .flat_map(|(h, b)| [&h[..], &b[..]].concat())
            .collect();
        assert_eq!(got, expected);
        tokio::time::timeout(Duration::from_secs(5), requests.ended())
            .await
            .unwrap();
        assert_eq!(requests.failure(), None);
    }

    #[tokio::test]
    async fn a_closed_pipe_takes_no_more_frames() {
        let (sender, mut receiver) = pipe::pipe().unwrap();
        let requests = RequestPipe::over(sender);
        requests.close();
        assert_eq!(requests.send(b"h", b"b"), Err(PipeClosed));
        let mut got = Vec::new();
        receiver.read_to_end(&mut got).await.unwrap();
        assert!(got.is_empty());
    }

    #[tokio::test]
    async fn a_failed_write_ends_the_pipe_and_says_why() {
        let (sender, receiver) = pipe::pipe().unwrap();
        drop(receiver);
        let requests = RequestPipe::over(sender);
        requests.send(b"h", b"b").unwrap();
        tokio::time::timeout(Duration::from_secs(5), requests.ended())
            .await
            .unwrap();
        assert!(requests.failure().is_some());
        assert_eq!(requests.send(b"h", b"b"), Err(PipeClosed));
    }
}
