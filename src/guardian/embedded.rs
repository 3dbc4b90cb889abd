//! The embedded Guardian: the `[policy]` rules, evaluated in process.
//!
//! It evaluates every method the proxy emits, answers at once, and cannot
//! fail, so there is no timeout and no failure posture to apply.

use std::sync::Arc;

use futures_util::future::{self, BoxFuture, FutureExt};

use super::{Decision, DecisionSource, Guardian, GuardianError, Negotiated};
use crate::hooks::{HookRequest, Metadata};
use crate::policy::{HookView, Policy};

/// A Guardian backed by the compiled `[policy]`.
pub struct EmbeddedGuardian {
    policy: Arc<Policy>,
}

impl EmbeddedGuardian {
    /// Wraps a compiled policy.
    pub fn new(policy: Arc<Policy>) -> Self {
        Self { policy }
    }
}

impl Guardian for EmbeddedGuardian {
    fn hello<'a>(
        &'a self,
        _metadata: &'a Metadata,
        _mcp_version: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Negotiated, GuardianError>> {
        future::ready(Ok(Negotiated::default())).boxed()
    }

    fn decide<'a>(
        &'a self,
        hook: &'a HookRequest,
        metadata: &'a Metadata,
    ) -> BoxFuture<'a, Result<Decision, GuardianError>> {
        let view = HookView::new(&hook.method, hook.tool.as_deref(), &hook.payload)
            .with_user(metadata.user.as_deref());
        future::ready(Ok(self.policy.evaluate(&view))).boxed()
    }

    fn source(&self) -> DecisionSource {
        DecisionSource::Embedded
    }
}
