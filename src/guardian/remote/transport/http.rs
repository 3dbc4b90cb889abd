//! The Guardian over HTTP(S): each call is one `POST` of the JSON-RPC body,
//! and only `200 OK` carries a reply (ACS Guardians answer JSON-RPC errors
//! with 200 too, so any other status is a transport failure).
//!
//! One pooled [hyper client](hyper_util::client::legacy::Client) keeps
//! connections alive between calls. Over TLS it offers HTTP/2 by ALPN, so a
//! Guardian that speaks it multiplexes concurrent calls on one connection;
//! plain `http://` stays HTTP/1.1. Redirects are not followed (a decision
//! must come from the configured Guardian), and no proxy is used (the
//! Guardian is named explicitly, and a proxy would see every hook). The
//! URL is parsed once, here. reqwest, which the upstream clients use,
//! parsed it again (with IDNA) for every request and wrapped each in layers
//! a client of one fixed URL does not need; on this path that cost about
//! 60 µs of proxy CPU per sequential call (BENCHMARKS.md, "Remote
//! Guardian").
//!
//! # Stale connections
//!
//! A Guardian may close a kept-alive connection without saying so (no
//! `Connection: close`): an HTTP/1.0-style server or one behind a proxy
//! closes after every answer, others after a few idle seconds. A request
//! sent on such a connection just as it closes fails before any byte of an
//! answer, and the Guardian never saw it. So a request whose connection
//! closed or was reset before the answer began ([`TransportError::Closed`]
//! out of the send) is sent again, once, on a new connection (a second
//! client that keeps none), before the failure reaches the caller and its
//! failure posture. A refused or timed-out connect is not sent again: a
//! Guardian that is down fails as fast as before. The client does not say
//! whether the failed connection was a reused one, so a Guardian that
//! really read the request and then hung up gets it again too; it is the
//! same signed envelope (same `request_id`, same nonce), which an ACS
//! Guardian refuses as a replay (-32005), and then the first failure
//! stands rather than the replay refusal. Idle connections are also let go
//! after [`POOL_IDLE_TIMEOUT`], before the common 5 s server keep-alive
//! would close them under a request. Resends are counted in
//! `acs_proxy_guardian_retries_total{outcome}`.

use std::error::Error as StdError;
use std::io;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::future::BoxFuture;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Incoming};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode, Uri};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use prometheus::IntCounterVec;
use serde_json::Value;

use super::error::TransportError;
use super::tls::TlsSettings;
use super::GuardianTransport;
use crate::guardian::remote::wire::codes::REPLAY_DETECTED;
use crate::metrics::METRICS;
use crate::telemetry::carrier::{self, Carrier};

/// How long a TCP + TLS connect may take. A refused connection fails at
/// once; this bounds only silent networks, well inside a decision timeout.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The default limit on a reply body, the same as the proxy's default
/// message limit.
pub const DEFAULT_MAX_REPLY: usize = 16 * 1024 * 1024;

/// How long an idle connection stays in the pool. Below the 5 s keep-alive
/// many servers close at (uvicorn, Node.js, Apache httpd), so acs-proxy
/// lets go of a quiet connection first instead of racing the Guardian's
/// close; hyper's default is 90 s. Reconnecting after a quiet spell costs
/// one connect, well inside any decision timeout.
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(4);

/// `acs_proxy_guardian_retries_total{outcome}`: requests sent again on a
/// new connection after the first one closed before an answer began, by
/// what the resend got: `answered` (a reply: the hook is decided after
/// all), `replay` (refused as a replay: the Guardian had the first one, so
/// its failure stands) or `failed` (the resend failed too).
pub static GUARDIAN_RETRIES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    METRICS.register_counter_vec(
        "acs_proxy_guardian_retries_total",
        "Guardian requests sent again on a new connection after the first closed before an answer, by outcome",
        &["outcome"],
    )
});

/// The `outcome` labels of [`GUARDIAN_RETRIES`].
const RETRY_OUTCOMES: [&str; 3] = ["answered", "replay", "failed"];

