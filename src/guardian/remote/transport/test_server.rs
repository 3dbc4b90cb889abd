//! A stand-in HTTP(S) Guardian for the transport tests, on 127.0.0.1:0.
//!
//! It counts accepted TCP connections (to prove connection reuse) and
//! failed TLS handshakes (to prove mTLS refusals happen in TLS).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::http::header::{CONTENT_TYPE, LOCATION};
use axum::http::{HeaderMap, StatusCode, Version};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use bytes::Bytes;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tokio_util::either::Either;

/// A running test server; stopped when dropped.
pub(crate) struct TestServer {
    /// `http://127.0.0.1:PORT` or `https://localhost:PORT`, without a path.
    pub base: String,
    accepted: Arc<AtomicUsize>,
    tls_failures: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl TestServer {
    /// Serves plain HTTP/1.1.
    pub async fn plain() -> Self {
        Self::start(None, "http://127.0.0.1").await
    }

    /// Serves HTTPS (h2 and http/1.1) with the given rustls configuration.
    pub async fn tls(config: Arc<rustls::ServerConfig>) -> Self {
        Self::start(Some(TlsAcceptor::from(config)), "https://localhost").await
    }

    /// TCP connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// TLS handshakes the server refused so far.
    pub fn tls_failures(&self) -> usize {
        self.tls_failures.load(Ordering::SeqCst)
    }

    async fn start(tls: Option<TlsAcceptor>, host: &str) -> Self {
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = tcp.local_addr().unwrap().port();
        let listener = CountingListener {
            tcp,
            tls,
            accepted: Arc::default(),
            tls_failures: Arc::default(),
        };
        let accepted = Arc::clone(&listener.accepted);
        let tls_failures = Arc::clone(&listener.tls_failures);
        let task = tokio::spawn(async move {
            axum::serve(listener, routes()).await.unwrap();
        });
        Self {
            base: format!("{host}:{port}"),
            accepted,
            tls_failures,
            task,
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `POST /acs` echoes a JSON body, `/version` names the HTTP version,
/// `/status/503` fails, `/redirect` points elsewhere.
fn routes() -> Router {
    Router::new()
        .route("/acs", post(echo))
        .route(
            "/version",
            post(|version: Version| async move { format!("{version:?}") }),
        )
        .route(
            "/status/503",
            post(|| async { StatusCode::SERVICE_UNAVAILABLE }),
        )
        .route(
            "/redirect",
            post(|| async { (StatusCode::TEMPORARY_REDIRECT, [(LOCATION, "/acs")]) }),
        )
}

async fn echo(headers: HeaderMap, body: Bytes) -> Response {
    if headers
        .get(CONTENT_TYPE)
        .is_none_or(|v| v != "application/json")
    {
        return StatusCode::UNSUPPORTED_MEDIA_TYPE.into_response();
    }
    body.into_response()
}

struct CountingListener {
    tcp: TcpListener,
    tls: Option<TlsAcceptor>,
    accepted: Arc<AtomicUsize>,
    tls_failures: Arc<AtomicUsize>,
}

impl axum::serve::Listener for CountingListener {
    type Io = Either<TcpStream, TlsStream<TcpStream>>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, SocketAddr) {
        loop {
            let Ok((tcp, addr)) = self.tcp.accept().await else {
                continue;
            };
            self.accepted.fetch_add(1, Ordering::SeqCst);
            let Some(acceptor) = &self.tls else {
                return (Either::Left(tcp), addr);
            };
            match acceptor.accept(tcp).await {
                Ok(stream) => return (Either::Right(stream), addr),
                Err(_) => {
                    self.tls_failures.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.tcp.local_addr()
    }
}
