//! The upstream side of a session, whatever carries it: frames from the
//! MCP server, a writer for frames to it, and control over its lifetime.

use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use futures_util::{FutureExt, StreamExt};

use super::child::{ChildError, ChildExit, ChildProcess, ChildUpstream};
use super::line::LineFrame;
use super::writer::FrameWriter;
use crate::config::{UpstreamConfig, UpstreamTransport};
pub use crate::transport::http::client::route::RouteClients;

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

/// Connects to the upstream `config` describes: spawns its `command`, or
/// reaches its `url` over the transport it names, with a client of its own.
pub async fn connect(
    config: &UpstreamConfig,
    max_message_bytes: usize,
    queue: usize,
) -> Result<Upstream, UpstreamError> {
    connect_route(config, &RouteClients::default(), max_message_bytes, queue).await
}

/// Like [`connect`], but a network route's client (TLS configuration and
/// connection pool) is taken from `routes`, shared with the route's other
/// sessions.
pub async fn connect_route(
    config: &UpstreamConfig,
    routes: &RouteClients,
    max_message_bytes: usize,
    queue: usize,
) -> Result<Upstream, UpstreamError> {
    if let Some(transport) = config.network_transport() {
        let route = routes.get(config, transport)?;
        return match transport {
            UpstreamTransport::StreamableHttp => {
                super::http::client::connect(config, route, max_message_bytes, queue).await
            }
            UpstreamTransport::Sse => {
                super::sse::client::connect(config, route, max_message_bytes, queue).await
            }
            UpstreamTransport::Ws => {
                super::ws::client::connect(config, route, max_message_bytes, queue).await
            }
        };
    }
    let child = ChildUpstream::spawn(config, max_message_bytes, queue)?;
    let (process, frames, writer, writer_task) = child.into_parts();
    Ok(Upstream {
        frames: frames.boxed(),
        writer,
        writer_task: Some(writer_task),
        control: Box::new(process),
    })
}
