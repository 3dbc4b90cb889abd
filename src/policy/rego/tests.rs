use std::path::Path;
use std::sync::Arc;

use serde_json::json;
use uuid::Uuid;

use super::*;
use crate::hooks::{GatewayContext, HookRequest, Identity, IdentityDescriptor, Metadata};
use crate::policy::spec::Verdict;

fn policy_in(dir: &Path, files: &[(&str, &str)]) -> Result<RegoPolicy, RegoError> {
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let settings = RegoSettings {
        base: dir.to_owned(),
        patterns: vec!["*.rego".into()],
        data: files
            .iter()
            .filter(|(name, _)| name.starts_with("data."))
            .map(|(name, _)| dir.join(name))
            .collect(),
        query: DEFAULT_QUERY.into(),
        default: Verdict::Deny,
        policy_id: "test".into(),
        with_tests: false,
    };
    RegoPolicy::load(&settings)
}

fn metadata(roles: &[&str]) -> Metadata {
    Metadata {
        agent_id: "agent".into(),
        session_id: Uuid::nil(),
        environment: Some("production".into()),
        user: Some(Arc::new(Identity {
            user_id: "alice".into(),
            roles: roles.iter().map(|r| (*r).to_owned()).collect(),
            tenant: None,
            descriptor: IdentityDescriptor::Configured,
        })),
    }
}

fn call(tool: &str) -> HookRequest {
    HookRequest::new(
        "steps/toolCallRequest",
        json!({"tool": {"name": tool}, "arguments": {}}),
        Some(tool.into()),
    )
}

const BY_ROLE: &str = r#"
package acs
decision := {"decision": "allow"} if "admin" in input.params.metadata.user_context.roles
decision := {"decision": "deny", "reasoning": "not an admin"} if {
    not "admin" in input.params.metadata.user_context.roles
    input.method == "steps/toolCallRequest"
}
"#;

#[test]
fn sees_the_envelope_and_answers_by_role() {
    let dir = tempfile::tempdir().unwrap();
    let policy = policy_in(dir.path(), &[("p.rego", BY_ROLE)]).unwrap();
    let allow = policy
        .evaluate(&call("echo"), &metadata(&["admin"]), None)
        .unwrap();
    assert_eq!(allow, Some(json!({"decision": "allow"})));
    let deny = policy
        .evaluate(&call("echo"), &metadata(&["dev"]), None)
        .unwrap();
    assert_eq!(deny.unwrap()["decision"], "deny");
    let other = HookRequest::new("steps/sessionStart", json!({}), None);
    assert_eq!(
        policy.evaluate(&other, &metadata(&["dev"]), None).unwrap(),
        None
    );
    assert_eq!(
        policy.default_decision().decision,
        crate::hooks::decision::Disposition::Deny
    );
}

#[test]
fn context_and_data_reach_the_policy() {
    let dir = tempfile::tempdir().unwrap();
    let rego = r#"
package acs
decision := {"decision": "deny", "reasoning": "destructive"} if input.context.tool.annotations.destructiveHint
decision := {"decision": "allow"} if input.context.route in data.routes
"#;
    let policy = policy_in(
        dir.path(),
        &[("p.rego", rego), ("data.json", r#"{"routes": ["fs"]}"#)],
    )
    .unwrap();
    let mut context = GatewayContext {
        route: "fs".into(),
        transport: "stdio".into(),
        ..GatewayContext::default()
    };
    let answer = policy
        .evaluate(&call("ls"), &metadata(&[]), Some(&context))
        .unwrap();
    assert_eq!(answer, Some(json!({"decision": "allow"})));
    context.route = "other".into();
    context.tool = Some(Arc::new(json!({"annotations": {"destructiveHint": true}})));
    let answer = policy
        .evaluate(&call("rm"), &metadata(&[]), Some(&context))
        .unwrap();
    assert_eq!(answer.unwrap()["reasoning"], "destructive");
}

#[test]
fn a_runtime_error_is_an_evaluation_error() {
    let dir = tempfile::tempdir().unwrap();
    let rego = r#"
package acs
decision := x if {
    input.method == "steps/toolCallRequest"
    x := {"decision": "allow"}
}
decision := y if {
    input.method == "steps/toolCallRequest"
    y := {"decision": "deny", "reasoning": "conflict"}
}
"#;
    let policy = policy_in(dir.path(), &[("p.rego", rego)]).unwrap();
    let err = policy
        .evaluate(&call("echo"), &metadata(&[]), None)
        .unwrap_err();
    assert!(matches!(err, RegoError::Evaluation(_)), "{err}");
}

#[test]
fn a_policy_that_runs_past_its_time_limit_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let rego = r#"
package acs
import rego.v1
decision := {"decision": "allow"} if {
    input.method == "steps/toolCallRequest"
    count([x | some i in numbers.range(1, 5000); some j in numbers.range(1, 5000); x := i * j]) > 0
}
"#;
    let policy = policy_in(dir.path(), &[("p.rego", rego)]).unwrap();
    for policy in [policy.clone(), policy.interpreted()] {
        let started = std::time::Instant::now();
        let err = policy
            .evaluate(&call("echo"), &metadata(&[]), None)
            .unwrap_err();
        assert!(err.to_string().contains("time limit"), "{err}");
        assert!(started.elapsed() < EVALUATION_TIME_LIMIT * 20);
    }
}

#[test]
fn compile_errors_name_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let err = policy_in(
        dir.path(),
        &[("bad.rego", "package acs\n\ndecision := {\"decision\": \n")],
    )
    .unwrap_err();
    let message = err.to_string();
    let first = message.lines().next().unwrap();
    assert!(
        first.ends_with("bad.rego:4:1: expecting expression"),
        "{message}"
    );
    let err = policy_in(
        dir.path(),
        &[("bad.rego", "package acs\n\ndecision := x if { y == 1 }\n")],
    )
    .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("bad.rego:3:20: use of undefined variable `y` is unsafe\n"),
        "{message}"
    );
    assert!(message.contains("decision := x if { y == 1 }"), "{message}");
}

