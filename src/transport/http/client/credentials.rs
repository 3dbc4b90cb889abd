//! OAuth 2.1 client credentials for a network upstream (`[upstream.oauth]`):
//! the proxy's own access token, obtained from the authorization server's
//! token endpoint with the `client_credentials` grant and sent as
//! `Authorization: Bearer …` on every request of the route.
//!
//! The token request is a form POST through the route's HTTP client (the
//! same TLS trust, no redirects, no proxy from the environment) with
//! `grant_type`, `scope`, `audience` and `resource` (RFC 8707) as
//! configured, the client authenticating with HTTP Basic
//! (`client_secret_basic`, the default) or in the body
//! (`client_secret_post`). The secret file is read for every token request,
//! so a rotated secret is used from the next one on.
//!
//! One token serves every session of the route (`token_cache`); it is
//! fetched when none is fresh, one fetch at a time. A request the upstream
//! answers with 401 gets a fresh token and is sent once more
//! ([`RouteClient::send`](super::route::RouteClient::send)). Neither the
//! secret nor a token appears in a message: header values are marked
//! sensitive and errors name the endpoint and the OAuth `error` code only.

mod token_cache;

use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine;
use reqwest::header::{HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use reqwest::{Response, Url};
use serde::Deserialize;

use self::token_cache::{CachedToken, TokenCache};
use super::net::{describe_reqwest, redact};
use crate::config::{ClientAuth, UpstreamOAuth};

/// A token request must be answered within this time.
const TOKEN_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest token response read.
const MAX_TOKEN_RESPONSE: usize = 64 * 1024;

/// Why no access token could be obtained. Messages never hold the secret
/// or a token.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CredentialsError {
    /// The client secret file cannot be read, or is empty.
    #[error("oauth.client_secret_file {path}: {reason}")]
    SecretFile {
        /// The file.
        path: String,
        /// What was wrong with it.
        reason: String,
    },
    /// `token_url` is not a URL.
    #[error("oauth.token_url is not a URL: {0}")]
    TokenUrl(String),
    /// The token endpoint could not be reached.
    #[error("the token endpoint {url} cannot be reached: {reason}")]
    Unreachable {
        /// The endpoint, redacted.
        url: String,
        /// The network error.
        reason: String,
    },
    /// The token endpoint refused the request.
    #[error("the token endpoint {url} refused the client credentials (HTTP {status}{})",
        .error.as_deref().map(|e| format!(", error {e:?}")).unwrap_or_default())]
    Refused {
        /// The endpoint, redacted.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The OAuth `error` code, when the body had one.
        error: Option<String>,
    },
    /// The answer holds no bearer token.
    #[error("the token endpoint {url} answered without a usable bearer token: {reason}")]
    BadResponse {
        /// The endpoint, redacted.
        url: String,
        /// What was missing or wrong.
        reason: String,
    },
}

/// A successful token response (RFC 6749 §5.1); other members are ignored.
#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    token_type: String,
    #[serde(default)]
    expires_in: Option<u64>,
}

/// An error response (RFC 6749 §5.2).
#[derive(Deserialize)]
struct TokenErrorResponse {
    error: String,
}

/// The route's client registration and its current token.
#[derive(Debug)]
pub(crate) struct ClientCredentials {
    settings: UpstreamOAuth,
    token_url: Url,
    http: reqwest::Client,
    cache: TokenCache,
    /// One token request at a time.
    fetching: tokio::sync::Mutex<()>,
}

impl ClientCredentials {
    /// Checks the settings (the secret file must be readable now) for
    /// requests through `http`.
    pub(crate) fn new(
        settings: UpstreamOAuth,
        http: reqwest::Client,
    ) -> Result<Self, CredentialsError> {
        let token_url = Url::parse(&settings.token_url)
            .map_err(|err| CredentialsError::TokenUrl(err.to_string()))?;
        read_secret(&settings.client_secret_file)?;
        Ok(Self {
            settings,
            token_url,
            http,
            cache: TokenCache::default(),
            fetching: tokio::sync::Mutex::new(()),
        })
    }

    /// The `Authorization` value for a request: the current token, or a
    /// new one when it is due for replacement.
    pub(crate) async fn authorization(&self) -> Result<HeaderValue, CredentialsError> {
        if let Some(token) = self.cache.fresh(Instant::now()) {
            return Ok(token.authorization.clone());
        }
        let _fetching = self.fetching.lock().await;
        // Another request may have fetched one while this one waited.
        if let Some(token) = self.cache.fresh(Instant::now()) {
            return Ok(token.authorization.clone());
        }
        Ok(self.fetch().await?.authorization.clone())
    }

