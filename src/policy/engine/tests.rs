use super::*;
use crate::guardian::decision::{Disposition, PolicyReference, Redaction};
use crate::hooks::HookPayload;
use serde_json::{json, Value};

const CALL: &str = "steps/toolCallRequest";
const WRAPPED_CALL: &str = "protocols/MCP/tools/call";

fn policy(text: &str) -> Policy {
    Policy::from_toml_str("proxy.toml", text).unwrap_or_else(|e| panic!("{e}"))
}

fn decide(policy: &Policy, method: &str, tool: Option<&str>, payload: &Value) -> Decision {
    policy.evaluate(&HookView::new(
        method,
        tool,
        &HookPayload::from(payload.clone()),
    ))
}

fn rule_of(policy: &Policy, method: &str, tool: Option<&str>, payload: &Value) -> Option<String> {
    policy
        .matching_rule(&HookView::new(
            method,
            tool,
            &HookPayload::from(payload.clone()),
        ))
        .map(str::to_owned)
}

/// Tool globs are matched as a set per bucket and merged back with the
/// exact-tool and tool-less rules: file order still decides.
#[test]
fn tool_globs_across_buckets_keep_file_order() {
    let policy = policy(
        r#"
[[policy.rule]]
name = "a"
hook = "steps/toolCallRequest"
tool = "run_*"
match = { pointer = "/arguments/x/value", regex = "^1$" }
decision = "deny"
reasoning = "r"

[[policy.rule]]
name = "b"
tool = "run_sh*"
decision = "deny"
reasoning = "r"

[[policy.rule]]
name = "c"
hook = "steps/toolCallRequest"
tool = "run_shell"
decision = "deny"
reasoning = "r"

[[policy.rule]]
name = "d"
hook = "steps/*"
tool = "*"
decision = "deny"
reasoning = "r"

[[policy.rule]]
name = "e"
hook = "steps/*"
tool = "{run,walk}_*"
decision = "deny"
reasoning = "r"
"#,
    );
    let one = json!({"arguments": {"x": {"value": 1}}});
    let two = json!({"arguments": {"x": {"value": 2}}});
    let rule = |tool, payload| rule_of(&policy, CALL, tool, payload);
    assert_eq!(rule(Some("run_shell"), &one).as_deref(), Some("a"));
    assert_eq!(rule(Some("run_shell"), &two).as_deref(), Some("b"));
    assert_eq!(rule(Some("run_other"), &two).as_deref(), Some("d"));
    assert_eq!(rule(Some("walk_x"), &two).as_deref(), Some("d"));
    // Tool patterns, globs included, never fire for a hook without a tool.
    assert_eq!(rule(None, &one), None);
    assert_eq!(
        rule_of(&policy, WRAPPED_CALL, Some("run_shell"), &two).as_deref(),
        Some("b")
    );
    assert_eq!(
        rule_of(&policy, "steps/toolCallResult", Some("walk_x"), &two).as_deref(),
        Some("d")
    );
}

#[test]
fn default_applies_when_nothing_matches() {
    let allow = policy("[policy]\n");
    let decision = decide(&allow, CALL, None, &json!({}));
    assert_eq!(decision.decision, Disposition::Allow);
    assert_eq!(
        *decision.policy_references,
        [PolicyReference {
            policy_id: Some("proxy.toml".into()),
            rule_id: None
        }]
    );
    let deny = policy("[policy]\ndefault = \"deny\"\n");
    let decision = decide(&deny, CALL, None, &json!({}));
    assert_eq!(decision.decision, Disposition::Deny);
    assert!(decision.reasoning.is_some());
}

