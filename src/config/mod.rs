//! `proxy.toml` → one typed, validated [`Config`].
//!
//! Every section rejects unknown keys, so a typo is an error that names the
//! key instead of a setting that silently does nothing. The policy rules are
//! compiled here too, so a policy that cannot load fails at startup with the
//! file, line and rule.

mod error;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

pub use error::ConfigError;

use crate::audit::FsyncMode;
use crate::policy::{Policy, PolicySource, PolicySpec};

/// The whole configuration, as the rest of the proxy sees it.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where agents connect.
    pub listen: ListenConfig,
    /// The MCP server(s) behind the proxy.
    pub upstreams: Vec<UpstreamConfig>,
    /// Which Guardian decides.
    pub guardian: GuardianConfig,
    /// Which hooks are emitted and how envelopes are filled.
    pub hooks: HooksConfig,
    /// The embedded Guardian's compiled rules.
    pub policy: Arc<Policy>,
    /// The audit log.
    pub audit: AuditConfig,
    /// The Prometheus endpoint.
    pub metrics: MetricsConfig,
    /// Resource limits on what clients and servers may send.
    pub limits: LimitsConfig,
}

/// The file as written; converted into [`Config`] by [`Config::from_toml`].
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    listen: ListenConfig,
    #[serde(default)]
    upstream: Vec<UpstreamConfig>,
    #[serde(default)]
    guardian: GuardianConfig,
    #[serde(default)]
    hooks: HooksConfig,
    #[serde(default)]
    policy: PolicySpec,
    #[serde(default)]
    audit: AuditConfig,
    #[serde(default)]
    metrics: MetricsConfig,
    #[serde(default)]
    limits: LimitsConfig,
}

/// The downstream (agent-facing) side.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenConfig {
    /// How agents reach the proxy.
    #[serde(default)]
    pub transport: ListenTransport,
    /// Socket address for network transports.
    #[serde(default = "default_listen_address")]
    pub address: SocketAddr,
    /// The MCP endpoint path for network transports.
    #[serde(default = "default_listen_path")]
    pub path: String,
}

impl Default for ListenConfig {
    fn default() -> Self {
        Self {
            transport: ListenTransport::default(),
            address: default_listen_address(),
            path: default_listen_path(),
        }
    }
}

fn default_listen_address() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8080))
}

fn default_listen_path() -> String {
    "/mcp".to_owned()
}

/// Downstream transports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ListenTransport {
    /// The agent spawns the proxy and talks on its stdin/stdout.
    #[default]
    Stdio,
    /// Streamable HTTP.
    Http,
    /// WebSocket.
    Ws,
}

/// One MCP server behind the proxy.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// Route name (`/mcp/<name>` on network transports; audit and metrics label).
    #[serde(default = "default_upstream_name")]
    pub name: String,
    /// Program and arguments of a stdio server the proxy spawns.
    #[serde(default)]
    pub command: Vec<String>,
    /// Extra environment variables for the spawned server.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory for the spawned server.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// How long to wait after closing the server's stdin before SIGTERM,
    /// and again before SIGKILL.
    #[serde(default = "default_shutdown_grace_ms")]
    pub shutdown_grace_ms: u64,
}

impl UpstreamConfig {
    /// The upstream as a URI, for the AgBOM's `endpoint`.
    pub fn endpoint_uri(&self) -> String {
        match self.command.first() {
            Some(program) => format!("stdio:{}", program.replace(' ', "%20")),
            None => "stdio:upstream".to_owned(),
        }
    }
}

fn default_upstream_name() -> String {
    "default".to_owned()
}

fn default_shutdown_grace_ms() -> u64 {
    2_000
}

