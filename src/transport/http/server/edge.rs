//! Edge security and request hygiene, the same for every endpoint and
//! transport (Streamable HTTP, legacy SSE, the WebSocket upgrade):
//!
//! - `Host` validation (DNS-rebinding protection): with no `allowed_hosts`
//!   a loopback listener accepts only `localhost`, `127.0.0.1` and `[::1]`
//!   (any port); any other listener accepts any host. With `allowed_hosts`
//!   only those names. Anything else gets 403.
//! - `Origin` validation: a request without `Origin` passes (not a browser);
//!   a present one must be in `allowed_origins`, or, when that list is
//!   empty, a loopback origin (`http(s)://localhost|127.0.0.1|[::1]`, any
//!   port). Anything else gets 403.
//! - Bearer tokens from `auth_tokens_file` (one per line; `#` comments and
//!   blank lines skipped), compared in constant time over SHA-256 digests;
//!   401 with `WWW-Authenticate: Bearer` otherwise. The file is re-read
//!   when it changes.
//!   (`tokens`)
//! - Without a bearer principal, the connection's verified client
//!   certificate names the principal (`client_cert`, mutual TLS).
//! - OAuth 2.1 access tokens (JWT) with `[listen.oauth]`: 401/403 with an
//!   RFC 9728 `resource_metadata` challenge otherwise (`oauth`). With a
//!   token file too, a token the file lists is accepted as its principal
//!   and any other must be a valid access token.
//! - Request bodies read with a byte limit (413) and a time limit (408),
//!   and what `Accept` allows (`request`).

mod oauth;
mod request;
mod tokens;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::http::{header, request::Parts, HeaderValue, StatusCode};
use axum::response::Response;

pub(crate) use self::oauth::WELL_KNOWN;
pub use self::oauth::{OAuth, OAuthError};
pub(crate) use self::request::{
    accepts, content_type_is_json, one_line, read_body, trace_context, Accepts,
};
use self::tokens::bearer;
pub(crate) use self::tokens::{file_stamp, TokenFile};

use super::client_cert;
use super::principal::Principal;
use super::responses::rejection;
use crate::config::ListenConfig;

/// A refused request's answer (boxed: responses are large).
pub(crate) type Refused = Box<Response>;

/// Host names a loopback listener accepts when `allowed_hosts` is empty.
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// The checks every request passes before any handler runs.
#[derive(Debug)]
pub(crate) struct Edge {
    /// `None`: any host.
    hosts: Option<Vec<String>>,
    /// `None`: loopback origins only.
    origins: Option<Vec<String>>,
    tokens: Option<Arc<TokenFile>>,
    oauth: Option<Arc<OAuth>>,
}

impl Edge {
    /// The checks `listen` asks for on a listener bound to `bound`.
    pub(crate) fn new(listen: &ListenConfig, bound: SocketAddr) -> Result<Self, String> {
        let hosts = if !listen.allowed_hosts.is_empty() {
            Some(
                listen
                    .allowed_hosts
                    .iter()
                    .map(|h| strip_port(h.trim()).to_ascii_lowercase())
                    .collect(),
            )
        } else if bound.ip().is_loopback() {
            Some(LOOPBACK_HOSTS.iter().map(|h| (*h).to_owned()).collect())
        } else {
            None
        };
        let origins = (!listen.allowed_origins.is_empty()).then(|| {
            listen
                .allowed_origins
                .iter()
                .map(|o| normalize_origin(o))
                .collect()
        });
        let tokens = match &listen.auth_tokens_file {
            Some(path) => Some(Arc::new(TokenFile::load(path)?)),
            None => None,
        };
        let oauth = match &listen.oauth {
            Some(config) => Some(Arc::new(OAuth::new(config)?)),
            None => None,
        };
        Ok(Self {
            hosts,
            origins,
            tokens,
            oauth,
        })
    }

    /// The token file, for the reload poller.
    pub(crate) fn tokens(&self) -> Option<Arc<TokenFile>> {
        self.tokens.clone()
    }

