//! `[upstream.oauth]`: OAuth 2.1 client credentials for a network
//! upstream. MCP forbids passing the agent's own token through, so the
//! proxy authenticates to the server as itself: it obtains an access
//! token from `token_url` with the `client_credentials` grant and sends it
//! as `Authorization: Bearer …` on every request to the upstream (see
//! `transport::http::client::credentials`).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::paths::{file_setting, resolve_file, PathSetting};

/// The proxy's own OAuth client registration at the upstream's
/// authorization server.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamOAuth {
    /// The authorization server's token endpoint (`https://…`; `http://`
    /// is accepted for a server on the same host).
    pub token_url: String,
    /// The client id the authorization server registered for the proxy.
    pub client_id: String,
    /// A file holding the client secret (surrounding whitespace ignored);
    /// relative paths follow the config file. Read when the route's client
    /// is built and again before every token request, so a rotated secret
    /// is picked up. Never logged.
    pub client_secret_file: PathBuf,
    /// Scopes to request (`scope`, space-separated); none by default.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The `audience` parameter some authorization servers (Auth0, Okta)
    /// use to pick the API the token is for.
    #[serde(default)]
    pub audience: Option<String>,
    /// The RFC 8707 `resource` parameter: the upstream's canonical URI,
    /// so the token is valid for that server only.
    #[serde(default)]
    pub resource: Option<String>,
    /// A token is replaced this many seconds before its `expires_in` runs
    /// out (but never before half its lifetime has passed).
    #[serde(default = "default_refresh_before_s")]
    pub refresh_before_s: u64,
    /// How the proxy authenticates to the token endpoint.
    #[serde(default)]
    pub client_auth: ClientAuth,
}

/// Client authentication at the token endpoint (RFC 6749 §2.3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientAuth {
    /// `client_secret_basic`: HTTP Basic with the form-encoded id and
    /// secret, which every server must support.
    #[default]
    ClientSecretBasic,
    /// `client_secret_post`: `client_id` and `client_secret` in the body.
    ClientSecretPost,
}

impl UpstreamOAuth {
    /// Checks the settings of the route named `route`.
    pub(super) fn validate(&self, route: &str) -> Result<(), String> {
        let key = |field: &str| format!("upstream \"{route}\": oauth.{field}");
        if !(self.token_url.starts_with("https://") || self.token_url.starts_with("http://")) {
            return Err(format!("{} must be an http(s) URL", key("token_url")));
        }
        if self.client_id.is_empty() {
            return Err(format!("{} must not be empty", key("client_id")));
        }
        if self.scopes.iter().any(|s| s.is_empty() || s.contains(' ')) {
            return Err(format!(
                "{} holds an empty scope or one with a space",
                key("scopes")
            ));
        }
        Ok(())
    }

    /// Makes `client_secret_file` absolute against `base`.
    pub(super) fn resolve_paths(&mut self, base: &Path) {
        resolve_file(base, &mut self.client_secret_file);
    }

    /// `upstream.<route>.oauth.client_secret_file`, for `config check`.
    pub(super) fn path_setting(&self, route: &str) -> PathSetting {
        file_setting(
            format!("upstream.{route}.oauth.client_secret_file"),
            &self.client_secret_file,
        )
    }
}

fn default_refresh_before_s() -> u64 {
    60
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oauth(toml_text: &str) -> UpstreamOAuth {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn defaults_and_checks() {
        let settings = oauth(
            "token_url = \"https://idp.example/token\"\nclient_id = \"proxy\"\nclient_secret_file = \"secret\"\n",
        );
        assert_eq!(settings.refresh_before_s, 60);
        assert_eq!(settings.client_auth, ClientAuth::ClientSecretBasic);
        assert!(settings.validate("r").is_ok());
        let bad_url = UpstreamOAuth {
            token_url: "idp.example/token".into(),
            ..settings.clone()
        };
        assert!(bad_url
            .validate("r")
            .unwrap_err()
            .contains("oauth.token_url"));
        let bad_scope = UpstreamOAuth {
            scopes: vec!["read write".into()],
            ..settings
        };
        assert!(bad_scope.validate("r").is_err());
        let post = oauth(
            "token_url = \"http://127.0.0.1:9/token\"\nclient_id = \"p\"\nclient_secret_file = \"s\"\nclient_auth = \"client_secret_post\"\n",
        );
        assert_eq!(post.client_auth, ClientAuth::ClientSecretPost);
    }

    #[test]
    fn oauth_needs_a_url_and_no_authorization_header() {
        use crate::config::UpstreamConfig;
        let settings = oauth(
            "token_url = \"https://idp.example/token\"\nclient_id = \"proxy\"\nclient_secret_file = \"secret\"\n",
        );
        let mut route = UpstreamConfig::for_command(vec!["server".into()]);
        route.oauth = Some(settings);
        assert!(route.validate().unwrap_err().contains("network `url`"));
        route.command.clear();
        route.url = Some("https://mcp.example/mcp".into());
        assert!(route.validate().is_ok());
        route
            .headers
            .insert("authorization".into(), "Bearer static".into());
        assert!(route.validate().unwrap_err().contains("not both"));
    }
}