/// Which Guardian decides, and how to reach a remote one.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuardianConfig {
    /// `embedded` (the `[policy]` rules) or `remote` (an ACS Guardian).
    #[serde(default)]
    pub mode: GuardianMode,
    /// Remote over HTTP(S): the Guardian's endpoint, e.g. `https://guardian:8787/acs`.
    #[serde(default)]
    pub url: Option<String>,
    /// Remote over stdio: the Guardian program and arguments (Content-Length framing).
    #[serde(default)]
    pub command: Vec<String>,
    /// The HMAC secret: a file of at least 32 raw bytes.
    #[serde(default)]
    pub secret_file: Option<PathBuf>,
    /// The HMAC secret: the name of an environment variable holding it in base64.
    #[serde(default)]
    pub secret_env: Option<String>,
    /// `key_id` sent with every signature.
    #[serde(default = "default_key_id")]
    pub key_id: String,
    /// Decision timeout used until (or unless) the Guardian's ServerHello sets one.
    #[serde(default = "default_guardian_timeout_ms")]
    pub timeout_ms: u64,
    /// Local failure posture; it can only make the negotiated one stricter.
    #[serde(default)]
    pub on_decision_failure: Option<PostureSetting>,
    /// What a session does when the handshake gets no answer.
    #[serde(default)]
    pub startup_posture: StartupPosture,
    /// Extra CA certificate (PEM) trusted for an `https` Guardian.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// Client certificate (PEM) for mutual TLS.
    #[serde(default)]
    pub client_cert: Option<PathBuf>,
    /// Client private key (PEM) for mutual TLS.
    #[serde(default)]
    pub client_key: Option<PathBuf>,
    /// Send the hooks of one message as a JSON-RPC batch (falls back to
    /// one at a time when the Guardian answers -32600).
    #[serde(default)]
    pub batch: bool,
    /// How often `system/ping` checks the Guardian for `/readyz`.
    #[serde(default = "default_ping_interval_ms")]
    pub ping_interval_ms: u64,
}

fn default_key_id() -> String {
    "default".to_owned()
}

fn default_guardian_timeout_ms() -> u64 {
    5_000
}

fn default_ping_interval_ms() -> u64 {
    10_000
}

/// `on_decision_failure` as written in `proxy.toml`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PostureSetting {
    /// Fail open (the ACS default); only documents intent.
    Proceed,
    /// Fail closed, whatever the Guardian negotiates.
    Deny,
}

/// What a session does when the Guardian handshake gets no answer (§4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StartupPosture {
    /// Run the session unguarded; every bypassed hook is audited.
    #[default]
    Proceed,
    /// Refuse the session: every request is answered with an error.
    Refuse,
}

/// Guardian kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GuardianMode {
    /// Rules from `[policy]`, evaluated in process.
    #[default]
    Embedded,
    /// An ACS Guardian over HTTP(S) or stdio.
    Remote,
}

/// How MCP messages become hooks, and what goes in every envelope.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HooksConfig {
    /// Which hooks a `tools/call` produces.
    #[serde(default)]
    pub tools_call: ToolsCallHooks,
    /// `metadata.agent_id`; defaults to the client's `clientInfo.name`.
    #[serde(default)]
    pub agent_id: Option<String>,
    /// `metadata.environment` (development | staging | production).
    #[serde(default)]
    pub environment: Option<String>,
    /// Fetch the server's tools, prompts and resources right after
    /// `initialize` so `agbom/snapshot` describes the whole inventory before
    /// the agent's first content-bearing message.
    #[serde(default = "default_true")]
    pub inventory: bool,
    /// How long the inventory fetch may take before the snapshot is sent
    /// with what arrived.
    #[serde(default = "default_inventory_timeout_ms")]
    pub inventory_timeout_ms: u64,
}

impl Default for HooksConfig {
    fn default() -> Self {
        Self {
            tools_call: ToolsCallHooks::default(),
            agent_id: None,
            environment: None,
            inventory: true,
            inventory_timeout_ms: default_inventory_timeout_ms(),
        }
    }
}

fn default_true() -> bool {
    true
}

fn default_inventory_timeout_ms() -> u64 {
    5_000
}

