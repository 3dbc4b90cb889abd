//! What every session of one network route shares: the parsed URL, the TLS
//! configuration and the HTTP client with its connection pool.
//!
//! Building a rustls configuration (with the public root store) and a
//! `reqwest::Client` per session cost tens of KB each, and a client of its
//! own kept one idle upstream connection per session. Sessions of a
//! Streamable HTTP server are told apart by `Mcp-Session-Id`, not by
//! connection, so every session of a route posts through one client and
//! its pool. The configured headers are not part of it: they go on each
//! request, since a session may add its own.
//!
//! The shared client speaks HTTP/1.1 only, even over TLS: one HTTP/2
//! connection would carry every session's long-lived GET stream, and a
//! server's limit on concurrent streams (often 100 to 250) would then
//! stall the route's other requests. Over HTTP/1.1 each exchange in flight
//! has a pooled connection of its own, and idle ones are reused.
//!
//! A route to a server that is down should fail when the session starts,
//! with a clear reason, rather than on its first message. Checking that
//! with a TCP connection per session is wasted work while the route's
//! sessions are being answered, so the check is skipped when the server
//! answered within [`REACHED_RECENTLY`], and made again after any request
//! could not reach it.
//!
//! With `[upstream.oauth]` the route also holds the proxy's access token
//! (`credentials`): [`RouteClient::send`] puts it on every request and,
//! after a 401, sends the request once more with a fresh one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::header::{HeaderValue, AUTHORIZATION};
use reqwest::{RequestBuilder, Response, StatusCode};

use super::credentials::ClientCredentials;
use super::net::{self, Target};
use crate::config::{UpstreamConfig, UpstreamTransport};
use crate::transport::upstream::UpstreamError;

/// How recent an answer from the server must be to skip the TCP check
/// when a session starts.
pub(crate) const REACHED_RECENTLY: Duration = Duration::from_secs(2);

/// The client side of one network route, shared by its sessions (cheap
/// to clone behind an [`Arc`]).
pub struct RouteClient {
    /// The route's URL.
    pub(crate) target: Target,
    /// Streamable HTTP and HTTP+SSE: the client and its connection pool.
    pub(crate) http: reqwest::Client,
    /// WebSocket: the TLS configuration for `wss://` (ALPN HTTP/1.1, which
    /// the upgrade needs; the HTTP client has a copy).
    pub(crate) tls: Arc<rustls::ClientConfig>,
    /// `[upstream.oauth]`: the proxy's own access token for the server.
    credentials: Option<ClientCredentials>,
    /// When the client was built: the origin of `reached_ms`.
    born: Instant,
    /// When the server last answered anything, in ms after `born` plus
    /// one; 0 when it has not since the last failure (an atomic, since
    /// every request of every session of the route sets it).
    reached_ms: AtomicU64,
}

