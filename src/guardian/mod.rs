//! The Guardian: who decides each hook.
//!
//! [`Guardian`] is the one interface the relay calls. [`embedded`] evaluates
//! the `[policy]` rules in process; a remote ACS Guardian implements the
//! same trait. A Guardian never touches MCP messages: it only returns a
//! [`Decision`], which [`crate::enforce`] applies.

pub mod embedded;
mod negotiated;
pub mod remote;

use std::sync::Arc;

use futures_util::future::{BoxFuture, FutureExt};

/// Defined with the audit entry that records it.
pub use crate::audit::DecisionSource;
/// The ACS decision types live with the hooks they answer; re-exported
/// here because every Guardian speaks them.
pub use crate::hooks::decision::{self, Decision, Disposition};
pub use negotiated::{FailurePosture, Negotiated};

use crate::hooks::{GatewayContext, HookRequest, Metadata};
use crate::policy::limit::RateLimits;
use remote::wire::codes;

/// A decision and where it came from.
#[derive(Debug, Clone)]
pub struct Decided {
    /// The decision to enforce.
    pub decision: Decision,
    /// Embedded, remote, posture, not_evaluated or proxy.
    pub source: DecisionSource,
    /// Why the posture applied, when it did.
    pub failure: Option<String>,
}

/// Why no usable decision came back.
#[derive(Debug, Clone, thiserror::Error)]
pub enum GuardianError {
    /// The Guardian did not answer in time.
    #[error("the Guardian did not answer within {0} ms")]
    Timeout(u64),
    /// The Guardian could not be reached or the exchange broke.
    #[error("Guardian transport failure: {0}")]
    Transport(String),
    /// The answer was not a valid ACS result.
    #[error("malformed Guardian answer: {0}")]
    Malformed(String),
    /// The Guardian answered with a JSON-RPC error.
    #[error("Guardian error {code}: {message}")]
    Refused {
        /// The JSON-RPC / ACS error code.
        code: i64,
        /// Its message.
        message: String,
    },
    /// The answer's signature is missing or does not verify.
    #[error("Guardian answer not authenticated: {0}")]
    Signature(String),
    /// The answer cannot be bound to the request (wrong `id` or `request_id`).
    #[error("Guardian answer does not match the request: {0}")]
    Binding(String),
    /// The embedded policy could not evaluate the hook (a Rego runtime
    /// error or its time limit).
    #[error("policy evaluation failed: {0}")]
    Evaluation(String),
}

impl GuardianError {
    /// Failures that deny whatever the failure posture says (DESIGN §3.6):
    /// an answer that cannot be authenticated or bound to its request, and
    /// the Guardian's refusals of the request itself (-32004..-32007).
    pub fn fails_closed(&self) -> bool {
        match self {
            GuardianError::Signature(_) | GuardianError::Binding(_) => true,
            GuardianError::Refused { code, .. } => codes::fails_closed(*code),
            _ => false,
        }
    }

    /// The Guardian says it does not evaluate this method (-32003): the
    /// hook is allowed and recorded as not evaluated.
    pub fn not_negotiated(&self) -> bool {
        matches!(self, GuardianError::Refused { code, .. } if *code == codes::CAPABILITY_NOT_NEGOTIATED)
    }

    /// An integrity event (§8.6): the Guardian's chain disagrees with ours.
    pub fn is_integrity_event(&self) -> bool {
        matches!(self, GuardianError::Refused { code, .. } if *code == codes::CHAIN_MISMATCH)
    }

    /// A bounded label for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            GuardianError::Timeout(_) => "timeout",
            GuardianError::Transport(_) => "transport",
            GuardianError::Malformed(_) => "malformed",
            GuardianError::Refused { .. } => "error_reply",
            GuardianError::Signature(_) => "signature",
            GuardianError::Binding(_) => "binding",
            GuardianError::Evaluation(_) => "evaluation",
        }
    }
}

/// What a Guardian answered to several hooks asked at once.
#[derive(Debug, Clone)]
pub enum BatchAnswer {
    /// One answer per hook, in the order they were asked. Each element
    /// stands alone: a failure of one (a bad signature, a wrong
    /// `request_id`, no answer) says nothing about the others.
    Answers(Vec<Result<Decision, GuardianError>>),
    /// The Guardian does not take batches (it answered the array with
    /// -32600, now or earlier): ask one hook at a time instead.
    Unsupported,
}

/// A decision maker for ACS hooks.
pub trait Guardian: Send + Sync {
    /// The handshake for one session: which methods are evaluated, with
    /// which timeouts and failure posture. `mcp_version` is the MCP revision
    /// the client asked for, declared in `wrapped_protocols`.
    fn hello<'a>(
        &'a self,
        metadata: &'a Metadata,
        mcp_version: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Negotiated, GuardianError>>;

    /// Decides one hook.
    fn decide<'a>(
        &'a self,
        hook: &'a HookRequest,
        metadata: &'a Metadata,
    ) -> BoxFuture<'a, Result<Decision, GuardianError>>;

    /// Decides one hook at once, when this Guardian runs in process and
    /// never waits: the caller then skips the future, and with it the
    /// decision's timeout, which an in-process answer cannot miss. `None`
    /// (the default): ask through [`Guardian::decide`].
    fn decide_at_once(
        &self,
        _hook: &HookRequest,
        _metadata: &Metadata,
        _context: Option<&GatewayContext>,
    ) -> Option<Result<Decision, GuardianError>> {
        None
    }

    /// Whether this Guardian reads [`GatewayContext`]: the caller gathers
    /// it (and calls [`Guardian::decide_in_context`]) only then.
    fn wants_context(&self) -> bool {
        false
    }

    /// The `[[policy.limit]]` set in force when this Guardian's policy
    /// carries its own (the embedded Guardian's is reloaded with it);
    /// `None`: the limits of the configuration the session started with.
    fn rate_limits(&self) -> Option<Arc<RateLimits>> {
        None
    }

    /// Decides one hook, knowing the gateway facts that are not on the
    /// wire. The default ignores them.
    fn decide_in_context<'a>(
        &'a self,
        hook: &'a HookRequest,
        metadata: &'a Metadata,
        _context: &'a GatewayContext,
    ) -> BoxFuture<'a, Result<Decision, GuardianError>> {
        self.decide(hook, metadata)
    }

    /// Decides several hooks in one exchange (ACS §3 batching): each
    /// independently, in the order given, each answer bound to its own hook.
    /// The hooks are decided as built, so an answer is only good for the
    /// message each hook was built from (the caller discards the ones an
    /// earlier stage made stale).
    ///
    /// The default asks one hook after another with [`Guardian::decide`],
    /// which is what a Guardian without a batch form of its own gives.
    fn decide_batch<'a>(
        &'a self,
        hooks: &'a [&'a HookRequest],
        metadata: &'a Metadata,
    ) -> BoxFuture<'a, BatchAnswer> {
        async move {
            let mut answers = Vec::with_capacity(hooks.len());
            for hook in hooks {
                answers.push(self.decide(hook, metadata).await);
            }
            BatchAnswer::Answers(answers)
        }
        .boxed()
    }

    /// How decisions from this Guardian are labelled.
    fn source(&self) -> DecisionSource;

    /// Forgets a session's state once it has ended.
    fn close_session(&self, _metadata: &Metadata) {}
}
