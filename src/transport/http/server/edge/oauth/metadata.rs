//! OAuth 2.0 Protected Resource Metadata (RFC 9728) and the
//! `WWW-Authenticate` challenges that point MCP clients to it (RFC 6750,
//! MCP authorization 2025-06-18 and 2025-11-25).
//!
//! The metadata is served at `/.well-known/oauth-protected-resource`
//! followed by each endpoint's path (`…/mcp` for `/mcp`), and at the bare
//! well-known path. Challenges name it by an absolute URL built from the
//! origin of `audience`, not from the request's `Host`: the audience is the
//! URL clients were told to use (the public one behind a reverse proxy),
//! and a header the client chose cannot redirect it elsewhere.

use axum::http::HeaderValue;
use bytes::Bytes;
use serde_json::{json, Value};

use crate::config::OAuthConfig;

/// Where RFC 9728 puts the metadata.
pub(crate) const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// What a challenge says went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Challenge {
    /// No token: the client should go and get one.
    Missing,
    /// A token was presented and refused (RFC 6750 `invalid_token`).
    InvalidToken,
    /// A valid token without the required scopes (step-up authorization).
    InsufficientScope,
}

/// The metadata document and the challenges that name it.
#[derive(Debug)]
pub(crate) struct Metadata {
    document: Bytes,
    /// `scheme://host[:port]` of the audience.
    origin: String,
    /// The required scopes, space-separated; `None` when there are none.
    scope: Option<String>,
}

impl Metadata {
    /// The metadata `config` describes.
    pub(crate) fn new(config: &OAuthConfig) -> Result<Self, String> {
        let audience = reqwest::Url::parse(&config.audience)
            .map_err(|err| format!("listen.oauth.audience {:?}: {err}", config.audience))?;
        let mut document = json!({
            "resource": config.audience,
            "authorization_servers": config.authorization_servers(),
            "scopes_supported": config.scopes_supported(),
            "bearer_methods_supported": ["header"],
        });
        if let Some(name) = &config.resource_name {
            document["resource_name"] = Value::from(name.as_str());
        }
        Ok(Self {
            document: Bytes::from(document.to_string()),
            origin: audience.origin().ascii_serialization(),
            scope: (!config.required_scopes.is_empty()).then(|| config.required_scopes.join(" ")),
        })
    }

    /// The JSON document.
    pub(crate) fn document(&self) -> Bytes {
        self.document.clone()
    }

    /// The metadata's absolute URL for the endpoint at `resource_path`.
    pub(crate) fn url(&self, resource_path: &str) -> String {
        let path = resource_path.trim_end_matches('/');
        format!("{}{WELL_KNOWN}{path}", self.origin)
    }

    /// The `WWW-Authenticate` value for `challenge` on `resource_path`.
    pub(crate) fn challenge(&self, challenge: Challenge, resource_path: &str) -> HeaderValue {
        let url = self.url(resource_path);
        let scope = self.scope.as_deref().unwrap_or("");
        let text = match (challenge, &self.scope) {
            (Challenge::Missing, None) => format!("Bearer resource_metadata=\"{url}\""),
            (Challenge::Missing, Some(_)) => {
                format!("Bearer resource_metadata=\"{url}\", scope=\"{scope}\"")
            }
            (Challenge::InvalidToken, None) => {
                format!("Bearer error=\"invalid_token\", resource_metadata=\"{url}\"")
            }
            (Challenge::InvalidToken, Some(_)) => format!(
                "Bearer error=\"invalid_token\", resource_metadata=\"{url}\", scope=\"{scope}\""
            ),
            (Challenge::InsufficientScope, _) => format!(
                "Bearer error=\"insufficient_scope\", scope=\"{scope}\", resource_metadata=\"{url}\""
            ),
        };
        // Scopes are checked for quote-free characters at startup, and a
        // serialized URL has none either, so this cannot fail in practice.
        HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("Bearer"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(scopes: &[&str]) -> OAuthConfig {
        let mut config: OAuthConfig = toml::from_str(
            r#"
            issuer = "https://idp.example"
            jwks_url = "https://idp.example/jwks"
            audience = "https://proxy.example:8443/mcp"
            resource_name = "Tools"
            "#,
        )
        .unwrap();
        config.required_scopes = scopes.iter().map(|s| (*s).to_owned()).collect();
        config
    }

    #[test]
    fn the_document_names_the_audience_and_issuer() {
        let metadata = Metadata::new(&config(&["mcp:tools"])).unwrap();
        let document: Value = serde_json::from_slice(&metadata.document()).unwrap();
        assert_eq!(
            document,
            json!({
                "resource": "https://proxy.example:8443/mcp",
                "authorization_servers": ["https://idp.example"],
                "scopes_supported": ["mcp:tools"],
                "bearer_methods_supported": ["header"],
                "resource_name": "Tools",
            })
        );
    }

    #[test]
    fn the_url_sits_at_the_audience_origin_before_the_endpoint_path() {
        let metadata = Metadata::new(&config(&[])).unwrap();
        assert_eq!(
            metadata.url("/mcp/demo"),
            "https://proxy.example:8443/.well-known/oauth-protected-resource/mcp/demo"
        );
        assert_eq!(
            metadata.url("/"),
            "https://proxy.example:8443/.well-known/oauth-protected-resource"
        );
    }

    #[test]
    fn challenges() {
        let url = "https://proxy.example:8443/.well-known/oauth-protected-resource/mcp";
        let plain = Metadata::new(&config(&[])).unwrap();
        assert_eq!(
            plain.challenge(Challenge::Missing, "/mcp"),
            format!("Bearer resource_metadata=\"{url}\"").as_str()
        );
        assert_eq!(
            plain.challenge(Challenge::InvalidToken, "/mcp"),
            format!("Bearer error=\"invalid_token\", resource_metadata=\"{url}\"").as_str()
        );
        let scoped = Metadata::new(&config(&["a", "b"])).unwrap();
        assert_eq!(
            scoped.challenge(Challenge::InsufficientScope, "/mcp"),
            format!(
                "Bearer error=\"insufficient_scope\", scope=\"a b\", resource_metadata=\"{url}\""
            )
            .as_str()
        );
        assert_eq!(
            scoped.challenge(Challenge::Missing, "/mcp"),
            format!("Bearer resource_metadata=\"{url}\", scope=\"a b\"").as_str()
        );
    }
}
