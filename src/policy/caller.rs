//! `user`, `role` and `tenant`: rules keyed on who is calling.
//!
//! The caller is the [`Identity`] the downstream side authenticated (an
//! OAuth subject, a named token, a certificate, the OS user). A rule that
//! names any of these keys is about a known caller, so it never matches a
//! hook that carries no identity (or no tenant, for `tenant`): an
//! unauthenticated caller cannot fall into a rule written for someone.

use super::error::RuleProblem;
use super::pattern::NamePattern;
use super::spec::RuleSpec;
use crate::hooks::Identity;

/// The caller globs of one rule; `None` when the rule names none.
#[derive(Debug, Clone)]
pub(crate) struct CallerMatch {
    user: Option<NamePattern>,
    role: Option<NamePattern>,
    tenant: Option<NamePattern>,
}

impl CallerMatch {
    /// Compiles the rule's `user`, `role` and `tenant` globs, or `None`
    /// when it has none, so rules about any caller pay nothing.
    pub(crate) fn compile(spec: &RuleSpec) -> Result<Option<Self>, RuleProblem> {
        let compile = |text: &Option<String>, field| {
            text.as_deref()
                .map(|text| NamePattern::compile(text, field))
                .transpose()
        };
        let caller = Self {
            user: compile(&spec.user, "user")?,
            role: compile(&spec.role, "role")?,
            tenant: compile(&spec.tenant, "tenant")?,
        };
        let names_any = caller.user.is_some() || caller.role.is_some() || caller.tenant.is_some();
        Ok(names_any.then_some(caller))
    }

    /// Whether `caller` fits every glob the rule names; `role` fits when
    /// any of the caller's roles does.
    pub(crate) fn matches(&self, caller: Option<&Identity>) -> bool {
        let Some(caller) = caller else {
            return false;
        };
        self.user
            .as_ref()
            .is_none_or(|user| user.matches(&caller.user_id))
            && self
                .role
                .as_ref()
                .is_none_or(|role| caller.roles.iter().any(|name| role.matches(name)))
            && self.tenant.as_ref().is_none_or(|tenant| {
                caller
                    .tenant
                    .as_deref()
                    .is_some_and(|name| tenant.matches(name))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::IdentityDescriptor;

    fn spec(user: Option<&str>, role: Option<&str>, tenant: Option<&str>) -> RuleSpec {
        let text = "name = \"r\"\ndecision = \"allow\"\n";
        let mut spec: RuleSpec = toml::from_str(text).expect("valid rule");
        spec.user = user.map(str::to_owned);
        spec.role = role.map(str::to_owned);
        spec.tenant = tenant.map(str::to_owned);
        spec
    }

    fn caller(user: &str, roles: &[&str], tenant: Option<&str>) -> Identity {
        Identity {
            user_id: user.into(),
            roles: roles.iter().map(|r| (*r).to_owned()).collect(),
            tenant: tenant.map(str::to_owned),
            descriptor: IdentityDescriptor::Configured,
        }
    }

    fn compiled(user: Option<&str>, role: Option<&str>, tenant: Option<&str>) -> CallerMatch {
        CallerMatch::compile(&spec(user, role, tenant))
            .expect("valid globs")
            .expect("names a caller key")
    }

    #[test]
    fn a_rule_without_caller_keys_compiles_to_nothing() {
        assert!(CallerMatch::compile(&spec(None, None, None))
            .expect("valid")
            .is_none());
    }

    #[test]
    fn user_glob_matches_the_user_id() {
        let rule = compiled(Some("svc-*"), None, None);
        assert!(rule.matches(Some(&caller("svc-build", &[], None))));
        assert!(!rule.matches(Some(&caller("alice", &[], None))));
    }

    #[test]
    fn role_matches_when_any_role_does() {
        let rule = compiled(None, Some("ops-{admin,oncall}"), None);
        assert!(rule.matches(Some(&caller("a", &["dev", "ops-oncall"], None))));
        assert!(!rule.matches(Some(&caller("a", &["dev"], None))));
        assert!(!rule.matches(Some(&caller("a", &[], None))));
    }

    #[test]
    fn tenant_needs_a_tenant() {
        let rule = compiled(None, None, Some("acme"));
        assert!(rule.matches(Some(&caller("a", &[], Some("acme")))));
        assert!(!rule.matches(Some(&caller("a", &[], Some("other")))));
        assert!(!rule.matches(Some(&caller("a", &[], None))));
    }

    #[test]
    fn every_named_key_must_fit() {
        let rule = compiled(Some("alice"), Some("admin"), None);
        assert!(rule.matches(Some(&caller("alice", &["admin"], None))));
        assert!(!rule.matches(Some(&caller("alice", &["dev"], None))));
        assert!(!rule.matches(Some(&caller("bob", &["admin"], None))));
    }

    #[test]
    fn no_identity_never_matches() {
        assert!(!compiled(Some("*"), None, None).matches(None));
        assert!(!compiled(None, Some("*"), None).matches(None));
    }

    #[test]
    fn bad_glob_names_its_key() {
        let err = CallerMatch::compile(&spec(None, Some("ops-["), None)).expect_err("bad glob");
        assert!(
            err.to_string().starts_with("invalid glob in role:"),
            "{err}"
        );
    }
}