/// TCP, then TLS for `https://`, the two bounded by [`CONNECT_TIMEOUT`].
#[derive(Debug, Clone)]
struct Connector(HttpsConnector<HttpConnector>);

/// What [`Connector`] yields: the stream hyper-rustls opens.
type Connection = <HttpsConnector<HttpConnector> as tower::Service<Uri>>::Response;

/// A connector's failure, as hyper takes it.
type ConnectError = Box<dyn StdError + Send + Sync>;

impl tower::Service<Uri> for Connector {
    type Response = Connection;
    type Error = ConnectError;
    type Future = BoxFuture<'static, Result<Connection, ConnectError>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), ConnectError>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.0.call(uri);
        Box::pin(async move {
            match tokio::time::timeout(CONNECT_TIMEOUT, connecting).await {
                Ok(connected) => connected,
                Err(_) => Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no connection within {CONNECT_TIMEOUT:?}"),
                )
                .into()),
            }
        })
    }
}

/// The pooled client both kinds of connection go through.
type GuardianClient = Client<Connector, Full<Bytes>>;

/// A Guardian reached by HTTP `POST` to one URL.
#[derive(Debug, Clone)]
pub struct HttpTransport {
    /// Keeps connections alive between calls.
    client: GuardianClient,
    /// Keeps no connection, so every request on it goes out on a new one:
    /// used only to send a request again after its pooled connection
    /// closed under it. Built once here, so a resend costs a connect and
    /// nothing more.
    fresh: GuardianClient,
    uri: Uri,
    name: &'static str,
    max_reply: usize,
}