    /// The access-token validation, for the key refresher and the
    /// protected-resource metadata.
    pub(crate) fn oauth(&self) -> Option<Arc<OAuth>> {
        self.oauth.clone()
    }

    /// Host, then Origin, then the bearer token; the principal the token
    /// authenticates, else the one the connection's client certificate
    /// names (none without either). `resource_path` is the endpoint's
    /// path, for the metadata URL an OAuth challenge names.
    pub(crate) async fn check(
        &self,
        parts: &Parts,
        resource_path: &str,
    ) -> Result<Option<Principal>, Refused> {
        self.check_without_auth(parts)?;
        let principal = self.check_auth(parts, resource_path).await?;
        Ok(principal.or_else(|| client_cert::principal(parts)))
    }

    /// Host and Origin only (CORS preflights carry no credentials).
    pub(crate) fn check_without_auth(&self, parts: &Parts) -> Result<(), Refused> {
        self.check_host(parts)?;
        self.check_origin(parts)
    }

    /// Host only: for public documents any web page may read (the
    /// protected-resource metadata).
    pub(crate) fn check_host(&self, parts: &Parts) -> Result<(), Refused> {
        if let Some(hosts) = &self.hosts {
            let host = request_host(parts).map(|h| strip_port(h).to_ascii_lowercase());
            if !host.is_some_and(|h| hosts.contains(&h)) {
                return Err(Box::new(rejection(
                    StatusCode::FORBIDDEN,
                    "the Host header names a host this listener does not serve",
                )));
            }
        }
        Ok(())
    }

    fn check_origin(&self, parts: &Parts) -> Result<(), Refused> {
        if let Some(origin) = parts.headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            let allowed = match &self.origins {
                Some(origins) => {
                    let origin = normalize_origin(origin);
                    origins.contains(&origin)
                }
                None => is_loopback_origin(origin),
            };
            if !allowed {
                return Err(Box::new(rejection(
                    StatusCode::FORBIDDEN,
                    "this Origin is not allowed",
                )));
            }
        }
        Ok(())
    }

    async fn check_auth(
        &self,
        parts: &Parts,
        resource_path: &str,
    ) -> Result<Option<Principal>, Refused> {
        let presented = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer);
        if let Some(oauth) = &self.oauth {
            if let Some(principal) = self.listed_token(presented) {
                return Ok(Some(principal));
            }
            let Some(token) = presented else {
                return Err(Box::new(oauth.refusal(&OAuthError::Missing, resource_path)));
            };
            return match oauth.authenticate(token).await {
                Ok(identity) => Ok(Some(Principal::new(identity))),
                Err(err) => Err(Box::new(oauth.refusal(&err, resource_path))),
            };
        }
        if self.tokens.is_some() {
            let principal = self.listed_token(presented);
            if principal.is_none() {
                let mut response =
                    rejection(StatusCode::UNAUTHORIZED, "a valid bearer token is required");
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"acs-proxy\""),
                );
                return Err(Box::new(response));
            }
            return Ok(principal);
        }
        Ok(None)
    }

    /// The principal of a token `auth_tokens_file` lists.
    fn listed_token(&self, presented: Option<&str>) -> Option<Principal> {
        let tokens = self.tokens.as_ref()?;
        presented.and_then(|token| tokens.principal(token))
    }
}

/// The host the request names: `:authority` (HTTP/2) or `Host`.
fn request_host(parts: &Parts) -> Option<&str> {
    parts.uri.authority().map(|a| a.as_str()).or_else(|| {
        parts
            .headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
    })
}

/// `host[:port]` → `host`; `[v6]:port` → `[v6]`.
fn strip_port(authority: &str) -> &str {
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    if authority.starts_with('[') {
        return match authority.find(']') {
            Some(end) => &authority[..=end],
            None => authority,
        };
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => authority,
    }
}

/// Lower-cased, without a trailing `/`.
fn normalize_origin(origin: &str) -> String {
    origin.trim().trim_end_matches('/').to_ascii_lowercase()
}

