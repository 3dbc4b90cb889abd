//! The embedded Guardian: the `[policy]`, evaluated in process.
//!
//! It evaluates every method the proxy emits and answers at once, so there
//! is no timeout. The rules engine cannot fail; a Rego policy can (a
//! runtime error, its time limit, an answer that is not a valid decision),
//! and such a failure is resolved by `[guardian] on_decision_failure` like
//! a remote Guardian's.

mod engine;
mod rego;
pub mod reload;

use std::sync::{Arc, RwLock};

use futures_util::future::{self, BoxFuture, FutureExt};

use super::{Decision, DecisionSource, FailurePosture, Guardian, GuardianError, Negotiated};
use crate::config::{Config, PostureSetting};
use crate::hooks::{GatewayContext, HookRequest, Metadata};
use crate::policy::Policy;

pub use engine::{Explained, PolicyEngine};

/// A Guardian backed by the compiled `[policy]`.
pub struct EmbeddedGuardian {
    /// The policy in force; a reload replaces the `Arc`, and a hook keeps
    /// the one it started with.
    in_force: RwLock<Arc<InForce>>,
    on_decision_failure: FailurePosture,
}

/// A policy and the digest of the files it was built from.
struct InForce {
    engine: Arc<PolicyEngine>,
    digest: Option<Arc<str>>,
}

impl EmbeddedGuardian {
    /// Wraps compiled rules.
    pub fn new(policy: Arc<Policy>) -> Self {
        Self::with_engine(PolicyEngine::Rules(policy), FailurePosture::default())
    }

    /// Wraps either engine, with the posture for its decision failures.
    pub fn with_engine(engine: PolicyEngine, on_decision_failure: FailurePosture) -> Self {
        Self::built(engine, None, on_decision_failure)
    }

    fn built(
        engine: PolicyEngine,
        digest: Option<String>,
        on_decision_failure: FailurePosture,
    ) -> Self {
        Self {
            in_force: RwLock::new(Arc::new(InForce {
                engine: Arc::new(engine),
                digest: digest.map(Arc::from),
            })),
            on_decision_failure,
        }
    }

    /// The policy in force now.
    pub fn engine(&self) -> Arc<PolicyEngine> {
        self.in_force().engine.clone()
    }

    /// Puts `engine`, built from files with `digest`, in force for every
    /// hook decided from now on.
    pub fn replace(&self, engine: PolicyEngine, digest: Option<String>) {
        let in_force = InForce {
            engine: Arc::new(engine),
            digest: digest.map(Arc::from),
        };
        *self.in_force.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(in_force);
    }

    fn in_force(&self) -> Arc<InForce> {
        self.in_force
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Decides with the policy in force, naming its version.
    fn decide_now(
        &self,
        hook: &HookRequest,
        metadata: &Metadata,
        context: Option<&GatewayContext>,
    ) -> Result<Decision, GuardianError> {
        let in_force = self.in_force();
        let mut decision = in_force.engine.decide(hook, metadata, context)?;
        decision.policy_digest = in_force.digest.clone();
        Ok(decision)
    }

    /// The engine `[policy]` selects, with `[guardian] on_decision_failure`
    /// (default proceed, as for a remote Guardian).
    pub fn from_config(config: &Config) -> Self {
        let posture = match config.guardian.on_decision_failure {
            Some(PostureSetting::Deny) => FailurePosture::Deny,
            Some(PostureSetting::Proceed) | None => FailurePosture::Proceed,
        };
        let engine = PolicyEngine::from_config(config);
        let digest = config
            .source
            .as_deref()
            .map(|path| reload::digest(&reload::files(path, &engine)));
        Self::built(engine, digest, posture)
    }
}

impl Guardian for EmbeddedGuardian {
    fn hello<'a>(
        &'a self,
        _metadata: &'a Metadata,
        _mcp_version: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Negotiated, GuardianError>> {
        let negotiated = Negotiated {
            on_decision_failure: self.on_decision_failure,
            ..Negotiated::default()
        };
        future::ready(Ok(negotiated)).boxed()
    }

    fn decide<'a>(
        &'a self,
        hook: &'a HookRequest,
        metadata: &'a Metadata,
    ) -> BoxFuture<'a, Result<Decision, GuardianError>> {
        future::ready(self.decide_now(hook, metadata, None)).boxed()
    }

    fn wants_context(&self) -> bool {
        self.engine().reads_context()
    }

    fn decide_in_context<'a>(
        &'a self,
        hook: &'a HookRequest,
        metadata: &'a Metadata,
        context: &'a GatewayContext,
    ) -> BoxFuture<'a, Result<Decision, GuardianError>> {
        future::ready(self.decide_now(hook, metadata, Some(context))).boxed()
    }

    fn source(&self) -> DecisionSource {
        DecisionSource::Embedded
    }
}

#[cfg(test)]
mod tests;
