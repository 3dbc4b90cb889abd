//! The JSON script that drives the Guardian's answers (see README.md).
//!
//! Unknown members are rejected everywhere, so a typo in a test's script is
//! a startup error rather than a silently ignored rule.

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{bail, Context as _};
use serde::Deserialize;
use serde_json::{json, Map, Value};

/// A whole script. Every member is optional; `{}` allows everything.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// How `handshake/hello` is answered.
    #[serde(default)]
    pub hello: Hello,
    /// The action when no rule matches (never applied to `system/ping`).
    #[serde(default = "Action::allow")]
    pub default: Action,
    /// Rules, tried in order; the first that matches and has firings left wins.
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// When true, a rule without `times` fires at most once.
    #[serde(default)]
    pub once: bool,
    /// Reject requests whose `params.signature` does not verify (-32004).
    #[serde(default = "yes")]
    pub verify_signatures: bool,
    /// Reject a `request_id` or `nonce` seen before in the session (-32005).
    #[serde(default = "yes")]
    pub check_replay: bool,
    /// Reject a `timestamp` outside the skew window (-32006).
    #[serde(default = "yes")]
    pub check_timestamp: bool,
    /// Deny (`chain_mismatch`) a request whose
    /// `metadata.session_state.chain_hash` is not a head this session has had.
    #[serde(default)]
    pub check_chain_hash: bool,
    /// Accept JSON-RPC batches: each element is handled as if it came
    /// alone, and the answers go back as one array. When false (the
    /// default) an array is answered with a single -32600.
    #[serde(default)]
    pub batch: bool,
}

impl Default for Script {
    fn default() -> Self {
        serde_json::from_value(json!({})).expect("the empty script is valid")
    }
}

fn yes() -> bool {
    true
}

impl Script {
    /// Reads and validates a script file.
    pub fn load(path: &Path) -> anyhow::Result<Script> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading script {}", path.display()))?;
        Script::parse(&text).with_context(|| format!("in script {}", path.display()))
    }

    /// Parses and validates script text.
    pub fn parse(text: &str) -> anyhow::Result<Script> {
        let script: Script = serde_json::from_str(text).context("script is not valid")?;
        script.validate()?;
        Ok(script)
    }

    fn validate(&self) -> anyhow::Result<()> {
        self.default.validate().context("in \"default\"")?;
        for (index, rule) in self.rules.iter().enumerate() {
            if rule.method.is_empty() {
                bail!("rule {index}: \"method\" is empty");
            }
            let fixed = rule.method.strip_suffix('*').unwrap_or(&rule.method);
            if fixed.contains('*') {
                bail!("rule {index}: '*' is only allowed at the end of \"method\"");
            }
            rule.then
                .validate()
                .with_context(|| format!("in rule {index}"))?;
        }
        Ok(())
    }
}

/// The `handshake/hello` answer.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    /// What to do with the handshake.
    #[serde(default)]
    pub action: HelloAction,
    /// Error code for `refuse` (default -32000 SESSION_REFUSED).
    #[serde(default = "session_refused")]
    pub code: i64,
    /// Error message for `refuse`.
    #[serde(default)]
    pub message: Option<String>,
    /// Error `data` for `refuse` (default `{"reason": "refused_by_script"}`).
    #[serde(default)]
    pub data: Option<Value>,
    /// `methods_evaluated`; `null`/absent = every method the client declared.
    #[serde(default)]
    pub methods_evaluated: Option<Vec<String>>,
    /// `timeout_config` as sent; `null` omits it.
    #[serde(default = "default_timeout_config")]
    pub timeout_config: Option<Value>,
    /// `on_decision_failure` as sent; `null` omits it.
    #[serde(default = "proceed")]
    pub on_decision_failure: Option<String>,
    /// `skew_window_ms`, also the window of the timestamp check.
    #[serde(default = "default_skew_window_ms")]
    pub skew_window_ms: u64,
    /// Wait this long before answering.
    #[serde(default)]
    pub delay_ms: u64,
    /// Extra members merged into the ServerHello before signing.
    #[serde(default)]
    pub extra: Option<Map<String, Value>>,
}

impl Default for Hello {
    fn default() -> Self {
        serde_json::from_value(json!({})).expect("the empty hello is valid")
    }
}

fn session_refused() -> i64 {
    -32000
}

fn default_timeout_config() -> Option<Value> {
    Some(json!({"default_ms": 2000, "per_method_ms": {}}))
}

fn proceed() -> Option<String> {
    Some("proceed".to_owned())
}

