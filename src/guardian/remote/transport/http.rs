//! The Guardian over HTTP(S): each call is one `POST` of the JSON-RPC body,
//! and only `200 OK` carries a reply (ACS Guardians answer JSON-RPC errors
//! with 200 too, so any other status is a transport failure).
//!
//! One [`reqwest::Client`] keeps connections alive between calls. Over TLS
//! it offers HTTP/2 by ALPN, so a Guardian that speaks it multiplexes
//! concurrent calls on one connection; plain `http://` stays HTTP/1.1.
//! Redirects are not followed (a decision must come from the configured
//! Guardian), and proxy environment variables are ignored (the Guardian is
//! named explicitly, and a proxy would see every hook).
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
//! Guardian that is down fails as fast as before. reqwest does not say
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
use prometheus::IntCounterVec;
use reqwest::header::CONTENT_TYPE;
use reqwest::{StatusCode, Url};
use serde_json::Value;

use super::error::TransportError;
use super::tls::TlsSettings;
use super::GuardianTransport;
use crate::guardian::remote::wire::codes::REPLAY_DETECTED;
use crate::metrics::METRICS;

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

/// A Guardian reached by HTTP `POST` to one URL.
#[derive(Debug, Clone)]
pub struct HttpTransport {
    /// Keeps connections alive between calls.
    client: reqwest::Client,
    /// Keeps no connection, so every request on it goes out on a new one:
    /// used only to send a request again after its pooled connection
    /// closed under it. Built once here, so a resend costs a connect and
    /// nothing more.
    fresh: reqwest::Client,
    url: Url,
    name: &'static str,
    max_reply: usize,
}