#[test]
fn rule_fills_reasoning_codes_and_reference() {
    let p = policy(
        r#"
[policy]
id = "corp-policy"
[[policy.rule]]
name = "no-env"
hook = "steps/toolCallRequest"
tool = "get-env"
decision = "deny"
reasoning = "environment is secret"
reason_codes = ["secrets"]
"#,
    );
    let d = decide(&p, CALL, Some("get-env"), &json!({}));
    assert_eq!(d.decision, Disposition::Deny);
    assert_eq!(d.reasoning.as_deref(), Some("environment is secret"));
    assert_eq!(d.reason_codes, ["secrets"]);
    assert_eq!(
        *d.policy_references,
        [PolicyReference {
            policy_id: Some("corp-policy".into()),
            rule_id: Some("no-env".into())
        }]
    );
    assert!(d.modifications.is_none() && d.ask_details.is_none() && d.defer_details.is_none());
}

#[test]
fn hook_glob_crosses_slashes() {
    let p = policy(
        r#"
[policy]
[[policy.rule]]
name = "mcp"
hook = "protocols/MCP/*"
decision = "deny"
reasoning = "no MCP"
"#,
    );
    assert_eq!(
        rule_of(&p, WRAPPED_CALL, None, &json!({})).as_deref(),
        Some("mcp")
    );
    assert_eq!(
        rule_of(&p, "protocols/MCP/initialize", None, &json!({})).as_deref(),
        Some("mcp")
    );
    assert_eq!(rule_of(&p, CALL, None, &json!({})), None);
}

#[test]
fn first_match_wins_across_exact_glob_and_any() {
    let p = policy(
        r#"
[policy]
[[policy.rule]]
name = "glob-other-tool"
hook = "steps/toolCall*"
tool = "other"
decision = "deny"
reasoning = "r"
[[policy.rule]]
name = "glob-first"
hook = "steps/toolCall*"
decision = "deny"
reasoning = "r"
[[policy.rule]]
name = "exact-second"
hook = "steps/toolCallRequest"
decision = "allow"
[[policy.rule]]
name = "any-third"
decision = "allow"
"#,
    );
    assert_eq!(
        rule_of(&p, CALL, Some("x"), &json!({})).as_deref(),
        Some("glob-first")
    );
    assert_eq!(
        rule_of(&p, CALL, Some("other"), &json!({})).as_deref(),
        Some("glob-other-tool")
    );

    let p = policy(
        r#"
[policy]
[[policy.rule]]
name = "exact-first"
hook = "steps/toolCallRequest"
tool = "t"
decision = "allow"
[[policy.rule]]
name = "any-second"
decision = "deny"
reasoning = "r"
[[policy.rule]]
name = "glob-third"
hook = "steps/*"
decision = "deny"
reasoning = "r"
"#,
    );
    assert_eq!(
        rule_of(&p, CALL, Some("t"), &json!({})).as_deref(),
        Some("exact-first")
    );
    assert_eq!(
        rule_of(&p, CALL, Some("u"), &json!({})).as_deref(),
        Some("any-second")
    );
    assert_eq!(
        rule_of(&p, CALL, None, &json!({})).as_deref(),
        Some("any-second")
    );
}

#[test]
fn tool_glob_needs_a_tool_hook() {
    let p = policy(
        r#"
[policy]
[[policy.rule]]
name = "no-shell"
tool = "run_*"
decision = "deny"
reasoning = "shell tools are blocked"
"#,
    );
    assert_eq!(
        rule_of(&p, CALL, Some("run_shell"), &json!({})).as_deref(),
        Some("no-shell")
    );
    assert_eq!(rule_of(&p, CALL, Some("read_file"), &json!({})), None);
    assert_eq!(
        rule_of(&p, "protocols/MCP/initialize", None, &json!({})),
        None
    );
}

