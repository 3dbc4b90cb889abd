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
use crate::policy::limit::RateLimits;
use crate::policy::Policy;

pub use engine::{Explained, PolicyEngine};

/// A Guardian backed by the compiled `[policy]`.
pub struct EmbeddedGuardian {
    /// The policy in force; a reload replaces the `Arc`, and a hook keeps
    /// the one it started with.
    in_force: RwLock<Arc<InForce>>,
    on_decision_failure: FailurePosture,
}

/// A policy, its `[[policy.limit]]` set, and the digest of the files
/// they were built from.
struct InForce {
    engine: Arc<PolicyEngine>,
    limits: Arc<RateLimits>,
    digest: Option<Arc<str>>,
}

impl EmbeddedGuardian {
    /// Wraps compiled rules.
    pub fn new(policy: Arc<Policy>) -> Self {
        let limits = policy.limits().clone();
        Self::built(
            PolicyEngine::Rules(policy),
            limits,
            None,
            FailurePosture::default(),
        )
    }

    /// Wraps either engine, with the posture for its decision failures
    /// (and no limits).
    pub fn with_engine(engine: PolicyEngine, on_decision_failure: FailurePosture) -> Self {
        Self::built(engine, RateLimits::default(), None, on_decision_failure)
    }

    fn built(
        engine: PolicyEngine,
        limits: RateLimits,
        digest: Option<String>,
        on_decision_failure: FailurePosture,
    ) -> Self {
        Self {
            in_force: RwLock::new(Arc::new(InForce {
                engine: Arc::new(engine),
                limits: Arc::new(limits),
                digest: digest.map(Arc::from),
            })),
            on_decision_failure,
        }
    }

    /// The policy in force now.
    pub fn engine(&self) -> Arc<PolicyEngine> {
        self.in_force().engine.clone()
    }

    /// Puts `engine` and `limits`, built from files with `digest`, in force
    /// for every hook decided and call admitted from now on. Limits whose
    /// definition did not change keep their buckets and calls in flight.
    pub fn replace(&self, engine: PolicyEngine, limits: RateLimits, digest: Option<String>) {
        let mut in_force = self.in_force.write().unwrap_or_else(|e| e.into_inner());
        let replacement = InForce {
            engine: Arc::new(engine),
            limits: Arc::new(limits.carry_over(&in_force.limits)),
            digest: digest.map(Arc::from),
        };
        *in_force = Arc::new(replacement);
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
        Self::built(engine, config.policy.limits().clone(), digest, posture)
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

    fn rate_limits(&self) -> Option<Arc<RateLimits>> {
        Some(self.in_force().limits.clone())
    }

    fn decide_in_context<'a>(
        &'a self,
        hook: &'a HookRequest,
        metadata: &'a Metadata,
        context: &'a GatewayContext,
    ) -> BoxFuture<'a, Result<Decision, GuardianError>> {
        future::ready(self.decide_now(hook, metadata, Some(context))).boxed()
    }

    fn decide_at_once(
        &self,
        hook: &HookRequest,
        metadata: &Metadata,
        context: Option<&GatewayContext>,
    ) -> Option<Result<Decision, GuardianError>> {
        Some(self.decide_now(hook, metadata, context))
    }

    fn source(&self) -> DecisionSource {
        DecisionSource::Embedded
    }
}

#[cfg(test)]
mod tests;
