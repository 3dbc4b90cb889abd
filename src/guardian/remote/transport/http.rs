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

use std::error::Error as StdError;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::future::BoxFuture;
use reqwest::header::CONTENT_TYPE;
use reqwest::{StatusCode, Url};

use super::error::TransportError;
use super::tls::TlsSettings;
use super::GuardianTransport;

/// How long a TCP + TLS connect may take. A refused connection fails at
/// once; this bounds only silent networks, well inside a decision timeout.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The default limit on a reply body, the same as the proxy's default
/// message limit.
pub const DEFAULT_MAX_REPLY: usize = 16 * 1024 * 1024;

/// A Guardian reached by HTTP `POST` to one URL.
#[derive(Debug, Clone)]
pub struct HttpTransport {
    client: reqwest::Client,
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
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(tls.client_config()?)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|err| TransportError::Config(format!("HTTP client: {}", describe(&err))))?;
        Ok(Self {
            client,
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

    async fn post(&self, body: Bytes) -> Result<Bytes, TransportError> {
        let response = self
            .client
            .post(self.url.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await
            .map_err(classify)?;
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
    use std::time::Instant;

    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;

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
    async fn a_guardian_hanging_up_is_closed() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/acs", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let _ = stream.read(&mut [0; 1024]).await;
        });
        let err = call(&plain(url)).await.unwrap_err();
        assert!(matches!(err, TransportError::Closed(_)), "{err}");
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