#[test]
fn match_pointer_and_regex() {
    let p = policy(
        r#"
[policy]
[[policy.rule]]
name = "rm"
match = { pointer = "/arguments/cmd/value", regex = "rm -rf" }
decision = "deny"
reasoning = "destructive"
[[policy.rule]]
name = "big-limit"
match = { pointer = "/arguments/limit/value", regex = "^[0-9]{4,}$" }
decision = "deny"
reasoning = "too many"
"#,
    );
    let rm = json!({"arguments": {"cmd": {"value": "rm -rf /"}}});
    let ls = json!({"arguments": {"cmd": {"value": "ls"}}});
    let big = json!({"arguments": {"limit": {"value": 10000}}});
    let small = json!({"arguments": {"limit": {"value": 10}}});
    assert_eq!(rule_of(&p, CALL, Some("sh"), &rm).as_deref(), Some("rm"));
    assert_eq!(rule_of(&p, CALL, Some("sh"), &ls), None);
    assert_eq!(
        rule_of(&p, CALL, Some("q"), &big).as_deref(),
        Some("big-limit")
    );
    assert_eq!(rule_of(&p, CALL, Some("q"), &small), None);
    assert_eq!(rule_of(&p, CALL, Some("q"), &json!({})), None);
}

const REDACT: &str = r#"
[policy]
[[policy.rule]]
name = "scrub-keys"
hook = "steps/toolCallResult"
decision = "modify"
reasoning = "API keys are not shown to the model"
redact = { pointer = "/outputs", regex = "sk-[A-Za-z0-9]{16,}" }
[[policy.rule]]
name = "fallback"
hook = "steps/toolCallResult"
decision = "allow"
reasoning = "clean"
"#;

#[test]
fn redact_emits_leaf_pointers() {
    let p = policy(REDACT);
    let payload = json!({"outputs": [
        {"value": "ok"},
        {"value": "key=sk-ABCDEFGHIJKLMNOPQR"},
        {"value": {"a/b": {"c~d": "sk-0123456789abcdefXYZ"}}}
    ]});
    let d = decide(&p, "steps/toolCallResult", Some("t"), &payload);
    assert_eq!(d.decision, Disposition::Modify);
    let m = d.modifications.expect("modifications");
    assert_eq!(
        m.redactions,
        [
            Redaction {
                path: "/outputs/1/value".into(),
                replacement: "key=[REDACTED]".into()
            },
            Redaction {
                path: "/outputs/2/value/a~1b/c~0d".into(),
                replacement: "[REDACTED]".into()
            },
        ]
    );
    assert!(m.parameter_overrides.is_empty() && m.modified_content.is_none());
}

#[test]
fn redact_falls_through_when_nothing_matches() {
    let p = policy(REDACT);
    let clean = json!({"outputs": [{"value": "sk-short"}]});
    assert_eq!(
        rule_of(&p, "steps/toolCallResult", Some("t"), &clean).as_deref(),
        Some("fallback")
    );
}

#[test]
fn set_produces_overrides() {
    let p = policy(
        r#"
[policy]
[[policy.rule]]
name = "cap"
tool = "search"
decision = "modify"
reasoning = "cap result size"
set = { limit = 10, opts = { safe = true } }
"#,
    );
    let d = decide(&p, CALL, Some("search"), &json!({}));
    let m = d.modifications.expect("modifications");
    assert_eq!(
        Value::Object(m.parameter_overrides),
        json!({"limit": 10, "opts": {"safe": true}})
    );
    assert!(m.redactions.is_empty());
}

#[test]
fn set_wins_over_an_overlapping_redaction() {
    let p = policy(
        r#"
[policy]
[[policy.rule]]
name = "both"
decision = "modify"
reasoning = "r"
redact = { pointer = "/params/arguments", regex = "secret" }
set = { token = "xxx" }
"#,
    );
    let payload = json!({"params": {"arguments": {"token": "secret", "note": "secret too"}}});
    let d = decide(&p, WRAPPED_CALL, Some("t"), &payload);
    let m = d.modifications.expect("modifications");
    let paths: Vec<_> = m.redactions.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(paths, ["/params/arguments/note"]);
    // With nothing to redact the override still applies.
    let clean = json!({"params": {"arguments": {}}});
    assert_eq!(
        decide(&p, WRAPPED_CALL, Some("t"), &clean).decision,
        Disposition::Modify
    );
}

