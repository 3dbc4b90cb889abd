//! Which `[[policy.limit]]` set counts a session's calls, and what a policy
//! sees of it (`input.context.limits`).
//!
//! The embedded Guardian reloads its limits with its policy, so the set in
//! force is asked of the Guardian first; a remote Guardian has none, and
//! the configuration the session started with applies.

use serde_json::Value;

use crate::hooks::{self, mcp, HookRequest};
use crate::policy::limit::{LimitedCall, RateLimits};
use crate::session::Session;

/// Runs `use_limits` on the limits in force for `session`.
pub fn with_limits<R>(session: &Session, use_limits: impl FnOnce(&RateLimits) -> R) -> R {
    match session.guardian.rate_limits() {
        Some(limits) => use_limits(&limits),
        None => use_limits(session.config.policy.limits()),
    }
}

/// The limits the call `hook` belongs to falls under, with where its
/// caller stands (see [`crate::policy::limit::LimitUsage`]); `None` when
/// no limit is configured.
pub fn usage(session: &Session, hook: &HookRequest) -> Option<Value> {
    with_limits(session, |limits| {
        if limits.is_empty() {
            return None;
        }
        let wrapped_call = mcp::wrapped_method("tools/call");
        let tool_call = [wrapped_call.as_str(), hooks::TOOL_CALL_REQUEST];
        let one = [hook.method.as_str()];
        let hooks: &[&str] = if tool_call.contains(&hook.method.as_str()) {
            &tool_call
        } else {
            &one
        };
        let metadata = session.metadata();
        let session_id = session.session_id.to_string();
        let call = LimitedCall {
            hooks,
            tool: hook.tool.as_deref(),
            called_as: hook.called_as.as_deref(),
            user: metadata.user.as_deref(),
            agent: &metadata.agent_id,
            session: &session_id,
        };
        serde_json::to_value(limits.usage(&call)).ok()
    })
}
