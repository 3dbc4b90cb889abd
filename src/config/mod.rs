//! `proxy.toml` → one typed, validated [`Config`].
//!
//! Every section rejects unknown keys, so a typo is an error that names the
//! key instead of a setting that silently does nothing. The policy rules are
//! compiled here too, so a policy that cannot load fails at startup with the
//! file, line and rule. Relative paths in a file follow the file's directory,
//! whatever the working directory the proxy was started in.

mod error;
mod guardian;
mod hooks;
mod integrity;
mod listen;
mod oauth;
mod operations;
mod paths;
mod upstream;
mod upstream_oauth;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

pub use error::ConfigError;
pub use guardian::{GuardianConfig, GuardianMode, PostureSetting, StartupPosture};
pub use hooks::{HooksConfig, ToolsCallHooks};
pub use integrity::{IntegrityConfig, IntegrityMode, RuleKind, RuleSpec};
pub use listen::{ListenConfig, ListenTransport};
pub use oauth::OAuthConfig;
pub use operations::{AuditConfig, LimitsConfig, MetricsConfig};
pub use paths::PathSetting;
pub use upstream::{UpstreamConfig, UpstreamTransport};
pub use upstream_oauth::{ClientAuth, UpstreamOAuth};

use crate::policy::{rego, Policy, PolicySource, PolicySpec, RegoPolicy};
use paths::SectionPaths;

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
    /// The embedded Guardian's Rego policy, when `[policy] engine = "rego"`;
    /// it then decides instead of the rules.
    pub rego: Option<Arc<RegoPolicy>>,
    /// The audit log.
    pub audit: AuditConfig,
    /// The Prometheus endpoint.
    pub metrics: MetricsConfig,
    /// Resource limits on what clients and servers may send.
    pub limits: LimitsConfig,
    /// Pinned tool definitions, the poisoning scan and argument checks.
    pub integrity: IntegrityConfig,
    /// The file this configuration was read from, when it was: the embedded
    /// policy is reloaded from it.
    pub source: Option<PathBuf>,
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
    #[serde(default)]
    integrity: IntegrityConfig,
}

