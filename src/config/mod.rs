//! `proxy.toml` → one typed, validated [`Config`].
//!
//! Every section rejects unknown keys, so a typo is an error that names the
//! key instead of a setting that silently does nothing. The policy rules are
//! compiled here too, so a policy that cannot load fails at startup with the
//! file, line and rule.

mod error;
mod guardian;
mod hooks;
mod listen;
mod operations;
mod upstream;

use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;

pub use error::ConfigError;
pub use guardian::{GuardianConfig, GuardianMode, PostureSetting, StartupPosture};
pub use hooks::{HooksConfig, ToolsCallHooks};
pub use listen::{ListenConfig, ListenTransport};
pub use operations::{AuditConfig, LimitsConfig, MetricsConfig};
pub use upstream::{UpstreamConfig, UpstreamTransport};

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
        config.upstreams = vec![UpstreamConfig::for_command(command)];
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
        self.listen.validate().map_err(invalid)?;
        if self.listen.transport == ListenTransport::Stdio && self.upstreams.len() > 1 {
            return Err(invalid(
                "listen.transport = \"stdio\" serves exactly one [[upstream]]".into(),
            ));
        }
        let mut names = std::collections::BTreeSet::new();
        for upstream in &self.upstreams {
            if !names.insert(upstream.name.as_str()) {
                return Err(invalid(format!(
                    "two [[upstream]] routes are named {:?}",
                    upstream.name
                )));
            }
        }
        for upstream in &self.upstreams {
            upstream.validate().map_err(invalid)?;
        }
        if self.limits.max_message_bytes < 1024 {
            return Err(invalid(
                "limits.max_message_bytes must be at least 1024".into(),
            ));
        }
        if self.limits.max_in_flight == 0 {
            return Err(invalid("limits.max_in_flight must be at least 1".into()));
        }
        if self.limits.max_requests_per_session == Some(0) {
            return Err(invalid(
                "limits.max_requests_per_session must be at least 1".into(),
            ));
        }
        if self.limits.max_requests_total == Some(0) {
            return Err(invalid(
                "limits.max_requests_total must be at least 1".into(),
            ));
        }
        let depth = self.limits.max_json_depth;
        if !(1..=crate::jsonrpc::MAX_JSON_DEPTH_CEILING).contains(&depth) {
            return Err(invalid(format!(
                "limits.max_json_depth must be between 1 and {}, got {depth}",
                crate::jsonrpc::MAX_JSON_DEPTH_CEILING
            )));
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
    fn share_is_for_spawned_servers() {
        let config = Config::from_toml(
            "t.toml",
            "[[upstream]]\ncommand = [\"srv\"]\nshare = true\n",
        )
        .unwrap();
        assert!(config.upstreams[0].share);
        let err = Config::from_toml(
            "t.toml",
            "[[upstream]]\nurl = \"http://127.0.0.1:1/mcp\"\nshare = true\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("share"), "{err}");
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
