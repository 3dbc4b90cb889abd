//! Rules keyed on the caller: `user`, `role`, `tenant`.

use super::*;
use crate::hooks::decision::Disposition;
use crate::hooks::{HookPayload, Identity, IdentityDescriptor};
use serde_json::json;

const CALL: &str = "steps/toolCallRequest";

const ROLE_POLICY: &str = r#"
[policy]
default = "deny"

[[policy.rule]]
name = "ops-may-restart"
tool = "restart"
role = "ops-*"
decision = "allow"

[[policy.rule]]
name = "alice-in-acme"
user = "alice"
tenant = "acme"
decision = "allow"
"#;

fn caller(user: &str, roles: &[&str], tenant: Option<&str>) -> Identity {
    Identity {
        user_id: user.into(),
        roles: roles.iter().map(|r| (*r).to_owned()).collect(),
        tenant: tenant.map(str::to_owned),
        descriptor: IdentityDescriptor::Configured,
    }
}

fn decide(policy: &Policy, tool: &str, user: Option<&Identity>) -> (Disposition, Option<String>) {
    let payload = HookPayload::from(json!({}));
    let view = HookView::new(CALL, Some(tool), &payload).with_user(user);
    let rule = policy.matching_rule(&view).map(str::to_owned);
    (policy.evaluate(&view).decision, rule)
}

fn policy() -> Policy {
    Policy::from_toml_str("proxy.toml", ROLE_POLICY).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_role_rule_allows_one_caller_and_not_another() {
    let policy = policy();
    let ops = caller("carol", &["dev", "ops-oncall"], None);
    let dev = caller("dave", &["dev"], None);
    assert_eq!(
        decide(&policy, "restart", Some(&ops)),
        (Disposition::Allow, Some("ops-may-restart".into()))
    );
    assert_eq!(decide(&policy, "restart", Some(&dev)).0, Disposition::Deny);
}

#[test]
fn caller_rules_never_match_without_an_identity() {
    let policy = policy();
    assert_eq!(decide(&policy, "restart", None), (Disposition::Deny, None));
}

#[test]
fn user_and_tenant_must_both_fit() {
    let policy = policy();
    let in_acme = caller("alice", &[], Some("acme"));
    let elsewhere = caller("alice", &[], Some("beta"));
    let no_tenant = caller("alice", &[], None);
    assert_eq!(decide(&policy, "x", Some(&in_acme)).0, Disposition::Allow);
    assert_eq!(decide(&policy, "x", Some(&elsewhere)).0, Disposition::Deny);
    assert_eq!(decide(&policy, "x", Some(&no_tenant)).0, Disposition::Deny);
}

#[test]
fn bad_caller_glob_is_located() {
    let text = "[policy]\n[[policy.rule]]\nname = \"g\"\nuser = \"a[\"\ndecision = \"allow\"\n";
    let err = Policy::from_toml_str("proxy.toml", text).expect_err("bad glob");
    assert!(
        err.to_string()
            .starts_with("proxy.toml:2: rule \"g\": invalid glob in user: "),
        "{err}"
    );
}