impl Config {
    /// Reads and validates a config file, and resolves its relative paths
    /// (the audit log's default included) against the file's directory.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let read_error = |source| ConfigError::Read {
            path: path.to_owned(),
            source,
        };
        let text = std::fs::read_to_string(path).map_err(read_error)?;
        let base = directory_of(path).map_err(read_error)?;
        let mut config = Self::parse(&path.display().to_string(), &text, Some(&base))?;
        config.resolve_paths(&base);
        config.source = Some(path.to_owned());
        Ok(config)
    }

    /// Parses and validates config text; `origin` names it in errors.
    /// Paths stay as written: with no file there is no directory for them
    /// to follow, so they are relative to the working directory.
    pub fn from_toml(origin: &str, text: &str) -> Result<Config, ConfigError> {
        Self::parse(origin, text, None)
    }

    /// [`Config::from_toml`], with the Rego policy's files relative to `base`.
    fn parse(origin: &str, text: &str, base: Option<&Path>) -> Result<Config, ConfigError> {
        let file: ConfigFile = toml::from_str(text).map_err(|err| ConfigError::Parse {
            origin: origin.to_owned(),
            message: err.to_string(),
        })?;
        let source = PolicySource::new(origin, text);
        let policy = Policy::compile(&file.policy, &source)?;
        let rego = rego::load_configured(&file.policy, &source, base)
            .map_err(crate::policy::PolicyError::from)?;
        let config = Config {
            listen: file.listen,
            upstreams: file.upstream,
            guardian: file.guardian,
            hooks: file.hooks,
            policy: Arc::new(policy),
            rego: rego.map(Arc::new),
            audit: file.audit,
            metrics: file.metrics,
            limits: file.limits,
            integrity: file.integrity,
            source: None,
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
        self.integrity.validate().map_err(invalid)?;
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

    /// Makes every relative path absolute against `base`, the config
    /// file's directory.
    fn resolve_paths(&mut self, base: &Path) {
        self.listen.resolve_paths(base);
        for upstream in &mut self.upstreams {
            upstream.resolve_paths(base);
        }
        self.guardian.resolve_paths(base);
        self.audit.resolve_paths(base);
        self.integrity.resolve_paths(base);
    }

    /// Every path-valued setting that is set, as the proxy will use it
    /// (what `config check` shows, so a misplaced file is seen before a run).
    pub fn path_settings(&self) -> Vec<PathSetting> {
        let mut settings = self.listen.path_settings();
        for upstream in &self.upstreams {
            settings.extend(upstream.path_settings());
        }
        settings.extend(self.guardian.path_settings());
        settings.extend(self.audit.path_settings());
        settings.extend(self.integrity.path_settings());
        settings
    }

    /// The one upstream of a stdio deployment, when configured.
    pub fn upstream(&self) -> Option<&UpstreamConfig> {
        self.upstreams.first()
    }
}

/// The absolute directory holding the config file at `path`. Symbolic
/// links are not followed: paths are relative to where the file was named.
fn directory_of(path: &Path) -> std::io::Result<PathBuf> {
    let file = std::path::absolute(path)?;
    Ok(file
        .parent()
        .map_or_else(|| file.clone(), Path::to_path_buf))
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

    /// Every path-valued setting, relative, on a network listener.
    const RELATIVE_PATHS: &str = r#"
[listen]
transport = "http"
auth_tokens_file = "secrets/tokens"
tls_cert = "tls/cert.pem"
tls_key = "tls/key.pem"

[[upstream]]
name = "local"
command = ["bin/server", "data/seed.json"]
cwd = "work"

[[upstream]]
name = "bare"
command = ["npx", "-y", "pkg"]

[[upstream]]
name = "net"
url = "https://tools.internal/mcp"
ca_file = "upstream/ca.pem"
client_cert = "upstream/client.pem"
client_key = "upstream/client.key"

[guardian]
mode = "remote"
url = "https://guardian.internal/acs"
secret_file = "guardian/secret"
ca_file = "guardian/ca.pem"
client_cert = "guardian/client.pem"
client_key = "guardian/client.key"

[audit]
path = "logs/audit.jsonl"
"#;

    fn load_in_temp_dir(text: &str) -> (tempfile::TempDir, Config) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("proxy.toml");
        std::fs::write(&file, text).unwrap();
        let config = Config::load(&file).unwrap();
        (dir, config)
    }

    #[test]
    fn load_resolves_every_relative_path_against_the_files_directory() {
        let (dir, config) = load_in_temp_dir(RELATIVE_PATHS);
        let settings = config.path_settings();
        assert_eq!(settings.len(), 14, "{settings:#?}");
        for setting in settings.iter().filter(|setting| !setting.on_path) {
            assert!(setting.path.starts_with(dir.path()), "{setting}");
        }
        let local = &config.upstreams[0];
        assert_eq!(
            local.command,
            [
                dir.path().join("bin/server").display().to_string(),
                "data/seed.json".to_owned()
            ]
        );
        assert_eq!(
            local.cwd.as_deref(),
            Some(dir.path().join("work").as_path())
        );
        assert_eq!(config.upstreams[1].command[0], "npx");
        assert_eq!(config.audit.path, dir.path().join("logs/audit.jsonl"));
        assert_eq!(
            config.guardian.secret_file.as_deref(),
            Some(dir.path().join("guardian/secret").as_path())
        );
        assert_eq!(
            config.listen.tls_key.as_deref(),
            Some(dir.path().join("tls/key.pem").as_path())
        );
    }

    #[test]
    fn the_default_audit_log_and_a_guardian_program_follow_the_file() {
        let (dir, config) = load_in_temp_dir(
            "[guardian]\nmode = \"remote\"\ncommand = [\"./guardian.py\"]\nsecret_env = \"S\"\n",
        );
        assert_eq!(config.audit.path, dir.path().join("acs-audit.jsonl"));
        assert_eq!(
            config.guardian.command,
            [dir.path().join("./guardian.py").display().to_string()]
        );
    }

    #[test]
    fn absolute_paths_are_kept() {
        let (_dir, config) = load_in_temp_dir(
            "[[upstream]]\ncommand = [\"/usr/bin/srv\"]\ncwd = \"/srv\"\n\n[audit]\npath = \"/var/log/a.jsonl\"\n",
        );
        assert_eq!(config.upstreams[0].command, ["/usr/bin/srv"]);
        assert_eq!(config.upstreams[0].cwd.as_deref(), Some(Path::new("/srv")));
        assert_eq!(config.audit.path, Path::new("/var/log/a.jsonl"));
    }

    #[test]
    fn text_without_a_file_keeps_paths_as_written() {
        let config = Config::from_toml("t.toml", RELATIVE_PATHS).unwrap();
        assert_eq!(config.upstreams[0].command[0], "bin/server");
        assert_eq!(config.audit.path, Path::new("logs/audit.jsonl"));
        let zero = Config::for_command(vec!["./srv".into()]).unwrap();
        assert_eq!(zero.upstreams[0].command, ["./srv"]);
        assert_eq!(zero.audit.path, Path::new("acs-audit.jsonl"));
    }

    #[test]
    fn rego_keys_belong_to_the_rego_engine() {
        let err = Config::from_toml("t.toml", "[policy]\nrego = [\"p/*.rego\"]\n").unwrap_err();
        assert!(
            err.to_string()
                .contains("policy.rego is only used with engine = \"rego\""),
            "{err}"
        );
        let text = "[policy]\nengine = \"rego\"\nrego = [\"p.rego\"]\n\n[[policy.rule]]\nname = \"x\"\ndecision = \"allow\"\n";
        let err = Config::from_toml("t.toml", text).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("t.toml:5: [[policy.rule]] is not used"),
            "{err}"
        );
        let err = Config::from_toml("t.toml", "[policy]\nengine = \"rego\"\n").unwrap_err();
        assert!(err.to_string().contains("needs at least one glob"), "{err}");
    }

    #[test]
    fn rego_files_follow_the_config_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("policies")).unwrap();
        std::fs::write(
            dir.path().join("policies/p.rego"),
            "package acs\ndecision := {\"decision\": \"allow\"}\n",
        )
        .unwrap();
        let file = dir.path().join("proxy.toml");
        std::fs::write(
            &file,
            "[policy]\nengine = \"rego\"\nrego = [\"policies/*.rego\"]\nid = \"mine\"\n",
        )
        .unwrap();
        let config = Config::load(&file).unwrap();
        let rego = config.rego.expect("a Rego policy");
        assert_eq!(rego.files(), [dir.path().join("policies/p.rego")]);
        assert_eq!(rego.policy_id(), "mine");
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
