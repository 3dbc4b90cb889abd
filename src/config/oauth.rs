//! `[listen.oauth]`: the network listener as an OAuth 2.1 resource server
//! (the MCP authorization spec, RFC 9728 metadata, RFC 8707 audience).
//!
//! Every request must carry `Authorization: Bearer <JWT>` signed by one of
//! the issuer's keys (from `jwks_url` or `jwks_file`), naming `audience`
//! and still valid; the token's `sub` becomes the caller's identity.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::paths::{optional_setting, resolve_optional, PathSetting};

/// How access tokens are validated, and what the protected-resource
/// metadata says.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthConfig {
    /// The authorization server's issuer identifier; tokens must carry it
    /// as `iss`, exactly.
    pub issuer: String,
    /// Where the issuer publishes its signing keys (JWKS), `http(s)://`.
    #[serde(default)]
    pub jwks_url: Option<String>,
    /// A JWKS file instead of `jwks_url` (an air-gapped deployment).
    #[serde(default)]
    pub jwks_file: Option<PathBuf>,
    /// Extra CA certificates (PEM) trusted for `jwks_url`, besides the
    /// public web roots: an authorization server with a private CA.
    #[serde(default)]
    pub jwks_ca_file: Option<PathBuf>,
    /// This resource's canonical URL (RFC 8707): tokens must name it in
    /// `aud`, and the metadata names it as `resource`. Its origin is also
    /// where the metadata URL in `WWW-Authenticate` points.
    pub audience: String,
    /// Scopes every request needs; a valid token without them gets 403.
    #[serde(default)]
    pub required_scopes: Vec<String>,
    /// `scopes_supported` in the metadata; `required_scopes` when empty.
    #[serde(default)]
    pub scopes_supported: Vec<String>,
    /// Clock skew tolerated on `exp` and `nbf`, in seconds.
    #[serde(default = "default_leeway_s")]
    pub leeway_s: u64,
    /// The claim holding the caller's roles (an array of strings or a
    /// space-separated string); a dotted path reaches into objects
    /// (`realm_access.roles`).
    #[serde(default = "default_roles_claim")]
    pub roles_claim: String,
    /// The claim holding the caller's tenant (a string); dotted paths too.
    #[serde(default = "default_tenant_claim")]
    pub tenant_claim: String,
    /// `authorization_servers` in the metadata; `[issuer]` when empty.
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    /// `resource_name` in the metadata, for people choosing a server.
    #[serde(default)]
    pub resource_name: Option<String>,
    /// A token naming a key the cache does not have makes the proxy fetch
    /// the JWKS again, at most once in this many seconds (an attacker
    /// inventing `kid`s cannot make it hammer the authorization server).
    #[serde(default = "default_jwks_refresh_min_interval_s")]
    pub jwks_refresh_min_interval_s: u64,
    /// The JWKS is fetched again this often regardless, so a key the
    /// issuer withdrew stops being accepted.
    #[serde(default = "default_jwks_refresh_interval_s")]
    pub jwks_refresh_interval_s: u64,
}

impl OAuthConfig {
    /// Checks the settings fit together.
    pub fn validate(&self) -> Result<(), String> {
        match (&self.jwks_url, &self.jwks_file) {
            (Some(_), Some(_)) => {
                return Err("listen.oauth: set `jwks_url` or `jwks_file`, not both".into())
            }
            (None, None) => return Err("listen.oauth: `jwks_url` or `jwks_file` is needed".into()),
            (Some(url), None) if !(url.starts_with("https://") || url.starts_with("http://")) => {
                return Err(format!(
                    "listen.oauth.jwks_url must be an http(s):// URL, got {url:?}"
                ))
            }
            _ => {}
        }
        if self.jwks_ca_file.is_some() && self.jwks_url.is_none() {
            return Err("listen.oauth.jwks_ca_file goes with `jwks_url`".into());
        }
        if self.issuer.trim().is_empty() {
            return Err("listen.oauth.issuer must not be empty".into());
        }
        if !(self.audience.starts_with("https://") || self.audience.starts_with("http://")) {
            return Err(format!(
                "listen.oauth.audience must be this resource's absolute http(s):// URL, got {:?}",
                self.audience
            ));
        }
        for scope in self.required_scopes.iter().chain(&self.scopes_supported) {
            if !is_scope_token(scope) {
                return Err(format!(
                    "listen.oauth: {scope:?} is not a scope (printable ASCII without spaces, quotes or backslashes)"
                ));
            }
        }
        if self.jwks_refresh_interval_s == 0 {
            return Err("listen.oauth.jwks_refresh_interval_s must be at least 1".into());
        }
        Ok(())
    }