/// The hooks a `tools/call` yields (DESIGN §3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolsCallHooks {
    /// Only `steps/toolCallRequest` / `steps/toolCallResult`.
    Steps,
    /// Only `protocols/MCP/tools/call`.
    Wrapped,
    /// Both, as a pipeline: wrapped first, then the step on what it let through.
    #[default]
    Both,
}

/// The audit log.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditConfig {
    /// JSONL file the hash chains are appended to.
    #[serde(default = "default_audit_path")]
    pub path: PathBuf,
    /// When appends reach the disk.
    #[serde(default)]
    pub fsync: FsyncMode,
    /// Keep each hook's full `params` (arguments, results, the MCP message)
    /// in its entry. Off by default: entries then hold only digests, so the
    /// log carries no secrets that passed through the proxy.
    #[serde(default)]
    pub record_content: bool,
}

impl Default for AuditConfig {
    fn default() -> Self {
        Self {
            path: default_audit_path(),
            fsync: FsyncMode::default(),
            record_content: false,
        }
    }
}

fn default_audit_path() -> PathBuf {
    PathBuf::from("acs-audit.jsonl")
}

/// The Prometheus and health endpoint.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// Where `/metrics`, `/healthz` and `/readyz` are served; off when absent.
    #[serde(default)]
    pub address: Option<SocketAddr>,
}

/// Bounds on what a peer may make the proxy hold.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// Largest single message (one stdio line), in bytes.
    #[serde(default = "default_max_message_bytes")]
    pub max_message_bytes: usize,
    /// Messages read from one side but not yet written to the other.
    #[serde(default = "default_max_in_flight")]
    pub max_in_flight: usize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            max_message_bytes: default_max_message_bytes(),
            max_in_flight: default_max_in_flight(),
        }
    }
}

fn default_max_message_bytes() -> usize {
    16 * 1024 * 1024
}

fn default_max_in_flight() -> usize {
    256
}

