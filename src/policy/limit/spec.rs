//! What `[[policy.limit]]` says, exactly as written.

use serde::Deserialize;

/// One `[[policy.limit]]` entry: how many calls a caller may make per
/// interval, and/or how many may be in flight at once.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitSpec {
    /// Unique limit name, reported in refusals, audit entries and metrics.
    pub name: String,
    /// Glob over the hook methods a call passes through
    /// (`protocols/MCP/<method>`, and `steps/toolCallRequest` for a
    /// `tools/call`); `*` crosses `/`.
    #[serde(default = "any_hook")]
    pub hook: String,
    /// Glob over the tool name; when present only `tools/call` counts.
    #[serde(default)]
    pub tool: Option<String>,
    /// Whose calls share one quota.
    pub per: Per,
    /// Calls allowed per `interval_s` (a token bucket of that size,
    /// refilled evenly over the interval).
    #[serde(default)]
    pub calls: Option<u32>,
    /// The interval `calls` is counted over, in seconds.
    #[serde(default)]
    pub interval_s: Option<u64>,
    /// Calls that may be awaiting their response at once.
    #[serde(default)]
    pub concurrent: Option<u32>,
}

fn any_hook() -> String {
    "*".to_owned()
}

/// Whose calls count against the same quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Per {
    /// Each authenticated user (`user_id`) across all their sessions;
    /// callers with no identity share one quota.
    User,
    /// Each agent (`[hooks] agent_id`).
    Agent,
    /// Each tenant; callers with no tenant share one quota.
    Tenant,
    /// Each session.
    Session,
    /// The whole process.
    Global,
}

impl Per {
    /// The spelling in `proxy.toml`.
    pub fn as_str(self) -> &'static str {
        match self {
            Per::User => "user",
            Per::Agent => "agent",
            Per::Tenant => "tenant",
            Per::Session => "session",
            Per::Global => "global",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_with_defaults() {
        let spec: LimitSpec =
            toml::from_str("name = \"l\"\nper = \"user\"\ncalls = 10\ninterval_s = 60\n")
                .expect("valid");
        assert_eq!(spec.hook, "*");
        assert_eq!(spec.per, Per::User);
        assert_eq!((spec.calls, spec.interval_s), (Some(10), Some(60)));
        assert_eq!(spec.concurrent, None);
    }

    #[test]
    fn unknown_keys_and_scopes_are_rejected() {
        assert!(toml::from_str::<LimitSpec>("name = \"l\"\nper = \"user\"\nburst = 1\n").is_err());
        assert!(toml::from_str::<LimitSpec>("name = \"l\"\nper = \"planet\"\n").is_err());
    }
}
