//! What the network upstream clients (Streamable HTTP, legacy HTTP+SSE,
//! WebSocket) share: the URL as it may be shown, the configured headers,
//! TLS, the HTTP client, and error texts.
//!
//! Configured header values are credentials more often than not: they are
//! marked sensitive and never appear in a message. URLs are shown without
//! user information or query string, which can carry secrets too.

use std::error::Error as StdError;
use std::io;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::Url;

use crate::config::UpstreamConfig;
use crate::transport::client_tls::{TlsError, TlsSettings};
use crate::transport::upstream::UpstreamError;

/// How long a TCP (and TLS) connect may take.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// TCP keep-alive for long-lived event streams and sockets.
const KEEPALIVE: Duration = Duration::from_secs(30);

/// The upstream URL, parsed once, with the route it belongs to.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// The route name, for errors and logs.
    pub route: String,
    /// The URL.
    pub url: Url,
}

impl Target {
    /// Parses `config.url`, which must use one of `schemes`.
    pub fn new(config: &UpstreamConfig, schemes: &[&str]) -> Result<Self, UpstreamError> {
        let route = config.name.clone();
        let text = config.url.as_deref().unwrap_or_default();
        let url = Url::parse(text).map_err(|err| UpstreamError::Network {
            route: route.clone(),
            reason: format!("invalid url: {err}"),
        })?;
        if !schemes.contains(&url.scheme()) {
            return Err(UpstreamError::Network {
                route,
                reason: format!(
                    "url scheme {:?} is not one of {}",
                    url.scheme(),
                    schemes.join(", ")
                ),
            });
        }
        Ok(Self { route, url })
    }

    /// The URL as it may appear in messages.
    pub fn shown(&self) -> String {
        redact(&self.url)
    }

    /// A connect failure for this upstream.
    pub fn error(&self, reason: impl std::fmt::Display) -> UpstreamError {
        UpstreamError::Network {
            route: self.route.clone(),
            reason: format!("{}: {reason}", self.shown()),
        }
    }

    /// Whether the URL asks for TLS.
    pub fn is_tls(&self) -> bool {
        matches!(self.url.scheme(), "https" | "wss")
    }
}

/// `url` without user information, and with `?…` for any query string.
pub(crate) fn redact(url: &Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    let had_query = shown.query().is_some();
    shown.set_query(None);
    shown.set_fragment(None);
    let mut text = shown.to_string();
    if had_query {
        text.push_str("?…");
    }
    text
}

/// The configured headers, values marked sensitive. A bad one is named,
/// its value never shown.
pub(crate) fn configured_headers(config: &UpstreamConfig) -> Result<HeaderMap, String> {
    let mut headers = HeaderMap::new();
    for (name, value) in &config.headers {
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("header name {name:?} is not a valid HTTP header name"))?;
        let mut value = HeaderValue::from_str(value).map_err(|_| {
            format!("the value of header {name:?} is not a valid HTTP header value")
        })?;
        value.set_sensitive(true);
        headers.append(header, value);
    }
    Ok(headers)
}

/// The rustls client configuration for `target` (the same client TLS as
/// the Guardian's: public roots, `ca_file`, optional client certificate,
/// ring).
/// TLS settings on a plain `http://`/`ws://` URL are refused, since they
/// would silently do nothing.
pub(crate) fn tls_config(
    config: &UpstreamConfig,
    target: &Target,
) -> Result<rustls::ClientConfig, UpstreamError> {
    let settings = TlsSettings {
        ca_file: config.ca_file.clone(),
        client_cert: config.client_cert.clone(),
        client_key: config.client_key.clone(),
    };
    if !target.is_tls() && !settings.is_empty() {
        return Err(
            target.error("ca_file, client_cert and client_key need an https:// or wss:// url")
        );
    }
    settings.client_config().map_err(|err| match err {
        TlsError::Config(reason) => target.error(reason),
        other => target.error(other),
    })
}

/// An HTTP client for one upstream route: the given TLS, HTTP/1.1 only
/// (see [`route`](super::route)), no redirects (a redirect could carry the
/// configured credentials elsewhere), no proxy from the environment, no
/// overall timeout (tool calls and event streams last as long as they
/// last).
pub(crate) fn http_client(
    tls: rustls::ClientConfig,
    target: &Target,
) -> Result<reqwest::Client, UpstreamError> {
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .http1_only()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_keepalive(KEEPALIVE)
        .build()
        .map_err(|err| target.error(format!("HTTP client: {}", describe_reqwest(err))))
}

/// Opens and closes one TCP connection to the URL's host, so that an
/// unreachable server is reported when the route starts rather than on
/// the first message.
pub(crate) async fn probe(target: &Target) -> Result<(), UpstreamError> {
    let host = target
        .url
        .host_str()
        .ok_or_else(|| target.error("the url has no host"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = target
        .url
        .port_or_known_default()
        .ok_or_else(|| target.error("the url has no port"))?;
    match tokio::time::timeout(
        CONNECT_TIMEOUT,
        tokio::net::TcpStream::connect((host, port)),
    )
    .await
    {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(err)) => Err(target.error(format!("cannot connect: {err}"))),
        Err(_) => Err(target.error(format!(
            "cannot connect: no answer within {} s",
            CONNECT_TIMEOUT.as_secs()
        ))),
    }
}

/// A reqwest failure in one line, without the URL it names.
pub(crate) fn describe_reqwest(err: reqwest::Error) -> String {
    describe(&err.without_url())
}

/// An error and its causes in one line, each cause once.
pub(crate) fn describe(err: &(dyn StdError + 'static)) -> String {
    let mut text = String::new();
    let mut next = Some(err);
    while let Some(cause) = next {
        let part = cause.to_string();
        if !part.is_empty() && !text.contains(&part) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&part);
        }
        // io::Error::source skips the error it wraps; step into it instead.
        next = match cause
            .downcast_ref::<io::Error>()
            .and_then(io::Error::get_ref)
        {
            Some(inner) => Some(inner as &(dyn StdError + 'static)),
            None => cause.source(),
        };
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_urls_carry_no_credentials() {
        let url = Url::parse("https://user:secret@example.com:8443/mcp?token=abc#x").unwrap();
        assert_eq!(redact(&url), "https://example.com:8443/mcp?…");
        let url = Url::parse("http://127.0.0.1:9/mcp").unwrap();
        assert_eq!(redact(&url), "http://127.0.0.1:9/mcp");
    }

    #[test]
    fn a_bad_header_is_named_without_its_value() {
        let mut config = UpstreamConfig::for_command(vec![]);
        config
            .headers
            .insert("Authorization".into(), "Bearer s3cret\n".into());
        let err = configured_headers(&config).unwrap_err();
        assert!(err.contains("Authorization"), "{err}");
        assert!(!err.contains("s3cret"), "{err}");
        config.headers.clear();
        config.headers.insert("X-Key".into(), "s3cret".into());
        let headers = configured_headers(&config).unwrap();
        assert!(headers["x-key"].is_sensitive());
        assert!(!format!("{headers:?}").contains("s3cret"));
    }

    #[test]
    fn tls_files_on_a_plain_url_are_refused() {
        let mut config = UpstreamConfig::for_command(vec![]);
        config.url = Some("http://127.0.0.1:1/mcp".into());
        config.ca_file = Some("/tmp/ca.pem".into());
        let target = Target::new(&config, &["http", "https"]).unwrap();
        let err = tls_config(&config, &target).unwrap_err().to_string();
        assert!(err.contains("https://"), "{err}");
    }
}