impl Config {
    /// Reads and validates a config file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::from_toml(&path.display().to_string(), &text)
    }

    /// Parses and validates config text; `origin` names it in errors.
    pub fn from_toml(origin: &str, text: &str) -> Result<Config, ConfigError> {
        let file: ConfigFile = toml::from_str(text).map_err(|err| ConfigError::Parse {
            origin: origin.to_owned(),
            message: err.to_string(),
        })?;
        let source = PolicySource::new(origin, text);
        let policy = Policy::compile(&file.policy, &source)?;
        let config = Config {
            listen: file.listen,
            upstreams: file.upstream,
            guardian: file.guardian,
            hooks: file.hooks,
            policy: Arc::new(policy),
            audit: file.audit,
            metrics: file.metrics,
            limits: file.limits,
        };
        config.validate(origin)?;
        Ok(config)
    }

    /// The configuration of the zero-config form `acs-proxy -- COMMAND...`:
    /// stdio on both sides, embedded Guardian with no rules (allow), audit on.
    pub fn for_command(command: Vec<String>) -> Result<Config, ConfigError> {
        let mut config = Self::from_toml("<defaults>", "")?;
        config.upstreams = vec![UpstreamConfig {
            name: default_upstream_name(),
            command,
            env: BTreeMap::new(),
            cwd: None,
            shutdown_grace_ms: default_shutdown_grace_ms(),
        }];
        config.validate("<command line>")?;
        Ok(config)
    }

    fn validate(&self, origin: &str) -> Result<(), ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            origin: origin.to_owned(),
            message,
        };
        if self.guardian.mode == GuardianMode::Remote {
            self.validate_remote_guardian().map_err(invalid)?;
        }
        if self.listen.transport != ListenTransport::Stdio {
            return Err(invalid(format!(
                "listen.transport = {:?} is not available in this build; use \"stdio\"",
                self.listen.transport
            )));
        }
        if self.upstreams.len() > 1 {
            return Err(invalid(
                "listen.transport = \"stdio\" serves exactly one [[upstream]]".into(),
            ));
        }
        for upstream in &self.upstreams {
            if upstream.command.is_empty() {
                return Err(invalid(format!(
                    "upstream \"{}\": `command` must name the server program",
                    upstream.name
                )));
            }
        }
        if self.limits.max_message_bytes < 1024 {
            return Err(invalid(
                "limits.max_message_bytes must be at least 1024".into(),
            ));
        }
        if self.limits.max_in_flight == 0 {
            return Err(invalid("limits.max_in_flight must be at least 1".into()));
        }
        Ok(())
    }

    fn validate_remote_guardian(&self) -> Result<(), String> {
        let guardian = &self.guardian;
        match (&guardian.url, guardian.command.is_empty()) {
            (Some(_), false) => return Err("guardian: set `url` or `command`, not both".into()),
            (None, true) => {
                return Err(
                    "guardian.mode = \"remote\" needs `url` (HTTP/HTTPS) or `command` (stdio)"
                        .into(),
                )
            }
            (Some(url), true) if !(url.starts_with("http://") || url.starts_with("https://")) => {
                return Err(format!(
                    "guardian.url must be http:// or https://, got {url:?}"
                ))
            }
            _ => {}
        }
        if guardian.secret_file.is_none() && guardian.secret_env.is_none() {
            return Err("guardian.mode = \"remote\" needs `secret_file` or `secret_env`: ACS-Core requires signed hooks".into());
        }
        if guardian.secret_file.is_some() && guardian.secret_env.is_some() {
            return Err("guardian: set `secret_file` or `secret_env`, not both".into());
        }
        if guardian.client_cert.is_some() != guardian.client_key.is_some() {
            return Err("guardian: `client_cert` and `client_key` go together".into());
        }
        if guardian.timeout_ms == 0 {
            return Err("guardian.timeout_ms must be at least 1".into());
        }
        Ok(())
    }

    /// The one upstream of a stdio deployment, when configured.
    pub fn upstream(&self) -> Option<&UpstreamConfig> {
        self.upstreams.first()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_gives_defaults() {
        let config = Config::from_toml("t.toml", "").unwrap();
        assert_eq!(config.listen.transport, ListenTransport::Stdio);
        assert_eq!(config.listen.address.to_string(), "127.0.0.1:8080");
        assert_eq!(config.hooks.tools_call, ToolsCallHooks::Both);
        assert_eq!(config.limits.max_message_bytes, 16 * 1024 * 1024);
    }

    #[test]
    fn unknown_key_is_named() {
        let err = Config::from_toml("t.toml", "[audit]\npaht = \"x\"\n").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("paht"), "{text}");
        assert!(text.contains("t.toml"), "{text}");
    }

    #[test]
    fn unknown_section_is_named() {
        let err = Config::from_toml("t.toml", "[gaurdian]\nmode = \"embedded\"\n").unwrap_err();
        assert!(err.to_string().contains("gaurdian"), "{err}");
    }

    #[test]
    fn upstream_needs_a_command() {
        let err = Config::from_toml("t.toml", "[[upstream]]\nname = \"x\"\n").unwrap_err();
        assert!(err.to_string().contains("command"), "{err}");
    }

    #[test]
    fn remote_guardian_needs_an_endpoint_and_a_secret() {
        let err = Config::from_toml("t.toml", "[guardian]\nmode = \"remote\"\n").unwrap_err();
        assert!(err.to_string().contains("url"), "{err}");
        let err = Config::from_toml(
            "t.toml",
            "[guardian]\nmode = \"remote\"\nurl = \"http://127.0.0.1:1/acs\"\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("secret"), "{err}");
        let config = Config::from_toml(
            "t.toml",
            "[guardian]\nmode = \"remote\"\nurl = \"http://127.0.0.1:1/acs\"\nsecret_env = \"S\"\non_decision_failure = \"deny\"\n",
        )
        .unwrap();
        assert_eq!(
            config.guardian.on_decision_failure,
            Some(PostureSetting::Deny)
        );
    }

    #[test]
    fn sample_config_loads() {
        let config = Config::load(Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/proxy.toml"
        )))
        .unwrap();
        assert_eq!(config.upstreams.len(), 1);
    }
}
