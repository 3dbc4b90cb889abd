//! Which engine the embedded Guardian evaluates: the TOML rules or Rego.
//!
//! One enum, so the Guardian, the `policy` tooling and a later reload all
//! handle "the compiled policy" as one value that can be replaced whole.

use std::sync::Arc;

use super::rego;
use crate::config::Config;
use crate::guardian::{Decision, GuardianError};
use crate::hooks::{GatewayContext, HookRequest, Metadata};
use crate::policy::{HookView, Mode, Policy, RegoPolicy};

/// The compiled `[policy]`, in either language.
#[derive(Debug, Clone)]
pub enum PolicyEngine {
    /// `[[policy.rule]]` entries.
    Rules(Arc<Policy>),
    /// A Rego policy (`engine = "rego"`), with the `[policy] mode` its
    /// decisions pass through (monitor mode is the same for both engines).
    Rego {
        /// The compiled modules and data.
        policy: Arc<RegoPolicy>,
        /// `enforce` or `monitor`.
        mode: Mode,
    },
}

/// A decision and what produced it, for `acs-proxy policy eval`.
#[derive(Debug, Clone)]
pub struct Explained {
    /// The decision, or why there is none.
    pub result: Result<Decision, GuardianError>,
    /// What decided: the rule's name, the Rego query, or the default.
    pub decided_by: String,
}

impl PolicyEngine {
    /// The engine the configuration compiled.
    pub fn from_config(config: &Config) -> Self {
        match &config.rego {
            Some(rego) => PolicyEngine::Rego {
                policy: rego.clone(),
                mode: config.policy.mode(),
            },
            None => PolicyEngine::Rules(config.policy.clone()),
        }
    }

    /// Whether evaluation reads [`GatewayContext`] (only Rego does).
    pub fn reads_context(&self) -> bool {
        matches!(self, PolicyEngine::Rego { .. })
    }

    /// Decides one hook.
    pub fn decide(
        &self,
        hook: &HookRequest,
        metadata: &Metadata,
        context: Option<&GatewayContext>,
    ) -> Result<Decision, GuardianError> {
        match self {
            PolicyEngine::Rules(policy) => Ok(evaluate_rules(policy, hook, metadata)),
            PolicyEngine::Rego { policy, mode } => {
                rego::decide(policy, hook, metadata, context).map(|decision| mode.apply(decision))
            }
        }
    }

    /// Decides one hook and says what decided it.
    pub fn explain(
        &self,
        hook: &HookRequest,
        metadata: &Metadata,
        context: Option<&GatewayContext>,
    ) -> Explained {
        let result = self.decide(hook, metadata, context);
        let decided_by = match self {
            PolicyEngine::Rules(policy) => match policy.matching_rule(&view(hook, metadata)) {
                Some(rule) => format!("rule {rule:?}"),
                None => "the policy default (no rule matched)".to_owned(),
            },
            PolicyEngine::Rego { policy, .. } => rego::decided_by(policy, result.as_ref().ok()),
        };
        Explained { result, decided_by }
    }
}

/// A virtual server's tool is selected by its server's name or by the name
/// the agent called it: rules naming the server's own name are consulted
/// first, then those naming the agent's.
fn evaluate_rules(policy: &Policy, hook: &HookRequest, metadata: &Metadata) -> Decision {
    let own = view(hook, metadata);
    let called = hook.called_as.as_deref().map(|called_as| HookView {
        tool: Some(called_as),
        ..own
    });
    policy.evaluate_either(&own, called.as_ref())
}

fn view<'a>(hook: &'a HookRequest, metadata: &'a Metadata) -> HookView<'a> {
    HookView::new(&hook.method, hook.tool.as_deref(), &hook.payload)
        .with_user(metadata.user.as_deref())
}