fn default_skew_window_ms() -> u64 {
    300_000
}

/// What the Guardian does with `handshake/hello`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HelloAction {
    /// Answer with a signed ServerHello.
    #[default]
    Ok,
    /// Answer with a signed JSON-RPC error (`code`, `message`, `data`).
    Refuse,
    /// Never answer.
    Silent,
    /// HTTP: close the connection; stdio: exit.
    Drop,
    /// Answer with bytes that are not JSON.
    Malformed,
    /// A ServerHello without signature.
    Unsigned,
    /// A ServerHello whose signature value is wrong.
    BadSignature,
}

/// One rule: when it matches, `then` is the action.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// A method name, or a prefix ending in `*` (`"steps/*"`, `"*"`).
    /// `system/ping` is only matched by the exact name.
    pub method: String,
    /// Tool name; see [`tool_name`] for where it is read.
    #[serde(default)]
    pub tool: Option<String>,
    /// How many times the rule may fire (absent = unlimited unless `once`).
    #[serde(default)]
    pub times: Option<u32>,
    /// The action.
    pub then: Action,
}

impl Rule {
    /// Whether the rule applies to `method` with tool name `tool`.
    pub fn matches(&self, method: &str, tool: Option<&str>) -> bool {
        let method_ok = if method == crate::PING {
            self.method == method
        } else {
            match self.method.strip_suffix('*') {
                Some(prefix) => method.starts_with(prefix),
                None => self.method == method,
            }
        };
        method_ok
            && match &self.tool {
                Some(wanted) => tool == Some(wanted.as_str()),
                None => true,
            }
    }
}

/// The fields every decision action may carry.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Verdict {
    /// `reasoning`; a default is used where ACS requires one.
    #[serde(default)]
    pub reasoning: Option<String>,
    /// `reason_codes`.
    #[serde(default)]
    pub reason_codes: Option<Vec<String>>,
    /// Extra members merged into the result before signing
    /// (e.g. `policy_references`, `metadata`).
    #[serde(default)]
    pub extra: Option<Map<String, Value>>,
}

/// `modify`: a verdict plus the literal `modifications` object.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Modify {
    /// Sent as is, even if it breaks ACS composition rules (tests may want that).
    pub modifications: Value,
    #[serde(default)]
    pub reasoning: Option<String>,
    #[serde(default)]
    pub reason_codes: Option<Vec<String>>,
    #[serde(default)]
    pub extra: Option<Map<String, Value>>,
}

/// `ask`: a verdict plus `ask_details` (a default approver if absent).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ask {
    #[serde(default)]
    pub ask_details: Option<Value>,
    #[serde(default)]
    pub reasoning: Option<String>,
    #[serde(default)]
    pub reason_codes: Option<Vec<String>>,
    #[serde(default)]
    pub extra: Option<Map<String, Value>>,
}

/// `defer`: a verdict plus `defer_details` (a default if absent).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Defer {
    #[serde(default)]
    pub defer_details: Option<Value>,
    #[serde(default)]
    pub reasoning: Option<String>,
    #[serde(default)]
    pub reason_codes: Option<Vec<String>>,
    #[serde(default)]
    pub extra: Option<Map<String, Value>>,
}

/// `late`: wait, then do `then`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Late {
    pub delay_ms: u64,
    pub then: Box<Action>,
}

/// A corruption applied to the reply of `then` (default `allow`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Wrapped {
    #[serde(default)]
    pub then: Option<Box<Action>>,
}

/// `error`: a signed JSON-RPC error reply.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorReply {
    pub code: i64,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub data: Option<Value>,
}

/// `malformed`: the bytes to send (default: a truncated JSON object).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Malformed {
    #[serde(default)]
    pub body: Option<String>,
}

/// What the Guardian does with one request.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    Allow(Verdict),
    Deny(Verdict),
    Modify(Modify),
    Ask(Ask),
    Defer(Defer),
    /// `deny` with `reason_codes: ["chain_mismatch"]`.
    ChainMismatch(Verdict),
    Late(Late),
    /// The reply of `then` without its signature.
    Unsigned(Wrapped),
    /// The reply of `then` with a signature over the wrong bytes.
    BadSignature(Wrapped),
    /// The reply of `then` with a fresh random `result.request_id` (signed).
    WrongRequestId(Wrapped),
    /// The reply of `then` with `result.type = "progress"` (signed).
    WrongType(Wrapped),
    /// The reply of `then` with the decision upper-cased (signed).
    Uppercase(Wrapped),
    Error(ErrorReply),
    /// HTTP: close the connection without a response; stdio: exit.
    Drop(Empty),
    Malformed(Malformed),
    /// Never answer.
    Silent(Empty),
}

