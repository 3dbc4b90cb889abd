//! `[[aggregate]]`: one virtual server made of several `[[upstream]]`s,
//! their tools, prompts and resources merged behind one endpoint.

use serde::Deserialize;

/// One virtual server: the agent sees one MCP server whose tools and
/// prompts are the named upstreams', under prefixed names.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AggregateConfig {
    /// Route name (`/mcp/<name>` on network transports).
    pub name: String,
    /// The `[[upstream]]` names it merges, in the order their items are listed.
    pub upstreams: Vec<String>,
    /// When a tool or prompt name carries its upstream's name.
    #[serde(default)]
    pub prefix: PrefixMode,
    /// Between the upstream's name and the item's own name.
    #[serde(default = "default_separator")]
    pub separator: String,
    /// Which tools are offered: globs over `upstream<separator>tool` or the
    /// bare tool name; a leading `!` excludes. Empty: every tool.
    #[serde(default)]
    pub tools: Vec<String>,
    /// How long each upstream may take to start and answer `initialize`
    /// before the session goes on without it.
    #[serde(default = "default_startup_timeout_ms")]
    pub startup_timeout_ms: u64,
    /// How long a running session waits before it first tries to start
    /// again an upstream that died or did not start; each failed try
    /// doubles the wait (with jitter) up to `restart_max_backoff_ms`.
    #[serde(default = "default_restart_backoff_ms")]
    pub restart_backoff_ms: u64,
    /// The longest wait between two tries to start an upstream again.
    #[serde(default = "default_restart_max_backoff_ms")]
    pub restart_max_backoff_ms: u64,
}

/// `prefix`: when names are prefixed with their upstream's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrefixMode {
    /// Every name: `everything__echo`.
    #[default]
    Always,
    /// Only names two upstreams share; the others stay as their server
    /// names them.
    OnConflict,
    /// Never; two upstreams offering the same tool is a start-up error.
    Never,
}

fn default_startup_timeout_ms() -> u64 {
    10_000
}

fn default_restart_backoff_ms() -> u64 {
    1_000
}

fn default_restart_max_backoff_ms() -> u64 {
    60_000
}

fn default_separator() -> String {
    "__".to_owned()
}

impl AggregateConfig {
    /// Checks what can be checked without the other sections; the upstream
    /// names are checked by [`super::Config`], which knows them.
    pub(super) fn validate(&self) -> Result<(), String> {
        if self.name.is_empty() {
            return Err("[[aggregate]] needs a `name`".into());
        }
        if self.upstreams.is_empty() {
            return Err(format!(
                "aggregate {:?}: `upstreams` must name at least one [[upstream]]",
                self.name
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for upstream in &self.upstreams {
            if !seen.insert(upstream.as_str()) {
                return Err(format!(
                    "aggregate {:?}: upstream {upstream:?} is listed twice",
                    self.name
                ));
            }
        }
        if self.separator.is_empty() {
            return Err(format!(
                "aggregate {:?}: `separator` must not be empty",
                self.name
            ));
        }
        if self.startup_timeout_ms == 0 {
            return Err(format!(
                "aggregate {:?}: `startup_timeout_ms` must be at least 1",
                self.name
            ));
        }
        if self.restart_backoff_ms == 0 || self.restart_max_backoff_ms < self.restart_backoff_ms {
            return Err(format!(
                "aggregate {:?}: `restart_backoff_ms` must be at least 1 and at most `restart_max_backoff_ms`",
                self.name
            ));
        }
        for pattern in &self.tools {
            let glob = pattern.strip_prefix('!').unwrap_or(pattern);
            if let Err(err) = globset::Glob::new(glob) {
                return Err(format!(
                    "aggregate {:?}: tools pattern {pattern:?}: {err}",
                    self.name
                ));
            }
        }
        Ok(())
    }
}
