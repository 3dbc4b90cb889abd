//! The upstream side of a session, whatever carries it: frames from the
//! MCP server, a writer for frames to it, and control over its lifetime.
//!
//! The implementations (`child`, and the network clients under `http`,
//! `sse` and `ws`) build on these types; picking one for a route is
//! [`connect`](super::connect)'s job, re-exported here for callers.

use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use futures_util::FutureExt;

use super::child::{ChildError, ChildExit, ChildProcess};
use super::line::LineFrame;
use super::writer::FrameWriter;
pub use crate::transport::connect::{connect, connect_route, RouteClients};

/// How an upstream ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamExit {
    /// A child process exited.
    Child(ChildExit),
    /// A network upstream closed or failed.
    Closed(String),
}

impl UpstreamExit {
    /// A one-line reason, for the error every pending request receives.
    pub fn describe(&self) -> String {
        match self {
            UpstreamExit::Child(ChildExit {
                code: Some(code), ..
            }) => {
                format!("the upstream server exited with status {code}")
            }
            UpstreamExit::Child(_) => "the upstream server was killed by a signal".to_owned(),
            UpstreamExit::Closed(reason) => format!("the upstream server went away: {reason}"),
        }
    }
}

/// Control over an upstream's lifetime.
pub trait UpstreamControl: Send {
    /// Waits until the upstream ends on its own.
    fn wait(&mut self) -> BoxFuture<'_, UpstreamExit>;
    /// Ends the upstream in order; its writer has already been closed.
    fn shutdown(&mut self) -> BoxFuture<'_, UpstreamExit>;
}

impl UpstreamControl for ChildProcess {
    fn wait(&mut self) -> BoxFuture<'_, UpstreamExit> {
        ChildProcess::wait(self).map(UpstreamExit::Child).boxed()
    }

    fn shutdown(&mut self) -> BoxFuture<'_, UpstreamExit> {
        ChildProcess::shutdown(self)
            .map(UpstreamExit::Child)
            .boxed()
    }
}

/// One connected upstream.
pub struct Upstream {
    /// Frames from the server.
    pub frames: BoxStream<'static, std::io::Result<LineFrame>>,
    /// Frames to the server; closing it closes the server's input.
    pub writer: FrameWriter,
    /// Finishes once everything written has reached the server.
    pub writer_task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    /// Lifetime control.
    pub control: Box<dyn UpstreamControl>,
}

/// Why an upstream could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// A stdio server could not be started.
    #[error(transparent)]
    Child(#[from] ChildError),
    /// A network server could not be reached or refused the connection.
    #[error("upstream {route}: {reason}")]
    Network {
        /// The route name.
        route: String,
        /// What went wrong.
        reason: String,
    },
}