/// An action without members.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

impl Action {
    /// A plain `allow`.
    pub fn allow() -> Action {
        Action::Allow(Verdict::default())
    }

    /// The action's name as written in the script, with nested actions
    /// joined by `:` (e.g. `late:deny`, `unsigned:allow`). Used in `--record`.
    pub fn label(&self) -> String {
        match self {
            Action::Allow(_) => "allow".into(),
            Action::Deny(_) => "deny".into(),
            Action::Modify(_) => "modify".into(),
            Action::Ask(_) => "ask".into(),
            Action::Defer(_) => "defer".into(),
            Action::ChainMismatch(_) => "chain_mismatch".into(),
            Action::Late(late) => format!("late:{}", late.then.label()),
            Action::Unsigned(w) => format!("unsigned:{}", w.inner().label()),
            Action::BadSignature(w) => format!("bad_signature:{}", w.inner().label()),
            Action::WrongRequestId(w) => format!("wrong_request_id:{}", w.inner().label()),
            Action::WrongType(w) => format!("wrong_type:{}", w.inner().label()),
            Action::Uppercase(w) => format!("uppercase:{}", w.inner().label()),
            Action::Error(error) => format!("error:{}", error.code),
            Action::Drop(_) => "drop".into(),
            Action::Malformed(_) => "malformed".into(),
            Action::Silent(_) => "silent".into(),
        }
    }

    fn validate(&self) -> anyhow::Result<()> {
        match self {
            Action::Modify(modify) if !modify.modifications.is_object() => {
                bail!("modify: \"modifications\" must be an object")
            }
            Action::Late(late) => late.then.validate(),
            Action::Unsigned(w)
            | Action::BadSignature(w)
            | Action::WrongRequestId(w)
            | Action::WrongType(w)
            | Action::Uppercase(w) => w.inner().validate(),
            _ => Ok(()),
        }
    }
}

impl Wrapped {
    /// The wrapped action (`allow` when absent).
    pub fn inner(&self) -> Action {
        self.then.as_deref().cloned().unwrap_or_else(Action::allow)
    }
}

/// The tool a request is about, for rule matching:
/// `payload.tool.name` for `steps/toolCall*`, `payload.params.name` for a
/// wrapped MCP `tools/call` request (`protocols/MCP/tools/call` or
/// `wrapped:mcp-<v>/tools/call`). A wrapped `tools/call` *response* has no
/// name of its own; the caller supplies the one remembered from the request.
pub fn tool_name<'a>(method: &str, payload: &'a Value) -> Option<&'a str> {
    if method.starts_with("steps/toolCall") {
        payload.get("tool")?.get("name")?.as_str()
    } else if is_mcp_tools_call(method) {
        payload.get("params")?.get("name")?.as_str()
    } else {
        None
    }
}

/// Whether `method` wraps an MCP `tools/call`.
pub fn is_mcp_tools_call(method: &str) -> bool {
    method == "protocols/MCP/tools/call"
        || (method.starts_with("wrapped:") && method.ends_with("/tools/call"))
}

/// The rules with their remaining firings.
#[derive(Debug)]
pub struct RuleBook {
    rules: Vec<Rule>,
    fired: Vec<AtomicU32>,
    once: bool,
    default: Action,
}

impl RuleBook {
    /// Builds the rule book of `script`.
    pub fn new(script: &Script) -> RuleBook {
        RuleBook {
            rules: script.rules.clone(),
            fired: script.rules.iter().map(|_| AtomicU32::new(0)).collect(),
            once: script.once,
            default: script.default.clone(),
        }
    }

