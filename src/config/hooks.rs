//! `[hooks]`: how MCP messages become hooks and what every envelope carries.

use serde::Deserialize;

pub use crate::hooks::ToolsCallHooks;

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
    /// Over stdio, the caller's `user_context.user_id`; by default the OS
    /// user running the proxy (a `posix_uid` identity).
    #[serde(default)]
    pub user_id: Option<String>,
    /// Over stdio, the caller's `user_context.roles`.
    #[serde(default)]
    pub roles: Vec<String>,
    /// Over stdio, the caller's tenant (`params.tenant_id`).
    #[serde(default)]
    pub tenant: Option<String>,
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
            user_id: None,
            roles: Vec::new(),
            tenant: None,
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