impl HttpTransport {
    /// A transport posting to `url` (`http://` or `https://`). TLS settings
    /// are refused with a plain `http://` URL, where they would silently do
    /// nothing.
    pub fn new(url: &str, tls: TlsSettings) -> Result<Self, TransportError> {
        let url = Url::parse(url)
            .map_err(|err| TransportError::Config(format!("Guardian URL {url:?}: {err}")))?;
        let name = match url.scheme() {
            "https" => "https",
            "http" if tls.is_empty() => "http",
            "http" => {
                return Err(TransportError::Config(
                    "TLS settings need an https:// Guardian URL".into(),
                ))
            }
            other => {
                return Err(TransportError::Config(format!(
                    "Guardian URL scheme {other:?} is not http or https"
                )))
            }
        };
        // Built even for http://: reqwest needs a TLS backend, and this one
        // does not rely on a process-wide rustls provider.
        let tls = tls.client_config()?;
        let client = client_builder(tls.clone())
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .build()
            .map_err(client_error)?;
        let fresh = client_builder(tls)
            .pool_max_idle_per_host(0)
            .build()
            .map_err(client_error)?;
        // Every outcome shows on /metrics from the start, at 0.
        for outcome in RETRY_OUTCOMES {
            GUARDIAN_RETRIES.with_label_values(&[outcome]);
        }
        Ok(Self {
            client,
            fresh,
            url,
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
    pub fn url(&self) -> &Url {
        &self.url
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
        client: &reqwest::Client,
        body: Bytes,
    ) -> Result<reqwest::Response, TransportError> {
        client
            .post(self.url.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await
            .map_err(classify)
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
    async fn read_reply(&self, response: reqwest::Response) -> Result<Bytes, TransportError> {
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
    async fn read_body(&self, mut response: reqwest::Response) -> Result<Bytes, TransportError> {
        let too_large = |length: u64| TransportError::FrameTooLarge {
            length,
            max: self.max_reply,
        };
        let announced = response.content_length().unwrap_or(0);
        if announced > self.max_reply as u64 {
            return Err(too_large(announced));
        }
        let mut body = BytesMut::with_capacity(announced as usize);
        while let Some(chunk) = response.chunk().await.map_err(classify)? {
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

/// A client builder with what both clients share: the TLS configuration,
/// no redirects, no proxy, the connect timeout.
fn client_builder(tls: rustls::ClientConfig) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(CONNECT_TIMEOUT)
}

/// A client that cannot be built: the settings are at fault.
fn client_error(err: reqwest::Error) -> TransportError {
    TransportError::Config(format!("HTTP client: {}", describe(&err)))
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

/// Sorts a reqwest failure into the cause the caller needs to see.
fn classify(err: reqwest::Error) -> TransportError {
    let message = describe(&err);
    if causes(&err).any(is_tls) {
        return TransportError::Tls(message);
    }
    if err.is_connect() || err.is_timeout() {
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

/// hyper's "connection closed before message completed" carries no I/O
/// error underneath, and hyper is not a direct dependency, so it is
/// recognised by its fixed message.
fn is_incomplete_message(err: &(dyn StdError + 'static)) -> bool {
    err.source().is_none() && err.to_string().starts_with("connection closed before")
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
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Instant;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;
    use crate::guardian::remote::transport::test_pki::TestPki;
    use crate::guardian::remote::transport::test_server::TestServer;

    const PING: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"system/ping"}"#;

    fn plain(url: String) -> HttpTransport {
        HttpTransport::new(&url, TlsSettings::default()).unwrap()
    }

    async fn call(transport: &HttpTransport) -> Result<Bytes, TransportError> {
        transport.call(Bytes::from_static(PING)).await
    }

    #[tokio::test]
    async fn posts_the_body_as_json_and_returns_the_reply() {
        let server = TestServer::plain().await;
        let transport = plain(format!("{}/acs", server.base));
        assert_eq!(call(&transport).await.unwrap(), Bytes::from_static(PING));
        assert_eq!(transport.name(), "http");
    }

    #[tokio::test]
    async fn a_non_200_status_is_reported_with_its_code() {
        let server = TestServer::plain().await;
        let transport = plain(format!("{}/status/503", server.base));
        let err = call(&transport).await.unwrap_err();
        assert!(
            matches!(err, TransportError::Status { status: 503 }),
            "{err}"
        );
    }

    #[tokio::test]
    async fn redirects_are_not_followed() {
        let server = TestServer::plain().await;
        let transport = plain(format!("{}/redirect", server.base));
        let err = call(&transport).await.unwrap_err();
        assert!(
            matches!(err, TransportError::Status { status: 307 }),
            "{err}"
        );
    }

    #[tokio::test]
    async fn connection_refused_fails_at_once() {
        let port = {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            listener.local_addr().unwrap().port()
        };
        let transport = plain(format!("http://127.0.0.1:{port}/acs"));
        let started = Instant::now();
        let err = call(&transport).await.unwrap_err();
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "took {:?}",
            started.elapsed()
        );
        assert!(
            matches!(&err, TransportError::Connect(m) if m.contains("refused")),
            "{err}"
        );
        assert!(!closed_before_reply(&err), "a refusal is not sent again");
    }

    #[tokio::test]
    async fn one_connection_serves_many_calls() {
        let server = TestServer::plain().await;
        let transport = plain(format!("{}/acs", server.base));
        for _ in 0..5 {
            call(&transport).await.unwrap();
        }
        assert_eq!(server.accepted(), 1);
    }

    #[tokio::test]
    async fn plain_http_stays_http1() {
        let server = TestServer::plain().await;
        let transport = plain(format!("{}/version", server.base));
        assert_eq!(call(&transport).await.unwrap(), "HTTP/1.1");
    }

    #[tokio::test]
    async fn a_guardian_hanging_up_is_closed_after_one_resend() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/acs", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&accepted);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                let _ = stream.read(&mut [0; 1024]).await;
            }
        });
        let err = call(&plain(url)).await.unwrap_err();
        assert!(matches!(err, TransportError::Closed(_)), "{err}");
        assert_eq!(accepted.load(Ordering::SeqCst), 2, "sent once more, only");
    }

    /// Reads one request (head and `Content-Length` body) off `stream`.
    async fn read_request(stream: &mut TcpStream) -> Vec<u8> {
        let mut request = Vec::new();
        let mut chunk = [0; 4096];
        loop {
            if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&request[..end]).to_ascii_lowercase();
                let length: usize = head
                    .split("\r\n")
                    .find_map(|line| line.strip_prefix("content-length:"))
                    .map_or(0, |value| value.trim().parse().unwrap());
                if request.len() >= end + 4 + length {
                    return request[end + 4..].to_vec();
                }
            }
            let read = stream.read(&mut chunk).await.unwrap();
            assert_ne!(read, 0, "the client closed mid-request");
            request.extend_from_slice(&chunk[..read]);
        }
    }

    /// Answers 200 with `body`, keeping the connection open and saying
    /// nothing about closing it.
    async fn answer(stream: &mut TcpStream, body: &[u8]) {
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        stream.write_all(body).await.unwrap();
    }

    /// A server whose first connection answers one request, then does to
    /// the second what `second` does; every later connection answers each
    /// request with `resend_reply`. Returns the URL and the count of
    /// connections accepted.
    async fn server_closing_under_the_second_request<F, Fut>(
        second: F,
        resend_reply: &'static [u8],
    ) -> (String, Arc<AtomicUsize>)
    where
        F: FnOnce(TcpStream) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/acs", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&accepted);
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            counter.fetch_add(1, Ordering::SeqCst);
            let body = read_request(&mut stream).await;
            answer(&mut stream, &body).await;
            second(stream).await;
            while let Ok((mut stream, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    loop {
                        read_request(&mut stream).await;
                        answer(&mut stream, resend_reply).await;
                    }
                });
            }
        });
        (url, accepted)
    }

