use std::sync::Arc;

use serde_json::json;
use uuid::Uuid;

use super::*;
use crate::guardian::Disposition;
use crate::policy::rego::{RegoSettings, DEFAULT_QUERY};
use crate::policy::{RegoPolicy, Verdict};

fn rego_engine(dir: &std::path::Path, rego: &str) -> PolicyEngine {
    std::fs::write(dir.join("p.rego"), rego).unwrap();
    let policy = RegoPolicy::load(&RegoSettings {
        base: dir.to_owned(),
        patterns: vec!["p.rego".into()],
        data: Vec::new(),
        query: DEFAULT_QUERY.into(),
        default: Verdict::Deny,
        policy_id: "pid".into(),
        with_tests: false,
    })
    .unwrap();
    PolicyEngine::Rego {
        policy: Arc::new(policy),
        mode: crate::policy::Mode::Enforce,
    }
}

fn metadata() -> Metadata {
    Metadata {
        agent_id: "a".into(),
        session_id: Uuid::nil(),
        environment: None,
        user: None,
    }
}

fn hook(tool: &str) -> HookRequest {
    HookRequest::new(
        "steps/toolCallRequest",
        json!({"tool": {"name": tool}}),
        Some(tool.into()),
    )
}

const POLICY: &str = r#"
package acs
import rego.v1
tool := input.params.payload.tool.name
decision := {"decision": "allow"} if tool == "ok"
decision := {"decision": "deny"} if tool == "no-reasoning"
decision := {"decision": "modify", "reasoning": "r"} if tool == "no-modifications"
decision := "allow" if tool == "not-an-object"
decision := {"decision": "deny", "reasoning": "named", "policy_references": [{"rule_id": "r1"}]} if tool == "named"
"#;

#[test]
fn rego_answers_are_checked_like_a_remote_guardians() {
    let dir = tempfile::tempdir().unwrap();
    let engine = rego_engine(dir.path(), POLICY);
    let decide = |tool| engine.decide(&hook(tool), &metadata(), None);
    let allow = decide("ok").unwrap();
    assert_eq!(allow.decision, Disposition::Allow);
    assert_eq!(allow.policy_references[0].policy_id.as_deref(), Some("pid"));
    for bad in ["no-reasoning", "no-modifications", "not-an-object"] {
        let err = decide(bad).unwrap_err();
        assert!(matches!(err, GuardianError::Malformed(_)), "{bad}: {err}");
    }
    let undefined = decide("other").unwrap();
    assert_eq!(undefined.decision, Disposition::Deny, "the policy default");
    let explained = engine.explain(&hook("named"), &metadata(), None);
    assert_eq!(explained.decided_by, "data.acs.decision (rule \"r1\")");
    let explained = engine.explain(&hook("other"), &metadata(), None);
    assert!(
        explained.decided_by.contains("default"),
        "{}",
        explained.decided_by
    );
}

#[test]
fn only_the_rego_engine_wants_context_and_its_posture_is_configured() {
    let rules = EmbeddedGuardian::new(Arc::new(
        crate::policy::Policy::from_toml_str("p.toml", "").unwrap(),
    ));
    assert!(!rules.wants_context());
    let dir = tempfile::tempdir().unwrap();
    let rego = EmbeddedGuardian::with_engine(rego_engine(dir.path(), POLICY), FailurePosture::Deny);
    assert!(rego.wants_context());
    let negotiated = futures_util::FutureExt::now_or_never(rego.hello(&metadata(), None))
        .unwrap()
        .unwrap();
    assert_eq!(negotiated.on_decision_failure, FailurePosture::Deny);
}

#[test]
fn rules_select_a_virtual_servers_tool_by_either_name() {
    let rules = r#"
[[policy.rule]]
name = "by-own-name"
hook = "steps/toolCallRequest"
tool = "get-env"
decision = "deny"
reasoning = "own"

[[policy.rule]]
name = "by-agent-name"
hook = "steps/toolCallRequest"
tool = "demo__*"
decision = "deny"
reasoning = "agent"
"#;
    let policy = crate::policy::Policy::from_toml_str("p.toml", rules).unwrap();
    let engine = PolicyEngine::Rules(Arc::new(policy));
    let decide = |hook: HookRequest| engine.decide(&hook, &metadata(), None).unwrap();
    // The server's own name is consulted first.
    let both = hook("get-env").with_called_as(Some("demo__get-env".into()));
    assert_eq!(decide(both).reasoning.as_deref(), Some("own"));
    let agent = hook("lookup-user").with_called_as(Some("demo__lookup-user".into()));
    assert_eq!(decide(agent).reasoning.as_deref(), Some("agent"));
    let neither = hook("lookup-user").with_called_as(Some("files__lookup-user".into()));
    assert_eq!(decide(neither).decision, Disposition::Allow);
    assert_eq!(decide(hook("lookup-user")).decision, Disposition::Allow);
}
