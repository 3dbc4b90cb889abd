//! Accepting connections: TCP, optional TLS, HTTP/1.1 or HTTP/2 (with
//! upgrades, for WebSocket), a header read timeout against slowloris, and
//! graceful shutdown. A verified client certificate (mutual TLS) is read
//! once per connection and handed to each of its requests.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use super::client_cert::{ClientCertError, ClientCertificate};

/// A TLS handshake must finish within this time.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// HTTP/2 connections are pinged this often to notice dead peers.
const H2_KEEP_ALIVE: Duration = Duration::from_secs(30);

/// Accepts connections until `stop` fires; returns the handle that ends
/// the connections still open. A client that has not sent a request's
/// headers within `header_read_timeout` is disconnected.
pub(crate) async fn accept_until(
    listener: TcpListener,
    app: Router,
    tls: Option<TlsAcceptor>,
    header_read_timeout: Duration,
    stop: CancellationToken,
) -> GracefulShutdown {
    let graceful = GracefulShutdown::new();
    let builder = Arc::new(connection_builder(header_read_timeout));
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (tcp, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(err) => {
                // Out of descriptors and the like: back off instead of spinning.
                tracing::warn!(%err, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let watcher = graceful.watcher();
        let builder = builder.clone();
        let app = app.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let first_request = header_read_timeout;
            match tls {
                None => serve(&builder, tcp, peer, app, None, watcher, first_request).await,
                Some(acceptor) => {
                    match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => match client_certificate(&stream) {
                            Ok(client) => {
                                serve(&builder, stream, peer, app, client, watcher, first_request)
                                    .await
                            }
                            Err(err) => tracing::debug!(%peer, %err, "closing the connection"),
                        },
                        Ok(Err(err)) => tracing::debug!(%peer, %err, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                }
            }
        });
    }
    graceful
}

/// The client certificate the handshake verified, if the client sent one
/// (only with `client_ca`); an error when it cannot be read.
fn client_certificate<I>(
    stream: &tokio_rustls::server::TlsStream<I>,
) -> Result<Option<ClientCertificate>, ClientCertError> {
    let Some(leaf) = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
    else {
        return Ok(None);
    };
    ClientCertificate::from_der(leaf).map(Some)
}

fn connection_builder(header_read_timeout: Duration) -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(H2_KEEP_ALIVE);
    builder
}

/// Serves one connection; each request carries the peer's address
/// (`ConnectInfo`) and the client certificate, if any. hyper's header read timeout covers HTTP/1.1
/// headers once the protocol is known, but neither a connection that
/// never sends a byte (the protocol is never detected) nor an HTTP/2
/// connection that never opens a stream; both are dropped when no request
/// has arrived within `first_request` of the connection's start.
async fn serve<I>(
    builder: &Builder<TokioExecutor>,
    io: I,
    peer: SocketAddr,
    app: Router,
    client: Option<ClientCertificate>,
    watcher: Watcher,
    first_request: Duration,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let requested = Arc::new(AtomicBool::new(false));
    let seen = requested.clone();
    let app = tower::ServiceExt::map_request(app, move |mut request: axum::http::Request<_>| {
        seen.store(true, Ordering::Relaxed);
        request.extensions_mut().insert(ConnectInfo(peer));
        if let Some(client) = &client {
            request.extensions_mut().insert(client.clone());
        }
        request
    });
    let service = TowerToHyperService::new(app);
    let connection = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
    let connection = watcher.watch(connection);
    tokio::pin!(connection);
    let result = tokio::select! {
        result = &mut connection => result,
        () = tokio::time::sleep(first_request) => {
            if !requested.load(Ordering::Relaxed) {
                tracing::debug!("no request within the header read timeout; closing");
                return;
            }
            connection.await
        }
    };
    if let Err(err) = result {
        tracing::debug!(%err, "a connection ended with an error");
    }
}