#[test]
fn ask_details_defaults_and_overrides() {
    let p = policy(
        r#"
[policy]
[[policy.rule]]
name = "plain"
tool = "a"
decision = "ask"
reasoning = "confirm a"
[[policy.rule]]
name = "tuned"
tool = "b"
decision = "ask"
reasoning = "confirm b"
ask = { question = "Run b?", timeout_seconds = 30, timeout_disposition = "allow" }
"#,
    );
    let plain = decide(&p, CALL, Some("a"), &json!({}))
        .ask_details
        .expect("ask");
    assert_eq!(plain.question.as_deref(), Some("confirm a"));
    assert_eq!(plain.timeout_seconds, Some(120));
    assert_eq!(plain.timeout_disposition, Some(Disposition::Deny));
    let tuned = decide(&p, CALL, Some("b"), &json!({}))
        .ask_details
        .expect("ask");
    assert_eq!(tuned.question.as_deref(), Some("Run b?"));
    assert_eq!(tuned.timeout_seconds, Some(30));
    assert_eq!(tuned.timeout_disposition, Some(Disposition::Allow));
}

#[test]
fn defer_details_defaults_and_overrides() {
    let p = policy(
        r#"
[policy]
[[policy.rule]]
name = "plain"
tool = "a"
decision = "defer"
reasoning = "wait"
[[policy.rule]]
name = "tuned"
tool = "b"
decision = "defer"
reasoning = "wait"
defer = { timeout_ms = 1000, timeout_decision = "allow" }
"#,
    );
    let plain = decide(&p, CALL, Some("a"), &json!({}))
        .defer_details
        .expect("defer");
    assert_eq!(plain.reason.as_deref(), Some("pending_dependency"));
    assert_eq!(plain.resolution_timeout_ms, Some(5000));
    assert_eq!(plain.timeout_decision, Some(Disposition::Deny));
    let tuned = decide(&p, CALL, Some("b"), &json!({}))
        .defer_details
        .expect("defer");
    assert_eq!(tuned.resolution_timeout_ms, Some(1000));
    assert_eq!(tuned.timeout_decision, Some(Disposition::Allow));
}

/// 1,000 rules spread over exact hooks, exact tools, globs and `*`.
fn thousand_rules() -> String {
    let mut text = String::from("[policy]\n");
    for i in 0..1000 {
        let selector = match i % 4 {
            0 => format!("hook = \"protocols/MCP/method-{i}\""),
            1 => format!("hook = \"steps/toolCallRequest\"\ntool = \"tool-{i}\""),
            2 => format!("hook = \"protocols/MCP/glob-{i}/*\""),
            _ => format!("match = {{ pointer = \"/marker\", regex = \"^m{i}$\" }}"),
        };
        text.push_str(&format!(
            "[[policy.rule]]\nname = \"r{i}\"\n{selector}\ndecision = \"deny\"\nreasoning = \"r{i}\"\n"
        ));
    }
    text
}

#[test]
fn thousand_rule_policy_picks_the_right_rule() {
    let p = policy(&thousand_rules());
    assert_eq!(p.rule_count(), 1000);
    let none = json!({});
    let cases = [
        ("protocols/MCP/method-996", None, &none, Some("r996")),
        (CALL, Some("tool-997"), &none, Some("r997")),
        (CALL, Some("tool-1"), &none, Some("r1")),
        ("protocols/MCP/glob-998/x/y", None, &none, Some("r998")),
        (CALL, Some("tool-unknown"), &none, None),
        ("protocols/MCP/method-997", None, &none, None),
    ];
    for (method, tool, payload, want) in cases {
        assert_eq!(
            rule_of(&p, method, tool, payload).as_deref(),
            want,
            "{method} {tool:?}"
        );
    }
    let marked = json!({"marker": "m999"});
    assert_eq!(
        rule_of(&p, CALL, Some("tool-997"), &marked).as_deref(),
        Some("r997")
    );
    assert_eq!(
        rule_of(&p, CALL, Some("tool-x"), &marked).as_deref(),
        Some("r999")
    );
}
