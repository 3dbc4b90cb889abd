//! `mode = "monitor"`, per rule and for the whole policy.

use super::*;
use crate::hooks::decision::Disposition;
use crate::hooks::HookPayload;
use serde_json::json;

const CALL: &str = "steps/toolCallRequest";

fn evaluate(text: &str, tool: &str) -> Decision {
    let policy = Policy::from_toml_str("proxy.toml", text).unwrap_or_else(|e| panic!("{e}"));
    let payload = HookPayload::from(json!({}));
    policy.evaluate(&HookView::new(CALL, Some(tool), &payload))
}

fn rule_of(decision: &Decision) -> Option<&str> {
    decision
        .policy_references
        .first()
        .and_then(|r| r.rule_id.as_deref())
}

const TRIAL: &str = r#"
[policy]
[[policy.rule]]
name = "trial-deny"
tool = "echo"
mode = "monitor"
decision = "deny"
reasoning = "trying it out"

[[policy.rule]]
name = "no-env"
tool = "get-env"
decision = "deny"
reasoning = "leaks"

[[policy.rule]]
name = "trial-everything"
mode = "monitor"
decision = "deny"
reasoning = "would block all"
"#;

#[test]
fn a_monitored_rule_is_recorded_and_evaluation_goes_on() {
    let decision = evaluate(TRIAL, "echo");
    assert_eq!(decision.decision, Disposition::Allow);
    let monitored = decision.monitored.as_deref().expect("recorded");
    assert_eq!(monitored.decision, Disposition::Deny);
    assert_eq!(rule_of(monitored), Some("trial-deny"));
    assert_eq!(monitored.reasoning.as_deref(), Some("trying it out"));
}

#[test]
fn a_monitored_rule_never_weakens_an_enforced_one() {
    let text = TRIAL.replace("tool = \"echo\"", "tool = \"get-env\"");
    let decision = evaluate(&text, "get-env");
    assert_eq!(decision.decision, Disposition::Deny);
    assert_eq!(rule_of(&decision), Some("no-env"));
    assert_eq!(
        decision.monitored.as_deref().and_then(rule_of),
        Some("trial-deny")
    );
}

#[test]
fn an_enforced_rule_first_leaves_nothing_monitored() {
    let decision = evaluate(TRIAL, "get-env");
    assert_eq!(rule_of(&decision), Some("no-env"));
    assert!(decision.monitored.is_none());
}

#[test]
fn a_policy_in_monitor_mode_allows_everything_and_records_it() {
    let text = "[policy]\nmode = \"monitor\"\n[[policy.rule]]\nname = \"no-env\"\n\
                tool = \"get-env\"\ndecision = \"deny\"\nreasoning = \"leaks\"\n";
    let decision = evaluate(text, "get-env");
    assert_eq!(decision.decision, Disposition::Allow);
    assert_eq!(
        decision.monitored.as_deref().and_then(rule_of),
        Some("no-env")
    );
    let default_deny = "[policy]\nmode = \"monitor\"\ndefault = \"deny\"\n";
    let decision = evaluate(default_deny, "anything");
    assert_eq!(decision.decision, Disposition::Allow);
    assert_eq!(
        decision.monitored.as_deref().map(|d| d.decision),
        Some(Disposition::Deny)
    );
    assert!(evaluate("[policy]\nmode = \"monitor\"\n", "x")
        .monitored
        .is_none());
}

#[test]
fn an_unknown_mode_is_rejected() {
    let text = "[policy]\nmode = \"audit\"\n";
    assert!(Policy::from_toml_str("proxy.toml", text).is_err());
}

#[test]
fn a_tool_named_two_ways_is_decided_by_the_server_name_first_then_the_agents() {
    let policy = Policy::from_toml_str("proxy.toml", TRIAL).unwrap_or_else(|e| panic!("{e}"));
    let payload = HookPayload::from(json!({}));
    let own = |tool| HookView::new(CALL, Some(tool), &payload);
    // The agent's name is denied; the server's own name matches nothing enforced.
    let decision = policy.evaluate_either(&own("lookup"), Some(&own("get-env")));
    assert_eq!(rule_of(&decision), Some("no-env"));
    // The server's own name decides before the agent's.
    let decision = policy.evaluate_either(&own("get-env"), Some(&own("echo")));
    assert_eq!(rule_of(&decision), Some("no-env"));
    // Neither enforces: the default, with the server name's monitored rule.
    let decision = policy.evaluate_either(&own("echo"), Some(&own("lookup")));
    assert_eq!(decision.decision, Disposition::Allow);
    assert_eq!(
        decision.monitored.as_deref().and_then(rule_of),
        Some("trial-deny")
    );
}

/// What a tool named two ways was decided by before the second pass
/// skipped the rules that name no tool: both names in full.
fn decided_in_full(policy: &Policy, own: &HookView<'_>, called: &HookView<'_>) -> Decision {
    if policy.matching_rule(own).is_none() && policy.matching_rule(called).is_some() {
        policy.evaluate(called)
    } else {
        policy.evaluate(own)
    }
}

#[test]
fn the_second_name_is_decided_as_if_every_rule_were_looked_at_again() {
    let text = r#"
[policy]
[[policy.rule]]
name = "watch-bad"
mode = "monitor"
match = { pointer = "/arguments/x", regex = "bad" }
decision = "deny"
reasoning = "r"
[[policy.rule]]
name = "watch-echo"
mode = "monitor"
tool = "echo"
decision = "deny"
reasoning = "r"
[[policy.rule]]
name = "deny-b-worse"
tool = "b__*"
match = { pointer = "/arguments/x", regex = "worse" }
decision = "deny"
reasoning = "r"
[[policy.rule]]
name = "watch-all"
mode = "monitor"
decision = "deny"
reasoning = "r"
[[policy.rule]]
name = "no-env"
tool = "get-env"
decision = "deny"
reasoning = "r"
[[policy.rule]]
name = "deny-worst"
tool = "*"
match = { pointer = "/arguments/x", regex = "worst" }
decision = "deny"
reasoning = "r"
"#;
    let policy = Policy::from_toml_str("proxy.toml", text).unwrap_or_else(|e| panic!("{e}"));
    for argument in ["ok", "bad", "worse", "worst", "bad worse"] {
        let payload = HookPayload::from(json!({"arguments": {"x": argument}}));
        let view = |tool| HookView::new(CALL, Some(tool), &payload);
        for own in ["echo", "get-env", "lookup"] {
            for called in ["b__echo", "b__get-env", "c__lookup", "get-env", "echo"] {
                let (own, called) = (view(own), view(called));
                let fast = policy.evaluate_either(&own, Some(&called));
                let full = decided_in_full(&policy, &own, &called);
                let case = format!("{argument} {:?} {:?}", own.tool, called.tool);
                assert_eq!(fast.decision, full.decision, "{case}");
                assert_eq!(rule_of(&fast), rule_of(&full), "{case}");
                assert_eq!(
                    fast.monitored.as_deref().and_then(rule_of),
                    full.monitored.as_deref().and_then(rule_of),
                    "{case}"
                );
            }
        }
    }
}