    /// The action for `method`/`tool`: the first matching rule with firings
    /// left (counting this firing), else `None`.
    pub fn rule_for(&self, method: &str, tool: Option<&str>) -> Option<Action> {
        for (rule, fired) in self.rules.iter().zip(&self.fired) {
            if !rule.matches(method, tool) {
                continue;
            }
            let limit = rule.times.or(if self.once { Some(1) } else { None });
            let taken =
                fired.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |count| match limit {
                    Some(limit) if count >= limit => None,
                    _ => Some(count.saturating_add(1)),
                });
            if taken.is_ok() {
                return Some(rule.then.clone());
            }
        }
        None
    }

    /// The action for a non-ping request: a rule's, else the default.
    pub fn action_for(&self, method: &str, tool: Option<&str>) -> Action {
        self.rule_for(method, tool)
            .unwrap_or_else(|| self.default.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_script_allows_and_checks_everything() {
        let script = Script::parse("{}").expect("valid");
        assert!(matches!(script.default, Action::Allow(_)));
        assert!(script.verify_signatures && script.check_replay && script.check_timestamp);
        assert!(!script.check_chain_hash);
        assert!(!script.batch);
        assert_eq!(script.hello.action, HelloAction::Ok);
        assert_eq!(script.hello.skew_window_ms, 300_000);
        assert_eq!(script.hello.on_decision_failure.as_deref(), Some("proceed"));
    }

    #[test]
    fn brief_example_parses() {
        let script = Script::parse(
            r#"{
              "hello": {"action": "ok", "code": -32000, "methods_evaluated": null,
                        "timeout_config": {"default_ms": 2000, "per_method_ms": {}},
                        "on_decision_failure": "proceed"},
              "default": {"action": "allow"},
              "rules": [ {"method": "steps/toolCallRequest", "tool": "get-env",
                          "then": {"action": "deny", "reasoning": "no", "reason_codes": ["x"]}} ],
              "once": false
            }"#,
        )
        .expect("valid");
        assert_eq!(script.rules.len(), 1);
        assert!(matches!(script.rules[0].then, Action::Deny(_)));
    }

    #[test]
    fn typos_are_rejected() {
        assert!(Script::parse(r#"{"rule": []}"#).is_err());
        assert!(Script::parse(r#"{"default": {"action": "deny", "reason": "x"}}"#).is_err());
        assert!(Script::parse(r#"{"default": {"action": "permit"}}"#).is_err());
        assert!(Script::parse(r#"{"default": {"action": "modify"}}"#).is_err());
        assert!(
            Script::parse(r#"{"rules": [{"method": "a*b", "then": {"action": "allow"}}]}"#)
                .is_err()
        );
    }

    #[test]
    fn nested_actions_and_labels() {
        let script = Script::parse(
            r#"{"default": {"action": "late", "delay_ms": 5,
                            "then": {"action": "unsigned", "then": {"action": "deny"}}}}"#,
        )
        .expect("valid");
        assert_eq!(script.default.label(), "late:unsigned:deny");
        let bare = Script::parse(r#"{"default": {"action": "bad_signature"}}"#).expect("valid");
        assert_eq!(bare.default.label(), "bad_signature:allow");
    }

    #[test]
    fn rules_match_method_globs_tools_and_times() {
        let script = Script::parse(
            r#"{"rules": [
                {"method": "steps/toolCall*", "tool": "get-env", "times": 1, "then": {"action": "deny"}},
                {"method": "protocols/MCP/*", "then": {"action": "ask"}},
                {"method": "*", "then": {"action": "defer"}}
            ]}"#,
        )
        .expect("valid");
        let book = RuleBook::new(&script);
        let label =
            |method: &str, tool: Option<&str>| book.rule_for(method, tool).map(|a| a.label());
        assert_eq!(
            label("steps/toolCallRequest", Some("get-env")).as_deref(),
            Some("deny")
        );
        // times: 1 is used up; the catch-all applies.
        assert_eq!(
            label("steps/toolCallRequest", Some("get-env")).as_deref(),
            Some("defer")
        );
        assert_eq!(
            label("protocols/MCP/tools/call", None).as_deref(),
            Some("ask")
        );
        // The catch-all never captures a ping.
        assert_eq!(label(crate::PING, None), None);
    }

    #[test]
    fn once_limits_rules_without_times() {
        let script = Script::parse(
            r#"{"once": true, "rules": [{"method": "*", "then": {"action": "deny"}}]}"#,
        )
        .expect("valid");
        let book = RuleBook::new(&script);
        assert_eq!(book.action_for("steps/x", None).label(), "deny");
        assert_eq!(book.action_for("steps/x", None).label(), "allow");
    }

    #[test]
    fn tool_names_come_from_the_right_place() {
        let hook = json!({"tool": {"name": "get-env"}});
        let mcp = json!({"method": "tools/call", "params": {"name": "echo"}});
        assert_eq!(tool_name("steps/toolCallRequest", &hook), Some("get-env"));
        assert_eq!(tool_name("steps/toolCallResult", &hook), Some("get-env"));
        assert_eq!(tool_name("protocols/MCP/tools/call", &mcp), Some("echo"));
        assert_eq!(
            tool_name("wrapped:mcp-2025-06-18/tools/call", &mcp),
            Some("echo")
        );
        assert_eq!(tool_name("steps/userMessage", &hook), None);
    }
}
