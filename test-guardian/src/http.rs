//! The HTTP transport: every `POST` (any path) carries one JSON-RPC request;
//! the reply is HTTP 200 with the JSON-RPC reply as body, errors included.
//!
//! `drop` closes the TCP connection without a response. axum has no handle
//! on a handler's connection, so the listener keeps a duplicate of each
//! accepted socket and hands it to the handler as connect info; dropping
//! shuts that socket down in both directions.
//!
//! With a [`Closing`] mode the connections are served by [`crate::closing`]
//! instead, which closes them after each answer or after a short idle time
//! without saying so, as some real servers do.

use std::io;
use std::net::{Shutdown, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::body::Bytes;
use axum::extract::connect_info::Connected;
use axum::extract::{ConnectInfo, DefaultBodyLimit, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::serve::{IncomingStream, Listener};
use axum::Router;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::closing::{self, Closing};
use crate::guardian::Guardian;
use crate::reply::Reply;

/// Request bodies up to this size are accepted (axum's default is 2 MiB).
pub(crate) const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// Serves `guardian` on `addr` until the process ends, closing
/// connections as `closing` says (by default they stay open as long as the
/// client wants). Once listening, the bound address (`127.0.0.1:PORT`) is
/// written to `addr_file` (atomically: a temporary file renamed into place)
/// and logged.
pub async fn serve(
    guardian: Arc<Guardian>,
    addr: SocketAddr,
    addr_file: Option<PathBuf>,
    closing: Option<Closing>,
) -> anyhow::Result<()> {
    let bound = Bound::bind(addr).await?;
    if let Some(path) = &addr_file {
        write_addr_file(path, bound.local_addr())?;
    }
    crate::log(&format!("listening on http://{}", bound.local_addr()));
    match closing {
        Some(closing) => {
            closing::run(bound.listener, guardian, closing).await;
            Ok(())
        }
        None => bound.run(guardian).await,
    }
}

/// Binds `addr` and serves `guardian` in a task on the current tokio
/// runtime: the in-process way to run a Guardian from a Rust test.
pub async fn spawn(
    guardian: Arc<Guardian>,
    addr: SocketAddr,
) -> anyhow::Result<(SocketAddr, JoinHandle<anyhow::Result<()>>)> {
    let bound = Bound::bind(addr).await?;
    let local = bound.local_addr();
    Ok((local, tokio::spawn(bound.run(guardian))))
}

/// A listening socket that is not serving yet.
pub struct Bound {
    listener: TcpListener,
    local: SocketAddr,
}

impl Bound {
    /// Binds `addr` (port 0 picks a free port).
    pub async fn bind(addr: SocketAddr) -> anyhow::Result<Bound> {
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding {addr}"))?;
        let local = listener.local_addr().context("reading the bound address")?;
        Ok(Bound { listener, local })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Serves `guardian` until the task is dropped or the listener fails.
    pub async fn run(self, guardian: Arc<Guardian>) -> anyhow::Result<()> {
        let app = Router::new()
            .fallback(handle)
            .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
            .with_state(guardian);
        axum::serve(
            DroppableListener(self.listener),
            app.into_make_service_with_connect_info::<Connection>(),
        )
        .await
        .context("serving HTTP")
    }
}

fn write_addr_file(path: &Path, bound: SocketAddr) -> anyhow::Result<()> {
    let mut temp = path.as_os_str().to_owned();
    temp.push(".tmp");
    let temp = PathBuf::from(temp);
    std::fs::write(&temp, bound.to_string())
        .with_context(|| format!("writing {}", temp.display()))?;
    std::fs::rename(&temp, path).with_context(|| format!("renaming to {}", path.display()))
}

/// One request: run the Guardian, wait, answer (or not).
async fn handle(
    State(guardian): State<Arc<Guardian>>,
    ConnectInfo(connection): ConnectInfo<Connection>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if method != Method::POST {
        return (StatusCode::METHOD_NOT_ALLOWED, "POST a JSON-RPC request\n").into_response();
    }
    let traceparent = headers
        .get("traceparent")
        .and_then(|value| value.to_str().ok());
    let outcome = guardian.handle_traced(&body, traceparent);
    if !outcome.delay.is_zero() {
        tokio::time::sleep(outcome.delay).await;
    }
    match outcome.reply {
        Reply::Send(bytes) => ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        Reply::Silent => std::future::pending().await,
        Reply::Drop => {
            connection.close();
            // Give the peer's EOF a head start; this response is never
            // delivered because the socket is already shut down.
            tokio::time::sleep(Duration::from_millis(10)).await;
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// Connect info: the peer and a duplicate of the connection's socket.
#[derive(Clone, Debug)]
pub struct Connection {
    peer: SocketAddr,
    socket: Option<Arc<std::net::TcpStream>>,
}

impl Connection {
    /// Closes the connection in both directions (the peer sees EOF).
    fn close(&self) {
        match &self.socket {
            Some(socket) => {
                if let Err(err) = socket.shutdown(Shutdown::Both) {
                    crate::log(&format!(
                        "dropping the connection from {}: {err}",
                        self.peer
                    ));
                }
            }
            None => crate::log("drop: no socket handle for this connection"),
        }
    }
}

impl Connected<IncomingStream<'_, DroppableListener>> for Connection {
    fn connect_info(stream: IncomingStream<'_, DroppableListener>) -> Self {
        stream.remote_addr().clone()
    }
}

/// A TCP listener whose connections can be shut down from a handler.
pub struct DroppableListener(TcpListener);

impl DroppableListener {
    /// Splits an accepted stream into the stream hyper serves and a
    /// duplicate of its socket for [`Connection::close`].
    fn split(stream: TcpStream) -> io::Result<(TcpStream, Arc<std::net::TcpStream>)> {
        let std_stream = stream.into_std()?;
        let duplicate = std_stream.try_clone()?;
        Ok((TcpStream::from_std(std_stream)?, Arc::new(duplicate)))
    }
}

impl Listener for DroppableListener {
    type Io = TcpStream;
    type Addr = Connection;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.0.accept().await {
                Ok((stream, peer)) => match DroppableListener::split(stream) {
                    Ok((stream, socket)) => {
                        return (
                            stream,
                            Connection {
                                peer,
                                socket: Some(socket),
                            },
                        );
                    }
                    Err(err) => {
                        crate::log(&format!("cannot set up the connection from {peer}: {err}"))
                    }
                },
                Err(err) => {
                    crate::log(&format!("accept failed: {err}"));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(Connection {
            peer: self.0.local_addr()?,
            socket: None,
        })
    }
}
