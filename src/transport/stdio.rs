//! The proxy's own stdin/stdout as the downstream side (the agent spawned us).
//!
//! stdout belongs to the agent: only MCP frames are written there, and all
//! logging goes to stderr.
//!
//! When fd 0 and fd 1 are pipes or sockets (the normal case: an agent spawns
//! the proxy with piped stdio) they are driven through the runtime's epoll
//! reactor on duplicated, non-blocking descriptors. `tokio::io::stdin()` and
//! `stdout()` instead run every read and write on tokio's blocking pool,
//! which costs a thread hand-off per message in each direction; see
//! BENCHMARKS.md, "Where the time goes". Anything epoll cannot watch (a
//! regular file given with `< file`, `/dev/null`) or that should not be made
//! non-blocking (a terminal, shared with the shell) keeps those adapters.
//!
//! O_NONBLOCK is set on the open file description, which every copy of that
//! pipe end shares. In practice only the proxy holds its ends; if stderr was
//! redirected into the same pipe as stdout, a log line written while the
//! agent is not reading can be dropped instead of blocking the proxy.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::unix::pipe;
use tokio::net::UnixStream;
use tokio_util::codec::FramedRead;

mod caller;

pub use self::caller::caller;

use super::line::LineCodec;
use super::writer::FrameWriter;

/// The agent side of a stdio deployment.
pub struct StdioDownstream {
    /// Frames from the agent.
    pub reader: FramedRead<StdinReader, LineCodec>,
    /// Frames to the agent.
    pub writer: FrameWriter,
    /// The writer task; finishes once every queued frame is written.
    pub writer_task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl StdioDownstream {
    /// Wraps the process's stdin and stdout. Must run inside the runtime
    /// (the epoll-driven variants register with its reactor).
    pub fn open(max_message_bytes: usize, queue: usize) -> Self {
        let reader = FramedRead::new(StdinReader::open(), LineCodec::new(max_message_bytes));
        let (writer, writer_task) = match Polled::open(io::stdout().as_fd(), Direction::Write) {
            Some(Polled::Pipe(PipeEnd::Write(sender))) => FrameWriter::spawn(sender, queue),
            Some(Polled::Socket(socket)) => FrameWriter::spawn(socket, queue),
            _ => FrameWriter::spawn(tokio::io::stdout(), queue),
        };
        Self {
            reader,
            writer,
            writer_task,
        }
    }
}

/// The process's stdin: epoll-driven when it is a pipe or a socket, tokio's
/// blocking-pool adapter otherwise.
pub enum StdinReader {
    /// A pipe read through the reactor.
    Pipe(pipe::Receiver),
    /// A socket (e.g. a socketpair from the agent) read through the reactor.
    Socket(UnixStream),
    /// A terminal or a regular file, read on the blocking pool.
    Blocking(tokio::io::Stdin),
}

impl StdinReader {
    fn open() -> Self {
        match Polled::open(io::stdin().as_fd(), Direction::Read) {
            Some(Polled::Pipe(PipeEnd::Read(receiver))) => Self::Pipe(receiver),
            Some(Polled::Socket(socket)) => Self::Socket(socket),
            _ => Self::Blocking(tokio::io::stdin()),
        }
    }
}

impl AsyncRead for StdinReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Pipe(receiver) => Pin::new(receiver).poll_read(cx, buf),
            Self::Socket(socket) => Pin::new(socket).poll_read(cx, buf),
            Self::Blocking(stdin) => Pin::new(stdin).poll_read(cx, buf),
        }
    }
}

#[derive(Clone, Copy)]
enum Direction {
    Read,
    Write,
}

enum PipeEnd {
    Read(pipe::Receiver),
    Write(pipe::Sender),
}

/// A standard stream the reactor can drive.
enum Polled {
    Pipe(PipeEnd),
    Socket(UnixStream),
}

impl Polled {
    /// Duplicates `fd` and registers the copy with the reactor if it is a
    /// pipe or a socket; `None` (use the blocking adapter) otherwise or on
    /// any error, so an unusual descriptor never stops the proxy.
    fn open(fd: std::os::fd::BorrowedFd<'_>, direction: Direction) -> Option<Self> {
        let owned: OwnedFd = fd.try_clone_to_owned().ok()?;
        let file = std::fs::File::from(owned);
        let file_type = file.metadata().ok()?.file_type();
        if file_type.is_fifo() {
            // `from_file` checks the access mode and sets O_NONBLOCK.
            let end = match direction {
                Direction::Read => PipeEnd::Read(pipe::Receiver::from_file(file).ok()?),
                Direction::Write => PipeEnd::Write(pipe::Sender::from_file(file).ok()?),
            };
            Some(Self::Pipe(end))
        } else if file_type.is_socket() {
            // Only recv(2)/send(2) with no flags are used, which behave alike
            // for any stream socket, so the Unix stream wrapper serves for all.
            let socket = std::os::unix::net::UnixStream::from(OwnedFd::from(file));
            socket.set_nonblocking(true).ok()?;
            Some(Self::Socket(UnixStream::from_std(socket).ok()?))
        } else {
            None
        }
    }
}