impl RouteClient {
    /// Builds the client for `config`'s URL over `transport`.
    pub(crate) fn new(
        config: &UpstreamConfig,
        transport: UpstreamTransport,
    ) -> Result<Self, UpstreamError> {
        let schemes: &[&str] = match transport {
            UpstreamTransport::Ws => &["ws", "wss"],
            UpstreamTransport::StreamableHttp | UpstreamTransport::Sse => &["http", "https"],
        };
        let target = Target::new(config, schemes)?;
        let mut tls = net::tls_config(config, &target)?;
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let http = net::http_client(tls.clone(), &target)?;
        let credentials = match &config.oauth {
            Some(oauth) => Some(
                ClientCredentials::new(oauth.clone(), http.clone())
                    .map_err(|err| target.error(err))?,
            ),
            None => None,
        };
        Ok(Self {
            target,
            http,
            tls: Arc::new(tls),
            credentials,
            born: Instant::now(),
            reached_ms: AtomicU64::new(0),
        })
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.born.elapsed().as_millis())
            .unwrap_or(u64::MAX - 1)
            .saturating_add(1)
    }

    /// Fails with the reason when the server does not accept TCP
    /// connections, unless it answered within [`REACHED_RECENTLY`].
    pub(crate) async fn check_reachable(&self) -> Result<(), UpstreamError> {
        let reached = self.reached_ms.load(Ordering::Relaxed);
        let recent = reached != 0
            && self.now_ms().saturating_sub(reached) < REACHED_RECENTLY.as_millis() as u64;
        if recent {
            return Ok(());
        }
        net::probe(&self.target).await?;
        self.mark_reached();
        Ok(())
    }

    /// The server answered (whatever the status).
    pub(crate) fn mark_reached(&self) {
        self.reached_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    /// A request could not reach the server: the next session checks again.
    pub(crate) fn mark_unreached(&self) {
        self.reached_ms.store(0, Ordering::Relaxed);
    }

    /// The `Authorization` value for a connection or upgrade: the route's
    /// access token (`None` without `[upstream.oauth]`). A token endpoint
    /// that cannot issue one fails the connect with its reason.
    pub(crate) async fn authorization(&self) -> Result<Option<HeaderValue>, UpstreamError> {
        let Some(credentials) = &self.credentials else {
            return Ok(None);
        };
        let value = credentials.authorization().await;
        value.map(Some).map_err(|err| self.target.error(err))
    }

    /// After the upstream answered `rejected` with 401: a fresh token
    /// (`None` without `[upstream.oauth]`, or when none can be had).
    pub(crate) async fn renew_authorization(&self, rejected: &HeaderValue) -> Option<HeaderValue> {
        let credentials = self.credentials.as_ref()?;
        match credentials.renew(rejected).await {
            Ok(fresh) => Some(fresh),
            Err(err) => {
                tracing::warn!(route = %self.target.route, %err, "no fresh upstream access token");
                None
            }
        }
    }

    /// Sends `request` with the route's access token, if it has one; when
    /// the server answers 401, once more with a fresh token (a request
    /// refused for its credentials was not processed, so sending it again
    /// is safe). Without a token to be had the request goes without one,
    /// and the server's refusal is what the caller sees.
    pub(crate) async fn send(&self, request: RequestBuilder) -> reqwest::Result<Response> {
        let Some(credentials) = &self.credentials else {
            return request.send().await;
        };
        let again = request.try_clone();
        let token = match credentials.authorization().await {
            Ok(token) => token,
            Err(err) => {
                tracing::warn!(route = %self.target.route, %err, "no upstream access token");
                return request.send().await;
            }
        };
        let response = request.header(AUTHORIZATION, token.clone()).send().await?;
        if response.status() != StatusCode::UNAUTHORIZED {
            return Ok(response);
        }
        let Some(again) = again else {
            return Ok(response);
        };
        match self.renew_authorization(&token).await {
            Some(fresh) => again.header(AUTHORIZATION, fresh).send().await,
            None => Ok(response),
        }
    }

    /// Records the outcome of sending one request.
    pub(crate) fn note<T>(&self, sent: &Result<T, reqwest::Error>) {
        match sent {
            Ok(_) => self.mark_reached(),
            Err(_) => self.mark_unreached(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(name: &str, url: &str) -> UpstreamConfig {
        let mut config = UpstreamConfig::for_command(vec![]);
        config.name = name.into();
        config.url = Some(url.into());
        config
    }

    #[tokio::test]
    async fn a_recent_answer_skips_the_check_and_a_failure_brings_it_back() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let url = format!("http://127.0.0.1:{port}/mcp");
        let route = RouteClient::new(&config("a", &url), UpstreamTransport::StreamableHttp);
        let route = route.unwrap();
        assert!(route.check_reachable().await.is_err());
        route.mark_reached();
        assert!(route.check_reachable().await.is_ok());
        route.mark_unreached();
        assert!(route.check_reachable().await.is_err());
    }
}