    /// A new token after the upstream refused `rejected`, unless another
    /// request already replaced it.
    pub(crate) async fn renew(
        &self,
        rejected: &HeaderValue,
    ) -> Result<HeaderValue, CredentialsError> {
        let _fetching = self.fetching.lock().await;
        if let Some(token) = self.cache.fresh(Instant::now()) {
            if token.authorization != *rejected {
                return Ok(token.authorization.clone());
            }
        }
        Ok(self.fetch().await?.authorization.clone())
    }

    /// Requests a token and caches it.
    async fn fetch(&self) -> Result<std::sync::Arc<CachedToken>, CredentialsError> {
        let secret = read_secret(&self.settings.client_secret_file)?;
        let (body, basic) = self.token_request(&secret);
        let mut request = self
            .http
            .post(self.token_url.clone())
            .header(ACCEPT, "application/json")
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .timeout(TOKEN_TIMEOUT)
            .body(body);
        if let Some(basic) = basic {
            request = request.header(AUTHORIZATION, basic);
        }
        let response = request
            .send()
            .await
            .map_err(|err| CredentialsError::Unreachable {
                url: self.shown_url(),
                reason: describe_reqwest(err),
            })?;
        let token = self.read_token(response).await?;
        tracing::debug!(token_url = %self.shown_url(), "obtained an upstream access token");
        Ok(self.cache.store(token))
    }

    /// The form body, and the Basic `Authorization` value when the client
    /// authenticates so.
    fn token_request(&self, secret: &str) -> (String, Option<HeaderValue>) {
        let settings = &self.settings;
        let mut form = form_urlencoded::Serializer::new(String::new());
        form.append_pair("grant_type", "client_credentials");
        if !settings.scopes.is_empty() {
            form.append_pair("scope", &settings.scopes.join(" "));
        }
        if let Some(audience) = &settings.audience {
            form.append_pair("audience", audience);
        }
        if let Some(resource) = &settings.resource {
            form.append_pair("resource", resource);
        }
        match settings.client_auth {
            ClientAuth::ClientSecretBasic => {
                let basic = basic_authorization(&settings.client_id, secret);
                (form.finish(), Some(basic))
            }
            ClientAuth::ClientSecretPost => {
                form.append_pair("client_id", &settings.client_id);
                form.append_pair("client_secret", secret);
                (form.finish(), None)
            }
        }
    }

    /// The token in a response, or why there is none.
    async fn read_token(&self, response: Response) -> Result<CachedToken, CredentialsError> {
        let status = response.status();
        let bad = |reason: String| CredentialsError::BadResponse {
            url: self.shown_url(),
            reason,
        };
        let body = read_limited(response).await.map_err(bad)?;
        if !status.is_success() {
            let error = serde_json::from_slice::<TokenErrorResponse>(&body)
                .ok()
                .map(|e| e.error)
                .filter(|e| e.len() <= 64 && e.bytes().all(|b| b.is_ascii_graphic()));
            return Err(CredentialsError::Refused {
                url: self.shown_url(),
                status: status.as_u16(),
                error,
            });
        }
        let answer: TokenResponse = serde_json::from_slice(&body)
            .map_err(|err| bad(format!("not a token response: {}", json_problem(&err))))?;
        if !answer.token_type.eq_ignore_ascii_case("bearer") {
            return Err(bad(format!(
                "token_type {:?} is not Bearer",
                answer.token_type
            )));
        }
        if answer.access_token.is_empty() {
            return Err(bad("the access token is empty".into()));
        }
        let mut authorization =
            HeaderValue::from_str(&format!("Bearer {}", answer.access_token))
                .map_err(|_| bad("the access token is not a valid header value".into()))?;
        authorization.set_sensitive(true);
        Ok(CachedToken::new(
            authorization,
            answer.expires_in.map(Duration::from_secs),
            Duration::from_secs(self.settings.refresh_before_s),
            Instant::now(),
        ))
    }

    fn shown_url(&self) -> String {
        redact(&self.token_url)
    }
}

