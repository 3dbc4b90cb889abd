//! Which tools a policy denies a caller outright: calling the tool is
//! denied whatever the call's arguments. `[integrity] hide_denied_tools`
//! takes those out of the `tools/list` the agent gets, so the model is not
//! offered what it cannot use.

use std::sync::LazyLock;

use serde_json::Value;

use super::engine::Policy;
use super::hook::HookView;
use super::spec::Mode;
use crate::hooks::decision::Disposition;
use crate::hooks::{HookPayload, Identity};

/// The payload of the hooks a listing is checked against: none, so only
/// rules that look at no payload can decide.
static NO_PAYLOAD: LazyLock<HookPayload> = LazyLock::new(|| HookPayload::from(Value::Null));

impl Policy {
    /// Whether every call of `tool` by `user` is denied at hook `method`,
    /// whatever its arguments: the first rule that could apply selects
    /// only by hook, tool and caller (no `match`, no redaction that may
    /// decline) and denies, or no rule could apply and the default denies.
    ///
    /// A rule that looks at the arguments before that makes the answer
    /// "not outright". Rules in monitor mode are passed over (they enforce
    /// nothing), and a policy in monitor mode denies nothing outright.
    pub fn denies_outright(&self, method: &str, tool: &str, user: Option<&Identity>) -> bool {
        self.denies_outright_as(method, tool, None, user)
    }

    /// As [`Self::denies_outright`], for a tool of a virtual server that the
    /// agent knows as `called_as`: rules naming the server's own name are
    /// consulted first, then those naming the agent's, as for a call.
    pub fn denies_outright_as(
        &self,
        method: &str,
        tool: &str,
        called_as: Option<&str>,
        user: Option<&Identity>,
    ) -> bool {
        if self.mode() == Mode::Monitor {
            return false;
        }
        for name in std::iter::once(tool).chain(called_as) {
            if let Some(outright) = self.first_rule_denies(method, name, user) {
                return outright;
            }
        }
        self.default_disposition() == Disposition::Deny
    }

    /// Whether the first enforcing rule that could apply to `tool` denies
    /// it outright; `None` when no rule could apply.
    fn first_rule_denies(&self, method: &str, tool: &str, user: Option<&Identity>) -> Option<bool> {
        let hook = HookView::new(method, Some(tool), &NO_PAYLOAD).with_user(user);
        let rule = self
            .candidate_rules(&hook)
            .into_iter()
            .find(|rule| rule.mode() != Mode::Monitor && rule.selects(&hook))?;
        Some(rule.is_unconditional() && rule.disposition() == Disposition::Deny)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::IdentityDescriptor;

    fn policy(text: &str) -> Policy {
        Policy::from_toml_str("t.toml", text).expect("a valid policy")
    }

    fn viewer() -> Identity {
        Identity {
            user_id: "bob".into(),
            roles: vec!["viewer".into()],
            tenant: None,
            descriptor: IdentityDescriptor::Configured,
        }
    }

    const STEP: &str = "steps/toolCallRequest";

    #[test]
    fn a_deny_by_tool_and_role_is_outright() {
        let policy = policy(
            "[policy]\n[[policy.rule]]\nname = \"no-env\"\ntool = \"get-env\"\nrole = \"viewer\"\ndecision = \"deny\"\nreasoning = \"x\"\n",
        );
        assert!(policy.denies_outright(STEP, "get-env", Some(&viewer())));
        assert!(!policy.denies_outright(STEP, "echo", Some(&viewer())));
        assert!(
            !policy.denies_outright(STEP, "get-env", None),
            "no caller, no role"
        );
    }

    #[test]
    fn a_rule_on_the_arguments_first_is_not_outright() {
        let policy = policy(
            "[policy]\n[[policy.rule]]\nname = \"safe-path\"\ntool = \"read\"\nmatch = { pointer = \"/arguments/path\", regex = \"^/tmp\" }\ndecision = \"allow\"\n\
             [[policy.rule]]\nname = \"no-read\"\ntool = \"read\"\ndecision = \"deny\"\nreasoning = \"x\"\n",
        );
        assert!(!policy.denies_outright(STEP, "read", None));
    }

    #[test]
    fn the_agents_name_is_read_after_the_servers_own() {
        let policy = policy(
            "[policy]\n[[policy.rule]]\nname = \"demo-env\"\ntool = \"demo__get-env\"\ndecision = \"deny\"\nreasoning = \"x\"\n\
             [[policy.rule]]\nname = \"echo-ok\"\ntool = \"echo\"\ndecision = \"allow\"\n\
             [[policy.rule]]\nname = \"no-echo\"\ntool = \"*__echo\"\ndecision = \"deny\"\nreasoning = \"x\"\n",
        );
        assert!(policy.denies_outright_as(STEP, "get-env", Some("demo__get-env"), None));
        assert!(!policy.denies_outright_as(STEP, "get-env", Some("files__get-env"), None));
        assert!(!policy.denies_outright_as(STEP, "get-env", None, None));
        // A rule on the server's own name decides first.
        assert!(!policy.denies_outright_as(STEP, "echo", Some("demo__echo"), None));
    }

    #[test]
    fn the_default_counts_and_monitored_rules_do_not() {
        let policy = policy(
            "[policy]\ndefault = \"deny\"\n[[policy.rule]]\nname = \"echo\"\ntool = \"echo\"\ndecision = \"allow\"\n\
             [[policy.rule]]\nname = \"watch\"\ntool = \"get-env\"\nmode = \"monitor\"\ndecision = \"allow\"\n",
        );
        assert!(!policy.denies_outright(STEP, "echo", None));
        assert!(policy.denies_outright(STEP, "get-env", None));
        let monitored = self::policy("[policy]\nmode = \"monitor\"\ndefault = \"deny\"\n");
        assert!(!monitored.denies_outright(STEP, "echo", None));
    }
}