impl HttpTransport {
    /// A transport posting to `url` (`http://` or `https://`). TLS settings
    /// are refused with a plain `http://` URL, where they would silently do
    /// nothing.
    pub fn new(url: &str, tls: TlsSettings) -> Result<Self, TransportError> {
        let config_error = |err: &dyn std::fmt::Display| {
            TransportError::Config(format!("Guardian URL {url:?}: {err}"))
        };
        let uri: Uri = url.parse().map_err(|err| config_error(&err))?;
        let name = match uri.scheme_str() {
            Some("https") => "https",
            Some("http") if tls.is_empty() => "http",
            Some("http") => {
                return Err(TransportError::Config(
                    "TLS settings need an https:// Guardian URL".into(),
                ))
            }
            other => {
                return Err(TransportError::Config(format!(
                    "Guardian URL scheme {:?} is not http or https",
                    other.unwrap_or("")
                )))
            }
        };
        if uri.host().is_none_or(str::is_empty) {
            return Err(config_error(&"no host"));
        }
        // Built even for http://: one connector serves both schemes, and
        // this configuration does not rely on a process-wide provider.
        let tls = tls.client_config()?;
        let connector = connector(tls);
        let client = Client::builder(TokioExecutor::new())
            .timer(TokioTimer::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .build(connector.clone());
        let fresh = Client::builder(TokioExecutor::new())
            .timer(TokioTimer::new())
            .pool_max_idle_per_host(0)
            .build(connector);
        // Every outcome shows on /metrics from the start, at 0.
        for outcome in RETRY_OUTCOMES {
            GUARDIAN_RETRIES.with_label_values(&[outcome]);
        }
        Ok(Self {
            client,
            fresh,
            uri,
            name,
            max_reply: DEFAULT_MAX_REPLY,
        })
    }

    /// Sets the largest reply body accepted.
    pub fn with_max_reply(mut self, max_reply: usize) -> Self {
        self.max_reply = max_reply;
        self
    }

    /// The Guardian's URL.
    pub fn uri(&self) -> &Uri {
        &self.uri
    }

    /// One call: the request on a pooled connection, and once more on a
    /// new one if that connection closed before the answer began (see the
    /// module documentation).
    async fn post(&self, body: Bytes) -> Result<Bytes, TransportError> {
        // A clone of `Bytes` shares the buffer; it is kept for the resend.
        match self.send(&self.client, body.clone()).await {
            Ok(response) => self.read_reply(response).await,
            Err(first) if closed_before_reply(&first) => self.send_again(body, first).await,
            Err(err) => Err(err),
        }
    }

    /// Sends the request once, up to the response head.
    async fn send(
        &self,
        client: &GuardianClient,
        body: Bytes,
    ) -> Result<Response<Incoming>, TransportError> {
        let mut request = Request::post(self.uri.clone())
            .body(Full::new(body))
            .map_err(|err| TransportError::Config(format!("Guardian request: {err}")))?;
        let headers = request.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        // The Guardian call's span, when traced, continues in the Guardian.
        // The carrier's fields are printed by acs-proxy itself, so a value
        // that is not a header value does not occur; it would be left out.
        if let Some(carrier) = Carrier::current() {
            if let Ok(parent) = HeaderValue::try_from(carrier.traceparent) {
                headers.insert(carrier::TRACEPARENT, parent);
            }
            if let Some(Ok(state)) = carrier.tracestate.map(HeaderValue::try_from) {
                headers.insert(carrier::TRACESTATE, state);
            }
        }
        client.request(request).await.map_err(classify)
    }

    /// The resend on a new connection, after `first` closed before an
    /// answer began. A reply refusing the request as a replay means the
    /// Guardian did read the first send, so `first` is the failure to
    /// report: the resend's refusal would blame acs-proxy for a replay.
    async fn send_again(
        &self,
        body: Bytes,
        first: TransportError,
    ) -> Result<Bytes, TransportError> {
        tracing::debug!(error = %first, "the Guardian connection closed before an answer; sending again on a new connection");
        let result = match self.send(&self.fresh, body).await {
            Ok(response) => self.read_reply(response).await,
            Err(err) => Err(err),
        };
        let (outcome, result) = match result {
            Ok(reply) if refused_as_replay(&reply) => ("replay", Err(had_it(first))),
            Ok(reply) => ("answered", Ok(reply)),
            Err(err) => ("failed", Err(err)),
        };
        GUARDIAN_RETRIES.with_label_values(&[outcome]).inc();
        result
    }

    /// The reply of a response: its body if the status is 200.
    async fn read_reply(&self, response: Response<Incoming>) -> Result<Bytes, TransportError> {
        if response.status() != StatusCode::OK {
            return Err(TransportError::Status {
                status: response.status().as_u16(),
            });
        }
        self.read_body(response).await
    }

    /// Reads the reply, refusing one over the limit before buffering it
    /// when the length is announced, and as soon as it passes the limit
    /// otherwise.
    async fn read_body(&self, response: Response<Incoming>) -> Result<Bytes, TransportError> {
        let too_large = |length: u64| TransportError::FrameTooLarge {
            length,
            max: self.max_reply,
        };
        let mut incoming = response.into_body();
        let announced = incoming.size_hint().exact().unwrap_or(0);
        if announced > self.max_reply as u64 {
            return Err(too_large(announced));
        }
        let mut body = BytesMut::with_capacity(announced as usize);
        while let Some(frame) = incoming.frame().await {
            let Ok(chunk) = frame.map_err(classify)?.into_data() else {
                continue;
            };
            let length = body.len() + chunk.len();
            if length > self.max_reply {
                return Err(too_large(length as u64));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body.freeze())
    }
}

impl GuardianTransport for HttpTransport {
    fn call<'a>(&'a self, body: Bytes) -> BoxFuture<'a, Result<Bytes, TransportError>> {
        Box::pin(self.post(body))
    }

    fn name(&self) -> &'static str {
        self.name
    }
}

/// What both clients share: TCP with `TCP_NODELAY` (a request is one
/// write and its answer is awaited), TLS with HTTP/2 and HTTP/1.1 offered
/// for `https://`, the connect timeout over both.
fn connector(mut tls: rustls::ClientConfig) -> Connector {
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    // The builder offers its own ALPN list (the same two protocols).
    tls.alpn_protocols.clear();
    let https = HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_all_versions()
        .wrap_connector(tcp);
    Connector(https)
}

