//! `[integrity] hide_denied_tools` over a virtual server: the upstream's
//! relay session hides what the rules deny by the server's own names; the
//! router also hides what they deny by the name the agent sees.

use std::sync::Arc;

use crate::config::Config;
use crate::hooks::Identity;
use crate::relay::integrity::denies_tool_outright;

/// The tools the rules deny one session's caller outright, left out of
/// the agent's `tools/list`.
pub(super) struct DeniedTools {
    config: Arc<Config>,
    user: Option<Arc<Identity>>,
}

impl DeniedTools {
    /// For `user`'s session under `config`; `None` when nothing is hidden.
    pub(super) fn new(config: &Arc<Config>, user: Option<Arc<Identity>>) -> Option<Self> {
        config.integrity.hide_denied_tools.then(|| Self {
            config: config.clone(),
            user,
        })
    }

    /// Whether the rules deny every call of `tool` (exposed as `called_as`).
    pub(super) fn hides(&self, tool: &str, called_as: &str) -> bool {
        denies_tool_outright(&self.config, self.user.as_deref(), tool, Some(called_as))
    }
}