    /// `authorization_servers` as the metadata names them.
    pub fn authorization_servers(&self) -> Vec<String> {
        if self.authorization_servers.is_empty() {
            vec![self.issuer.clone()]
        } else {
            self.authorization_servers.clone()
        }
    }

    /// `scopes_supported` as the metadata names them.
    pub fn scopes_supported(&self) -> &[String] {
        if self.scopes_supported.is_empty() {
            &self.required_scopes
        } else {
            &self.scopes_supported
        }
    }

    pub(super) fn resolve_paths(&mut self, base: &Path) {
        resolve_optional(base, &mut self.jwks_file);
        resolve_optional(base, &mut self.jwks_ca_file);
    }

    pub(super) fn path_settings(&self) -> Vec<PathSetting> {
        [
            optional_setting("listen.oauth.jwks_file", &self.jwks_file),
            optional_setting("listen.oauth.jwks_ca_file", &self.jwks_ca_file),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

/// RFC 6749 §3.3 `scope-token`: it goes between quotes in a
/// `WWW-Authenticate` header as it is.
fn is_scope_token(scope: &str) -> bool {
    !scope.is_empty()
        && scope
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b'"' && b != b'\\')
}

fn default_leeway_s() -> u64 {
    30
}

fn default_roles_claim() -> String {
    "roles".to_owned()
}

fn default_tenant_claim() -> String {
    "tenant".to_owned()
}

fn default_jwks_refresh_min_interval_s() -> u64 {
    10
}

fn default_jwks_refresh_interval_s() -> u64 {
    300
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> OAuthConfig {
        toml::from_str(text).unwrap()
    }

    const MINIMAL: &str = r#"
        issuer = "https://idp.example"
        jwks_url = "https://idp.example/jwks"
        audience = "https://proxy.example/mcp"
    "#;

    #[test]
    fn defaults() {
        let config = parse(MINIMAL);
        assert!(config.validate().is_ok());
        assert_eq!(config.leeway_s, 30);
        assert_eq!(config.roles_claim, "roles");
        assert_eq!(config.tenant_claim, "tenant");
        assert_eq!(config.authorization_servers(), ["https://idp.example"]);
        assert!(config.scopes_supported().is_empty());
    }

    #[test]
    fn exactly_one_key_source() {
        let mut config = parse(MINIMAL);
        config.jwks_file = Some("jwks.json".into());
        assert!(config.validate().is_err());
        config.jwks_url = None;
        assert!(config.validate().is_ok());
        config.jwks_file = None;
        assert!(config.validate().is_err());
    }

    #[test]
    fn scopes_are_scope_tokens() {
        let mut config = parse(MINIMAL);
        config.required_scopes = vec!["mcp:tools".into()];
        assert!(config.validate().is_ok());
        for bad in ["", "two words", "quote\"", "back\\slash"] {
            config.required_scopes = vec![bad.into()];
            assert!(config.validate().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn audience_is_an_absolute_url() {
        let mut config = parse(MINIMAL);
        config.audience = "proxy".into();
        assert!(config.validate().is_err());
    }

    #[test]
    fn relative_paths_follow_the_config_file() {
        let mut config = parse(MINIMAL);
        config.jwks_url = None;
        config.jwks_file = Some("keys/jwks.json".into());
        config.resolve_paths(Path::new("/etc/acs"));
        assert_eq!(
            config.jwks_file.as_deref(),
            Some(Path::new("/etc/acs/keys/jwks.json"))
        );
        assert_eq!(config.path_settings().len(), 1);
    }
}
