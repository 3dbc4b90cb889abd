//! `[listen]`: where agents reach the proxy, and who may.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::oauth::OAuthConfig;
use super::paths::{optional_setting, resolve_optional, PathSetting, SectionPaths};

/// The downstream (agent-facing) side.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenConfig {
    /// How agents reach the proxy.
    #[serde(default)]
    pub transport: ListenTransport,
    /// Socket address for network transports (loopback unless configured).
    #[serde(default = "default_listen_address")]
    pub address: SocketAddr,
    /// The MCP endpoint path; with several upstreams each is served at `<path>/<name>`.
    #[serde(default = "default_listen_path")]
    pub path: String,
    /// Also serve the legacy HTTP+SSE transport (2024-11-05) for old clients,
    /// at `<path>/sse` (GET) and `<path>/message` (POST).
    #[serde(default)]
    pub legacy_sse: bool,
    /// `Origin` values accepted (DNS-rebinding protection). A request with
    /// any other `Origin` gets 403; requests without one are accepted.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// `Host` names accepted (port ignored). Empty means the loopback names
    /// when bound to loopback, and any host otherwise.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// A file of bearer tokens, one per line; when set, every request must
    /// carry `Authorization: Bearer <token>`. With `oauth` too, a token the
    /// file lists is accepted as its principal and any other must be a
    /// valid OAuth access token.
    #[serde(default)]
    pub auth_tokens_file: Option<PathBuf>,
    /// `[listen.oauth]`: OAuth 2.1 access tokens (JWT) on every request,
    /// and the RFC 9728 protected-resource metadata.
    #[serde(default)]
    pub oauth: Option<OAuthConfig>,
    /// TLS certificate chain (PEM); with `tls_key`, the listener speaks HTTPS/WSS.
    #[serde(default)]
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM).
    #[serde(default)]
    pub tls_key: Option<PathBuf>,
    /// CA certificates (PEM bundle) that client certificates must chain to;
    /// with `tls_cert`/`tls_key`, every client must present a certificate
    /// they issued (mutual TLS) or its handshake fails. The certificate is
    /// the principal of its requests unless bearer auth is also on, in
    /// which case the bearer credential names the principal and the
    /// certificate only admits the connection.
    #[serde(default)]
    pub client_ca: Option<PathBuf>,
    /// Sessions open at once; more are refused with 503.
    #[serde(default = "default_max_sessions")]
    pub max_sessions: usize,
    /// A session with no request for this long is closed.
    #[serde(default = "default_session_idle_timeout_ms")]
    pub session_idle_timeout_ms: u64,
    /// A client must send a request's complete headers within this time,
    /// or its connection is closed (slowloris protection; HTTP/1.1).
    #[serde(default = "default_header_read_timeout_ms")]
    pub header_read_timeout_ms: u64,
}

impl Default for ListenConfig {
    fn default() -> Self {
        Self {
            transport: ListenTransport::default(),
            address: default_listen_address(),
            path: default_listen_path(),
            legacy_sse: false,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            auth_tokens_file: None,
            oauth: None,
            tls_cert: None,
            tls_key: None,
            client_ca: None,
            max_sessions: default_max_sessions(),
            session_idle_timeout_ms: default_session_idle_timeout_ms(),
            header_read_timeout_ms: default_header_read_timeout_ms(),
        }
    }
}

impl ListenConfig {
    /// Checks the network settings fit together.
    pub fn validate(&self) -> Result<(), String> {
        if self.tls_cert.is_some() != self.tls_key.is_some() {
            return Err("listen: `tls_cert` and `tls_key` go together".into());
        }
        if self.client_ca.is_some() && self.tls_cert.is_none() {
            return Err("listen.client_ca needs `tls_cert` and `tls_key`".into());
        }
        if !self.path.starts_with('/') {
            return Err(format!(
                "listen.path must start with '/', got {:?}",
                self.path
            ));
        }
        if self.max_sessions == 0 {
            return Err("listen.max_sessions must be at least 1".into());
        }
        if self.header_read_timeout_ms == 0 {
            return Err("listen.header_read_timeout_ms must be at least 1".into());
        }
        if let Some(oauth) = &self.oauth {
            if self.transport == ListenTransport::Stdio {
                return Err(
                    "listen.oauth needs a network listener (transport \"http\" or \"ws\")".into(),
                );
            }
            oauth.validate()?;
        }
        Ok(())
    }
}

impl SectionPaths for ListenConfig {
    fn resolve_paths(&mut self, base: &Path) {
        for path in [
            &mut self.auth_tokens_file,
            &mut self.tls_cert,
            &mut self.tls_key,
            &mut self.client_ca,
        ] {
            resolve_optional(base, path);
        }
        if let Some(oauth) = &mut self.oauth {
            oauth.resolve_paths(base);
        }
    }

    fn path_settings(&self) -> Vec<PathSetting> {
        [
            optional_setting("listen.auth_tokens_file", &self.auth_tokens_file),
            optional_setting("listen.tls_cert", &self.tls_cert),
            optional_setting("listen.tls_key", &self.tls_key),
            optional_setting("listen.client_ca", &self.client_ca),
        ]
        .into_iter()
        .flatten()
        .chain(self.oauth.iter().flat_map(OAuthConfig::path_settings))
        .collect()
    }
}

fn default_listen_address() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8080))
}

fn default_listen_path() -> String {
    "/mcp".to_owned()
}

fn default_max_sessions() -> usize {
    1024
}

fn default_session_idle_timeout_ms() -> u64 {
    30 * 60 * 1000
}

fn default_header_read_timeout_ms() -> u64 {
    10_000
}

/// Downstream transports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ListenTransport {
    /// The agent spawns the proxy and talks on its stdin/stdout.
    #[default]
    Stdio,
    /// Streamable HTTP (and legacy SSE when enabled).
    Http,
    /// WebSocket, subprotocol `mcp`.
    Ws,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_ca_needs_a_tls_listener() {
        let listen = ListenConfig {
            client_ca: Some("ca.pem".into()),
            ..ListenConfig::default()
        };
        let err = listen.validate().unwrap_err();
        assert!(err.contains("client_ca"), "{err}");
        let listen = ListenConfig {
            tls_cert: Some("cert.pem".into()),
            tls_key: Some("key.pem".into()),
            ..listen
        };
        assert!(listen.validate().is_ok());
    }
}