/// `http(s)://localhost|127.0.0.1|[::1]` with any port.
fn is_loopback_origin(origin: &str) -> bool {
    let origin = normalize_origin(origin);
    let rest = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    match rest {
        Some(authority) if !authority.contains('/') => {
            LOOPBACK_HOSTS.contains(&strip_port(authority))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Request;

    fn parts(headers: &[(&str, &str)]) -> Parts {
        let mut builder = Request::builder().uri("/mcp");
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(()).unwrap().into_parts().0
    }

    fn edge(listen: ListenConfig, bound: &str) -> Edge {
        Edge::new(&listen, bound.parse().unwrap()).unwrap()
    }

    #[tokio::test]
    async fn loopback_listener_accepts_only_loopback_hosts() {
        let edge = edge(ListenConfig::default(), "127.0.0.1:8080");
        for host in ["localhost:8080", "127.0.0.1", "[::1]:1", "LOCALHOST"] {
            assert!(
                edge.check(&parts(&[("host", host)]), "/mcp").await.is_ok(),
                "{host}"
            );
        }
        for host in ["evil.example:8080", "127.0.0.2", "localhost.evil.example"] {
            let err = edge
                .check(&parts(&[("host", host)]), "/mcp")
                .await
                .unwrap_err();
            assert_eq!(err.status(), StatusCode::FORBIDDEN, "{host}");
        }
        assert!(
            edge.check(&parts(&[]), "/mcp").await.is_err(),
            "no host at all"
        );
    }

    #[tokio::test]
    async fn other_listeners_accept_any_host_unless_configured() {
        let open = edge(ListenConfig::default(), "0.0.0.0:8080");
        assert!(open
            .check(&parts(&[("host", "proxy.example")]), "/mcp")
            .await
            .is_ok());
        let listen = ListenConfig {
            allowed_hosts: vec!["proxy.example:443".into()],
            ..ListenConfig::default()
        };
        let strict = edge(listen, "0.0.0.0:8080");
        assert!(strict
            .check(&parts(&[("host", "PROXY.example")]), "/mcp")
            .await
            .is_ok());
        assert!(strict
            .check(&parts(&[("host", "localhost")]), "/mcp")
            .await
            .is_err());
    }

    #[tokio::test]
    async fn origins() {
        let edge = edge(ListenConfig::default(), "127.0.0.1:8080");
        let with = |origin| parts(&[("host", "localhost"), ("origin", origin)]);
        for origin in [
            "http://localhost:3000",
            "https://127.0.0.1",
            "http://[::1]:9",
        ] {
            assert!(edge.check(&with(origin), "/mcp").await.is_ok(), "{origin}");
        }
        for origin in [
            "http://evil.example",
            "null",
            "file://",
            "http://localhost.evil",
        ] {
            assert!(edge.check(&with(origin), "/mcp").await.is_err(), "{origin}");
        }
        let listen = ListenConfig {
            allowed_origins: vec!["https://app.example/".into()],
            ..ListenConfig::default()
        };
        let edge = self::edge(listen, "127.0.0.1:8080");
        assert!(edge
            .check(&with("https://app.example"), "/mcp")
            .await
            .is_ok());
        assert!(edge
            .check(&with("http://localhost:3000"), "/mcp")
            .await
            .is_err());
    }

    #[tokio::test]
    async fn bearer_tokens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        std::fs::write(&path, "# comment\n\nsecret-one\n  secret-two  \n").unwrap();
        let listen = ListenConfig {
            auth_tokens_file: Some(path.clone()),
            ..ListenConfig::default()
        };
        let edge = edge(listen, "127.0.0.1:8080");
        let with = |auth| parts(&[("host", "localhost"), ("authorization", auth)]);
        assert!(edge.check(&with("Bearer secret-one"), "/mcp").await.is_ok());
        assert!(edge.check(&with("bearer secret-two"), "/mcp").await.is_ok());
        let err = edge
            .check(&with("Bearer secret-three"), "/mcp")
            .await
            .unwrap_err();
        assert_eq!(err.status(), StatusCode::UNAUTHORIZED);
        assert!(err.headers().contains_key(header::WWW_AUTHENTICATE));
        assert!(edge
            .check(&parts(&[("host", "localhost")]), "/mcp")
            .await
            .is_err());
        std::fs::write(&path, "secret-three-longer\n").unwrap();
        edge.tokens().unwrap().reload_if_changed();
        assert!(edge
            .check(&with("Bearer secret-three-longer"), "/mcp")
            .await
            .is_ok());
        assert!(edge
            .check(&with("Bearer secret-one"), "/mcp")
            .await
            .is_err());
    }

    #[tokio::test]
    async fn a_listed_token_passes_beside_oauth_and_any_other_must_be_an_access_token() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = dir.path().join("tokens");
        std::fs::write(&tokens, "ci-secret ci-bot deployer\n").unwrap();
        let jwks = dir.path().join("jwks.json");
        std::fs::write(&jwks, r#"{"keys": []}"#).unwrap();
        let oauth = toml::from_str(&format!(
            "issuer = \"https://idp.example\"\naudience = \"https://proxy.example/mcp\"\njwks_file = {:?}",
            jwks.display().to_string()
        ))
        .unwrap();
        let listen = ListenConfig {
            transport: crate::config::ListenTransport::Http,
            auth_tokens_file: Some(tokens),
            oauth: Some(oauth),
            ..ListenConfig::default()
        };
        let edge = edge(listen, "127.0.0.1:8080");
        let with = |auth| parts(&[("host", "localhost"), ("authorization", auth)]);
        let principal = edge.check(&with("Bearer ci-secret"), "/mcp").await.unwrap();
        assert_eq!(principal.unwrap().identity().user_id, "ci-bot");
        let metadata = "https://proxy.example/.well-known/oauth-protected-resource/mcp";
        let refused = edge
            .check(&with("Bearer guessed"), "/mcp")
            .await
            .unwrap_err();
        assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(
            refused.headers()[header::WWW_AUTHENTICATE],
            format!("Bearer error=\"invalid_token\", resource_metadata=\"{metadata}\"").as_str()
        );
        let missing = edge
            .check(&parts(&[("host", "localhost")]), "/mcp")
            .await
            .unwrap_err();
        assert_eq!(
            missing.headers()[header::WWW_AUTHENTICATE],
            format!("Bearer resource_metadata=\"{metadata}\"").as_str()
        );
    }

    #[tokio::test]
    async fn named_tokens_give_their_principal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        std::fs::write(
            &path,
            "bare-token\nalice-token alice admin,ops acme\nbob-token\tbob\t-\n",
        )
        .unwrap();
        let listen = ListenConfig {
            auth_tokens_file: Some(path),
            ..ListenConfig::default()
        };
        let edge = edge(listen, "127.0.0.1:8080");
        let principal = |token: &str| {
            let auth = format!("Bearer {token}");
            let parts = parts(&[("host", "localhost"), ("authorization", &auth)]);
            let edge = &edge;
            async move { edge.check(&parts, "/mcp").await.unwrap().unwrap() }
        };
        let alice = principal("alice-token").await;
        assert_eq!(alice.identity().user_id, "alice");
        assert_eq!(alice.identity().roles, ["admin", "ops"]);
        assert_eq!(alice.identity().tenant.as_deref(), Some("acme"));
        let bob = principal("bob-token").await;
        assert_eq!(bob.identity().user_id, "bob");
        assert!(bob.identity().roles.is_empty());
        assert_eq!(bob.identity().tenant, None);
        assert_eq!(principal("bare-token").await.identity().user_id, "token-1");
        assert!(alice != bob);
        assert!(edge
            .check(
                &parts(&[("host", "localhost"), ("authorization", "Bearer alice")]),
                "/mcp"
            )
            .await
            .is_err());
    }
}