#[test]
fn a_query_that_names_no_rule_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("p.rego"), "package other\nx := 1\n").unwrap();
    let settings = RegoSettings {
        base: dir.path().to_owned(),
        patterns: vec!["*.rego".into()],
        data: Vec::new(),
        query: "data.acs.decision".into(),
        default: Verdict::Allow,
        policy_id: "t".into(),
        with_tests: false,
    };
    let err = RegoPolicy::load(&settings).unwrap_err();
    assert!(matches!(err, RegoError::Query { .. }), "{err}");
}

#[test]
fn tests_are_found_and_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("p.rego"), BY_ROLE).unwrap();
    std::fs::write(
        dir.path().join("p_test.rego"),
        r#"package acs_test
import data.acs
test_admin_allowed if {
    acs.decision.decision == "allow" with input as {"method": "x", "params": {"metadata": {"user_context": {"roles": ["admin"]}}}}
}
test_wrong if { 1 == 2 }
"#,
    )
    .unwrap();
    let policy = RegoPolicy::load(&RegoSettings::for_directory(dir.path()).unwrap()).unwrap();
    let outcomes: Vec<(String, TestOutcome)> = policy
        .tests()
        .iter()
        .map(|test| (test.name.clone(), policy.run_test(test)))
        .collect();
    assert_eq!(
        outcomes[0],
        ("test_admin_allowed".into(), TestOutcome::Pass)
    );
    assert_eq!(outcomes[1].0, "test_wrong");
    assert!(matches!(outcomes[1].1, TestOutcome::Fail(_)));
}

#[test]
fn the_policy_is_shared_across_threads() {
    fn shareable<T: Send + Sync>() {}
    shareable::<RegoPolicy>();
}

#[test]
fn the_example_library_runs_on_the_vm_and_agrees_with_the_interpreter() {
    let library = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/policies");
    let mut settings = RegoSettings::for_directory(&library).unwrap();
    settings.with_tests = false;
    settings.patterns = vec!["*.rego".into()];
    let policy = RegoPolicy::load(&settings).unwrap();
    assert!(policy.runs_on_vm());
    assert!(policy.vm_tells_undefined_apart());
    let interpreted = policy.clone().interpreted();
    let listing = HookRequest::new("protocols/MCP/tools/list", json!({}), None);
    assert_eq!(
        policy.evaluate(&listing, &metadata(&[]), None).unwrap(),
        None
    );
    for roles in [&["viewer"][..], &["developer"], &[]] {
        for tool in ["echo", "get-env", "write_file", "run_command"] {
            let on_vm = policy.evaluate(&call(tool), &metadata(roles), None);
            let walked = interpreted.evaluate(&call(tool), &metadata(roles), None);
            assert_eq!(
                on_vm.map_err(|e| e.to_string()),
                walked.map_err(|e| e.to_string()),
                "{tool} for {roles:?}"
            );
        }
    }
}
