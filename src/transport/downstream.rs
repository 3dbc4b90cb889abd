//! The agent's side of one session, whatever carries it, and the seam
//! between network listeners and the relay: a listener accepts an MCP
//! session and hands its two directions to a [`SessionStarter`], without
//! knowing what the relay does with them.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;

use super::line::LineFrame;
use super::writer::FrameWriter;
use crate::hooks::Identity;
use crate::limits::LimitExceeded;

/// The agent's side of one session.
pub struct Downstream {
    /// Frames from the agent.
    pub frames: BoxStream<'static, std::io::Result<LineFrame>>,
    /// Frames to the agent.
    pub writer: FrameWriter,
    /// `stdio`, `http`, `ws` or `sse`, for `steps/sessionStart`.
    pub transport: &'static str,
    /// Headers the agent sent that go on to a network upstream unchanged:
    /// the `Mcp-Param-*` of a 2026-07-28 request the proxy could not check
    /// (intermediaries must forward those they do not recognise).
    pub upstream_headers: Vec<(String, String)>,
    /// Who the listener authenticated (over stdio: the OS or configured
    /// user); `None` when the listener asks for no credential.
    pub identity: Option<Arc<Identity>>,
    /// The agent's network address (`ip:port` of the TCP peer); `None`
    /// over stdio.
    pub client_address: Option<String>,
}

/// A running session, as a listener sees it.
pub struct SessionHandle {
    /// Finishes when the session has ended and its audit chain is sealed.
    pub done: tokio::task::JoinHandle<()>,
}

/// Starts a relay session for an accepted downstream session.
pub trait SessionStarter: Send + Sync {
    /// Connects `route`'s upstream and runs a session over `downstream` in
    /// the background. Fails (with a message fit for the agent) when the
    /// route is unknown or its upstream cannot be reached.
    fn start<'a>(
        &'a self,
        route: &'a str,
        downstream: Downstream,
    ) -> BoxFuture<'a, Result<SessionHandle, String>>;

    /// Records a session the listener refused before starting it because
    /// `limit` was reached (in an audit chain of its own).
    fn refused<'a>(
        &'a self,
        route: &'a str,
        transport: &'static str,
        limit: &'a LimitExceeded,
    ) -> BoxFuture<'a, ()>;
}
