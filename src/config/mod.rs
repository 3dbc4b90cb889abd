//! `proxy.toml` → one typed, validated [`Config`].
//!
//! Every section rejects unknown keys, so a typo is an error that names the
//! key instead of a setting that silently does nothing. The policy rules are
//! compiled here too, so a policy that cannot load fails at startup with the
//! file, line and rule. Relative paths in a file follow the file's directory,
//! whatever the working directory the proxy was started in.

mod aggregate;
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

pub use aggregate::{AggregateConfig, PrefixMode};
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

pub use crate::telemetry::TelemetryConfig;

use crate::policy::{rego, Policy, PolicySource, PolicySpec, RegoPolicy};
use paths::SectionPaths;

/// The whole configuration, as the rest of the proxy sees it.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where agents connect.
    pub listen: ListenConfig,
    /// The MCP server(s) behind the proxy.
    pub upstreams: Vec<UpstreamConfig>,
    /// Virtual servers, each merging several upstreams behind one route.
    pub aggregates: Vec<AggregateConfig>,
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
    /// OpenTelemetry traces (`[telemetry]`; the `OTEL_*` variables fill in
    /// what it leaves out).
    pub telemetry: TelemetryConfig,
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
    aggregate: Vec<AggregateConfig>,
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
    #[serde(default)]
    telemetry: TelemetryConfig,
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
            aggregates: file.aggregate,
            guardian: file.guardian,
            hooks: file.hooks,
            policy: Arc::new(policy),
            rego: rego.map(Arc::new),
            audit: file.audit,
            metrics: file.metrics,
            limits: file.limits,
            integrity: file.integrity,
            telemetry: file.telemetry,
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
        self.validate_stdio_routes().map_err(invalid)?;
        let mut names = std::collections::BTreeSet::new();
        for upstream in &self.upstreams {
            if !names.insert(upstream.name.as_str()) {
                return Err(invalid(format!(
                    "two [[upstream]] routes are named {:?}",
                    upstream.name
                )));
            }
        }
        self.validate_aggregates(&names).map_err(invalid)?;
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

    /// Over stdio the proxy serves one thing: one `[[upstream]]`, or one
    /// `[[aggregate]]` of several.
    fn validate_stdio_routes(&self) -> Result<(), String> {
        if self.listen.transport != ListenTransport::Stdio {
            return Ok(());
        }
        match self.aggregates.len() {
            0 if self.upstreams.len() > 1 => Err(
                "listen.transport = \"stdio\" serves exactly one [[upstream]] or one [[aggregate]]"
                    .into(),
            ),
            0 | 1 => Ok(()),
            _ => Err("listen.transport = \"stdio\" serves at most one [[aggregate]]".into()),
        }
    }

    /// Each aggregate names known upstreams and a route of its own.
    fn validate_aggregates(
        &self,
        upstreams: &std::collections::BTreeSet<&str>,
    ) -> Result<(), String> {
        let mut names = std::collections::BTreeSet::new();
        for aggregate in &self.aggregates {
            aggregate.validate()?;
            if upstreams.contains(aggregate.name.as_str()) {
                return Err(format!(
                    "aggregate {:?} has the name of an [[upstream]]: routes need distinct names",
                    aggregate.name
                ));
            }
            if !names.insert(aggregate.name.as_str()) {
                return Err(format!(
                    "two [[aggregate]] routes are named {:?}",
                    aggregate.name
                ));
            }
            if let Some(unknown) = aggregate
                .upstreams
                .iter()
                .find(|name| !upstreams.contains(name.as_str()))
            {
                return Err(format!(
                    "aggregate {:?} names {unknown:?}, which is no [[upstream]]",
                    aggregate.name
                ));
            }
        }
        Ok(())
    }

    /// The network routes, in configuration order: every aggregate, then
    /// every upstream no aggregate merges (those are reached through it).
    pub fn route_names(&self) -> Vec<String> {
        let merged: std::collections::BTreeSet<&str> = self
            .aggregates
            .iter()
            .flat_map(|a| a.upstreams.iter().map(String::as_str))
            .collect();
        self.aggregates
            .iter()
            .map(|a| a.name.clone())
            .chain(
                self.upstreams
                    .iter()
                    .filter(|u| !merged.contains(u.name.as_str()))
                    .map(|u| u.name.clone()),
            )
            .collect()
    }

    /// The aggregate named `name`, when there is one.
    pub fn aggregate(&self, name: &str) -> Option<&AggregateConfig> {
        self.aggregates.iter().find(|a| a.name == name)
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
mod tests;