/// Whether a failed send is worth sending again on a new connection: the
/// connection closed or was reset before any byte of the answer (what a
/// stale pooled connection does). Not a failed connect, a timeout or a TLS
/// failure: a new connection would fail the same way, only later.
fn closed_before_reply(err: &TransportError) -> bool {
    matches!(err, TransportError::Closed(_))
}

/// Whether a reply (one object, or a batch array) refuses a request as a
/// replay (-32005). Only resends are read this way, so the full parse
/// costs nothing on the common path.
fn refused_as_replay(reply: &[u8]) -> bool {
    let is_replay = |value: &Value| {
        value
            .get("error")
            .and_then(|error| error.get("code"))
            .and_then(Value::as_i64)
            == Some(REPLAY_DETECTED)
    };
    match serde_json::from_slice::<Value>(reply) {
        Ok(Value::Array(elements)) => elements.iter().any(is_replay),
        Ok(value) => is_replay(&value),
        Err(_) => false,
    }
}

/// The first failure of a request the Guardian turned out to have read.
fn had_it(first: TransportError) -> TransportError {
    match first {
        TransportError::Closed(message) => TransportError::Closed(format!(
            "{message} (the Guardian had read the request: sent again, it was refused as a replay)"
        )),
        other => other,
    }
}

/// Sorts a client failure into the cause the caller needs to see.
fn classify(err: impl StdError + 'static) -> TransportError {
    let message = describe(&err);
    if causes(&err).any(is_tls) {
        return TransportError::Tls(message);
    }
    if causes(&err).any(is_connect) {
        return TransportError::Connect(message);
    }
    match causes(&err).find_map(io_kind) {
        Some(
            io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::UnexpectedEof,
        ) => TransportError::Closed(message),
        _ if causes(&err).any(is_incomplete_message) => TransportError::Closed(message),
        kind => TransportError::Io(Arc::new(io::Error::new(
            kind.unwrap_or(io::ErrorKind::Other),
            message,
        ))),
    }
}

/// The error and its causes, outermost first.
fn causes<'a>(
    err: &'a (dyn StdError + 'static),
) -> impl Iterator<Item = &'a (dyn StdError + 'static)> {
    std::iter::successors(Some(err), |&err| next_cause(err))
}

fn next_cause<'a>(err: &'a (dyn StdError + 'static)) -> Option<&'a (dyn StdError + 'static)> {
    // io::Error::source skips the error it wraps; step into it instead.
    match err.downcast_ref::<io::Error>().and_then(io::Error::get_ref) {
        Some(inner) => Some(inner as &(dyn StdError + 'static)),
        None => err.source(),
    }
}

/// A rustls error anywhere in the chain. Over HTTP/2 the h2 error that
/// wraps it exposes no source, so a TLS alert there (the Guardian refusing
/// our client certificate after a TLS 1.3 handshake) is recognised by the
/// text rustls gives it.
fn is_tls(err: &(dyn StdError + 'static)) -> bool {
    err.is::<rustls::Error>()
        || (err.source().is_none() && err.to_string().starts_with("received fatal alert"))
}

fn io_kind(err: &(dyn StdError + 'static)) -> Option<io::ErrorKind> {
    err.downcast_ref::<io::Error>().map(io::Error::kind)
}

/// hyper's "connection closed before message completed": the connection
/// ended before any of the answer, with no I/O error underneath.
fn is_incomplete_message(err: &(dyn StdError + 'static)) -> bool {
    err.downcast_ref::<hyper::Error>()
        .is_some_and(hyper::Error::is_incomplete_message)
}

/// A failure to connect, or a connect that outlived [`CONNECT_TIMEOUT`].
fn is_connect(err: &(dyn StdError + 'static)) -> bool {
    err.downcast_ref::<hyper_util::client::legacy::Error>()
        .is_some_and(hyper_util::client::legacy::Error::is_connect)
}

/// The whole cause chain in one line, for the operator.
fn describe(err: &(dyn StdError + 'static)) -> String {
    let mut text = String::new();
    for cause in causes(err) {
        let part = cause.to_string();
        if !text.contains(&part) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&part);
        }
    }
    text
}

#[cfg(test)]
mod tests;
