//! `[[upstream]]`: the MCP servers behind the proxy.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::paths::{
    optional_setting, program_setting, resolve_optional, resolve_program, PathSetting, SectionPaths,
};
use super::upstream_oauth::UpstreamOAuth;

/// One MCP server behind the proxy: a program to spawn (`command`) or a
/// server to reach (`url`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// Route name (`/mcp/<name>` on network transports; audit and metrics label).
    #[serde(default = "default_upstream_name")]
    pub name: String,
    /// Program and arguments of a stdio server the proxy spawns. A program
    /// with a `/` follows the config file's directory; a bare name is
    /// looked up on `PATH`; arguments are passed as written.
    #[serde(default)]
    pub command: Vec<String>,
    /// Extra environment variables for the spawned server.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory for the spawned server (relative: against the
    /// config file's directory), so arguments naming files can be relative
    /// to a known place.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// How long to wait after closing the server's stdin before SIGTERM,
    /// and again before SIGKILL.
    #[serde(default = "default_shutdown_grace_ms")]
    pub shutdown_grace_ms: u64,
    /// One spawned server for every session of the route on the network
    /// listeners, instead of one per session (see `transport::shared_child`).
    #[serde(default)]
    pub share: bool,
    /// A network server: `http(s)://…` (Streamable HTTP or legacy SSE) or `ws(s)://…`.
    #[serde(default)]
    pub url: Option<String>,
    /// How to speak to `url`; inferred from its scheme when absent.
    #[serde(default)]
    pub transport: Option<UpstreamTransport>,
    /// Headers sent with every upstream request (e.g. `Authorization`).
    /// Never logged.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Pass the agent's own `Authorization` header upstream. Off by default:
    /// MCP forbids token passthrough unless deliberately configured.
    #[serde(default)]
    pub forward_authorization: bool,
    /// Extra CA certificate (PEM) trusted for an `https`/`wss` upstream.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// Client certificate (PEM) for mutual TLS to the upstream.
    #[serde(default)]
    pub client_cert: Option<PathBuf>,
    /// Client private key (PEM) for mutual TLS to the upstream.
    #[serde(default)]
    pub client_key: Option<PathBuf>,
    /// `[upstream.oauth]`: authenticate to a network upstream with an
    /// OAuth access token the proxy obtains for itself (client
    /// credentials grant), sent as `Authorization: Bearer` on every request.
    #[serde(default)]
    pub oauth: Option<UpstreamOAuth>,
}

/// Network upstream transports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UpstreamTransport {
    /// MCP Streamable HTTP (2025-03-26 and later).
    StreamableHttp,
    /// The legacy HTTP+SSE transport (2024-11-05).
    Sse,
    /// WebSocket, subprotocol `mcp`, one message per text frame.
    Ws,
}

impl UpstreamConfig {
    /// A spawned server with default settings (the `acs-proxy -- COMMAND` form).
    pub fn for_command(command: Vec<String>) -> Self {
        Self {
            name: default_upstream_name(),
            command,
            env: BTreeMap::new(),
            cwd: None,
            shutdown_grace_ms: default_shutdown_grace_ms(),
            share: false,
            url: None,
            transport: None,
            headers: BTreeMap::new(),
            forward_authorization: false,
            ca_file: None,
            client_cert: None,
            client_key: None,
            oauth: None,
        }
    }

    /// The upstream as a URI, for the AgBOM's `endpoint`.
    pub fn endpoint_uri(&self) -> String {
        if let Some(url) = &self.url {
            return url.clone();
        }
        match self.command.first() {
            Some(program) => format!("stdio:{}", program.replace(' ', "%20")),
            None => "stdio:upstream".to_owned(),
        }
    }

    /// The transport for `url`: as configured, else from the scheme.
    pub fn network_transport(&self) -> Option<UpstreamTransport> {
        let url = self.url.as_deref()?;
        Some(
            self.transport
                .unwrap_or(if url.starts_with("ws://") || url.starts_with("wss://") {
                    UpstreamTransport::Ws
                } else {
                    UpstreamTransport::StreamableHttp
                }),
        )
    }

    /// Checks that the route names exactly one way to reach its server.
    pub fn validate(&self) -> Result<(), String> {
        let name = &self.name;
        if let Some(oauth) = &self.oauth {
            if self.url.is_none() {
                return Err(format!(
                    "upstream \"{name}\": `oauth` applies to a network `url`, not to a `command`"
                ));
            }
            if self
                .headers
                .keys()
                .any(|h| h.eq_ignore_ascii_case("authorization"))
            {
                return Err(format!(
                    "upstream \"{name}\": set an Authorization header or `oauth`, not both"
                ));
            }
            oauth.validate(name)?;
        }
        if self.share && self.url.is_some() {
            return Err(format!(
                "upstream \"{name}\": `share` applies to a spawned `command`, not to a `url`"
            ));
        }
        match (&self.url, self.command.is_empty()) {
            (Some(_), false) => Err(format!("upstream \"{name}\": set `command` or `url`, not both")),
            (None, true) => Err(format!(
                "upstream \"{name}\": `command` (a stdio server) or `url` (a network server) is required"
            )),
            (Some(url), true) => {
                let known = ["http://", "https://", "ws://", "wss://"];
                if known.iter().any(|scheme| url.starts_with(scheme)) {
                    Ok(())
                } else {
                    Err(format!("upstream \"{name}\": unsupported url scheme in {url:?}"))
                }
            }
            (None, false) => Ok(()),
        }
    }
}

impl SectionPaths for UpstreamConfig {
    fn resolve_paths(&mut self, base: &Path) {
        resolve_program(base, &mut self.command);
        for path in [
            &mut self.cwd,
            &mut self.ca_file,
            &mut self.client_cert,
            &mut self.client_key,
        ] {
            resolve_optional(base, path);
        }
        if let Some(oauth) = &mut self.oauth {
            oauth.resolve_paths(base);
        }
    }

    fn path_settings(&self) -> Vec<PathSetting> {
        let key = |field: &str| format!("upstream.{}.{field}", self.name);
        [
            program_setting(key("command"), &self.command),
            optional_setting(key("cwd"), &self.cwd),
            optional_setting(key("ca_file"), &self.ca_file),
            optional_setting(key("client_cert"), &self.client_cert),
            optional_setting(key("client_key"), &self.client_key),
            self.oauth.as_ref().map(|o| o.path_setting(&self.name)),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

fn default_upstream_name() -> String {
    "default".to_owned()
}

fn default_shutdown_grace_ms() -> u64 {
    2_000
}