/// What was wrong with a token response, without serde_json's message
/// (which quotes the offending text, possibly a token).
fn json_problem(err: &serde_json::Error) -> &'static str {
    match err.classify() {
        serde_json::error::Category::Io => "I/O error",
        serde_json::error::Category::Syntax => "invalid JSON",
        serde_json::error::Category::Data => "missing or mistyped members",
        serde_json::error::Category::Eof => "truncated JSON",
    }
}

/// `Basic base64(urlencode(id) ":" urlencode(secret))` (RFC 6749 §2.3.1),
/// marked sensitive.
fn basic_authorization(client_id: &str, secret: &str) -> HeaderValue {
    let encode = |text: &str| form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>();
    let pair = format!("{}:{}", encode(client_id), encode(secret));
    let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
    let mut value = HeaderValue::from_str(&format!("Basic {encoded}"))
        .unwrap_or_else(|_| HeaderValue::from_static("Basic"));
    value.set_sensitive(true);
    value
}

/// The client secret: the file's text without surrounding whitespace.
fn read_secret(path: &Path) -> Result<String, CredentialsError> {
    let error = |reason: String| CredentialsError::SecretFile {
        path: path.display().to_string(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|err| error(err.to_string()))?;
    let secret = text.trim();
    if secret.is_empty() {
        return Err(error("the file is empty".into()));
    }
    Ok(secret.to_owned())
}

/// A response body up to [`MAX_TOKEN_RESPONSE`] bytes.
async fn read_limited(mut response: Response) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|err| format!("reading the answer failed: {}", describe_reqwest(err)))?
    {
        if body.len() + chunk.len() > MAX_TOKEN_RESPONSE {
            return Err(format!("the answer is over {MAX_TOKEN_RESPONSE} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// reqwest without a process-wide TLS provider needs one handed in.
    fn http() -> reqwest::Client {
        let tls = crate::transport::client_tls::TlsSettings::default()
            .client_config()
            .unwrap();
        reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .build()
            .unwrap()
    }

    fn settings(secret_file: &Path) -> UpstreamOAuth {
        UpstreamOAuth {
            token_url: "https://idp.example/token".into(),
            client_id: "proxy one".into(),
            client_secret_file: secret_file.to_owned(),
            scopes: vec!["mcp:read".into(), "mcp:write".into()],
            audience: None,
            resource: Some("https://mcp.example/mcp".into()),
            refresh_before_s: 60,
            client_auth: ClientAuth::ClientSecretBasic,
        }
    }

    #[test]
    fn the_token_request_carries_the_grant_and_the_basic_credentials() {
        let dir = tempfile::tempdir().unwrap();
        let secret_file = dir.path().join("secret");
        std::fs::write(&secret_file, "s3cr:t\n").unwrap();
        let credentials = ClientCredentials::new(settings(&secret_file), http()).unwrap();
        let (body, basic) = credentials.token_request("s3cr:t");
        assert_eq!(
            body,
            "grant_type=client_credentials&scope=mcp%3Aread+mcp%3Awrite&resource=https%3A%2F%2Fmcp.example%2Fmcp"
        );
        let basic = basic.unwrap();
        assert!(basic.is_sensitive());
        let encoded = basic.to_str().unwrap().strip_prefix("Basic ").unwrap();
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .unwrap();
        assert_eq!(decoded, b"proxy+one:s3cr%3At");
    }

    #[test]
    fn client_secret_post_puts_the_credentials_in_the_body() {
        let dir = tempfile::tempdir().unwrap();
        let secret_file = dir.path().join("secret");
        std::fs::write(&secret_file, "s3cret").unwrap();
        let mut settings = settings(&secret_file);
        settings.client_auth = ClientAuth::ClientSecretPost;
        settings.scopes.clear();
        let credentials = ClientCredentials::new(settings, http()).unwrap();
        let (body, basic) = credentials.token_request("s3cret");
        assert!(basic.is_none());
        assert!(
            body.ends_with("&client_id=proxy+one&client_secret=s3cret"),
            "{body}"
        );
    }

    #[test]
    fn a_missing_or_empty_secret_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        let err = ClientCredentials::new(settings(&missing), http()).unwrap_err();
        assert!(err.to_string().contains("client_secret_file"), "{err}");
        let empty = dir.path().join("empty");
        std::fs::write(&empty, " \n").unwrap();
        let err = ClientCredentials::new(settings(&empty), http()).unwrap_err();
        assert!(err.to_string().contains("empty"), "{err}");
    }
}