    #[tokio::test]
    async fn a_request_on_a_connection_closed_under_it_is_sent_again_on_a_new_one() {
        // The second request arrives and the connection closes unread (a
        // reset, as when a keep-alive timer fires just then): the Guardian
        // never saw it.
        let (url, accepted) = server_closing_under_the_second_request(
            |stream| async move {
                stream.readable().await.unwrap();
                drop(stream);
            },
            PING,
        )
        .await;
        let transport = plain(url);
        assert_eq!(call(&transport).await.unwrap(), Bytes::from_static(PING));
        assert_eq!(call(&transport).await.unwrap(), Bytes::from_static(PING));
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
        // The resend's connection is not kept: the next call opens one
        // for the pool.
        assert_eq!(call(&transport).await.unwrap(), Bytes::from_static(PING));
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_resend_refused_as_a_replay_keeps_the_first_failure() {
        // The Guardian reads the second request, then hangs up: the resend
        // is a replay to it.
        let (url, accepted) = server_closing_under_the_second_request(
            |mut stream| async move {
                read_request(&mut stream).await;
                drop(stream);
            },
            br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"replay"}}"#,
        )
        .await;
        let transport = plain(url);
        call(&transport).await.unwrap();
        let err = call(&transport).await.unwrap_err();
        assert!(
            matches!(&err, TransportError::Closed(m) if m.contains("refused as a replay")),
            "{err}"
        );
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn only_a_connection_closed_before_the_answer_is_sent_again() {
        assert!(closed_before_reply(&TransportError::Closed("reset".into())));
        for err in [
            TransportError::Connect("connection refused".into()),
            TransportError::Tls("UnknownIssuer".into()),
            TransportError::Status { status: 503 },
            TransportError::from(io::Error::other("odd")),
            TransportError::FrameTooLarge { length: 9, max: 8 },
        ] {
            assert!(!closed_before_reply(&err), "{err}");
        }
    }

    #[test]
    fn replay_refusals_are_recognised_alone_and_in_a_batch() {
        let replay = br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"replay"}}"#;
        assert!(refused_as_replay(replay));
        assert!(refused_as_replay(
            br#"[{"jsonrpc":"2.0","id":1,"result":{}},{"id":2,"error":{"code":-32005}}]"#
        ));
        for other in [
            &br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32004}}"#[..],
            br#"{"jsonrpc":"2.0","id":1,"result":{"decision":"allow"}}"#,
            b"not json",
        ] {
            assert!(!refused_as_replay(other));
        }
    }

    #[tokio::test]
    async fn an_oversized_reply_is_refused() {
        let server = TestServer::plain().await;
        let transport = plain(format!("{}/acs", server.base)).with_max_reply(8);
        let err = call(&transport).await.unwrap_err();
        assert!(
            matches!(err, TransportError::FrameTooLarge { max: 8, .. }),
            "{err}"
        );
    }

    #[test]
    fn tls_settings_with_plain_http_are_refused() {
        let tls = TlsSettings {
            ca_file: Some("/etc/ca.pem".into()),
            ..TlsSettings::default()
        };
        let err = HttpTransport::new("http://127.0.0.1:1/acs", tls).unwrap_err();
        assert!(matches!(err, TransportError::Config(_)), "{err}");
    }

    #[test]
    fn other_schemes_are_refused() {
        let err = HttpTransport::new("ftp://guardian/acs", TlsSettings::default()).unwrap_err();
        assert!(matches!(err, TransportError::Config(_)), "{err}");
    }

    #[tokio::test]
    async fn https_with_the_ca_file_negotiates_http2_on_one_connection() {
        let pki = TestPki::generate();
        let server = TestServer::tls(pki.server_config(false)).await;
        let url = format!("{}/version", server.base);
        let transport = HttpTransport::new(&url, pki.client_settings(false)).unwrap();
        assert_eq!(transport.name(), "https");
        for _ in 0..3 {
            assert_eq!(call(&transport).await.unwrap(), "HTTP/2.0");
        }
        assert_eq!(server.accepted(), 1);
    }

    #[tokio::test]
    async fn https_without_the_ca_is_a_tls_error() {
        let pki = TestPki::generate();
        let server = TestServer::tls(pki.server_config(false)).await;
        let url = format!("{}/acs", server.base);
        let transport = HttpTransport::new(&url, TlsSettings::default()).unwrap();
        let err = call(&transport).await.unwrap_err();
        assert!(
            matches!(&err, TransportError::Tls(m) if m.contains("UnknownIssuer")),
            "{err}"
        );
    }

    #[tokio::test]
    async fn mtls_with_the_client_certificate_succeeds() {
        let pki = TestPki::generate();
        let server = TestServer::tls(pki.server_config(true)).await;
        let url = format!("{}/acs", server.base);
        let transport = HttpTransport::new(&url, pki.client_settings(true)).unwrap();
        assert_eq!(call(&transport).await.unwrap(), Bytes::from_static(PING));
        assert_eq!(server.tls_failures(), 0);
    }

    #[tokio::test]
    async fn mtls_without_a_client_certificate_fails_the_handshake() {
        let pki = TestPki::generate();
        let server = TestServer::tls(pki.server_config(true)).await;
        let url = format!("{}/acs", server.base);
        let transport = HttpTransport::new(&url, pki.client_settings(false)).unwrap();
        let err = call(&transport).await.unwrap_err();
        assert!(matches!(err, TransportError::Tls(_)), "{err}");
        // The server counts its refusal just after sending the alert.
        for _ in 0..100 {
            if server.tls_failures() > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(server.tls_failures(), 1);
    }
}
