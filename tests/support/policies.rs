//! Policies several test files run the proxy with.

/// The two data rules of the sample `proxy.toml`: `get-env` denied before
/// it reaches the server, and US social security numbers redacted from
/// every tool result.
pub const DENY_AND_REDACT_RULES: &str = r#"
[[policy.rule]]
name = "no-environment-dump"
hook = "steps/toolCallRequest"
tool = "get-env"
decision = "deny"
reasoning = "dumping the server environment would expose credentials"

[[policy.rule]]
name = "redact-ssn"
hook = "steps/toolCallResult"
decision = "modify"
reasoning = "US social security numbers are removed from tool output"
redact = { pointer = "/outputs", regex = '\b\d{3}-\d{2}-\d{4}\b', replacement = "[REDACTED SSN]" }
"#;
