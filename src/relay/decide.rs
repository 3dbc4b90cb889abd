//! One hook through the Guardian, and its audit entry.
//!
//! This is where the negotiated contract is applied: hooks the Guardian does
//! not evaluate are allowed and recorded as `not_evaluated`; a decision that
//! does not arrive in time falls back to the failure posture, and every such
//! fallback is recorded (§6.4).
//!
//! [`decide`] asks about one hook; [`decide_batch`] asks about the hooks of
//! one message in one exchange and hands back raw [`Answer`]s, which each
//! stage later turns into its decision with [`resolve`], the same rules as
//! for one hook asked alone.

use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::{self, Either};

use tokio_util::sync::CancellationToken;

use super::limits_in_force;
use crate::audit::{self, AppendReceipt, AuditError, AuditRecord, McpId, Monitored, OnFailure};
use crate::enforce::Action;
use crate::guardian::{BatchAnswer, Decision, DecisionSource, FailurePosture, GuardianError};
use crate::hooks::{mcp, GatewayContext, HookRequest};
use crate::jsonrpc::RequestId;
use crate::metrics::{METRICS, POLICY_MONITORED};
use crate::session::{Direction, Session};
use crate::telemetry::{spans, Trace};

use super::traced;

pub use crate::guardian::Decided;

/// What appending an entry gave: its receipt, or `None` when the log could
/// not record it and `[audit] on_failure = "allow"` lets the message go on
/// unrecorded.
pub type Recorded = Option<AppendReceipt>;

/// The MCP message a hook or enforcement event is about.
#[derive(Debug, Clone)]
pub struct MessageContext {
    /// Which way the message travels.
    pub direction: Direction,
    /// Its MCP method (for responses: the method answered), static when
    /// the proxy knows it ([`mcp::method_name`]).
    pub mcp_method: Cow<'static, str>,
    /// Its JSON-RPC id, if any, as the audit records of its hooks name it.
    pub mcp_id: Option<McpId>,
}

impl MessageContext {
    /// The context of a message of `mcp_method` travelling `direction`
    /// under JSON-RPC id `id` (`None` for a notification or for an event
    /// of no particular message).
    pub fn new(direction: Direction, mcp_method: &str, id: Option<&RequestId>) -> Self {
        Self::for_method(direction, mcp::method_name(mcp_method), id)
    }

    /// [`Self::new`] for a method already spelled as
    /// [`mcp::method_name`] spells it (a peeked message's, a pending
    /// request's), so it is not looked up again.
    pub fn for_method(
        direction: Direction,
        mcp_method: Cow<'static, str>,
        id: Option<&RequestId>,
    ) -> Self {
        Self {
            direction,
            mcp_method,
            mcp_id: id.map(McpId::of),
        }
    }
}

/// Asks the Guardian about `hook`. `None` when `cancel` fired first.
pub async fn decide(
    session: &Session,
    hook: &HookRequest,
    cancel: &CancellationToken,
) -> Option<Decided> {
    if let Some(decided) = without_asking(session, hook) {
        return Some(count(hook, decided));
    }
    let started = Instant::now();
    if let Some(decided) = decide_at_once(session, hook, cancel, started) {
        return decided;
    }
    let context;
    let asked = if session.guardian.wants_context() {
        context = gateway_context(session, hook);
        session
            .guardian
            .decide_in_context(hook, session.metadata(), &context)
    } else {
        session.guardian.decide(hook, session.metadata())
    };
    let evaluation = spans::guardian(
        &hook.trace,
        &hook.method,
        session.guardian.source().as_str(),
    );
    let asked = evaluation.instrument(asked);
    let result = match session.negotiated().timeout_for(&hook.method) {
        Some(limit) => tokio::select! {
            _ = cancel.cancelled() => return None,
            answer = within(session, limit, asked) => {
                answer.unwrap_or_else(|_| Err(timed_out(limit)))
            }
        },
        None => tokio::select! {
            _ = cancel.cancelled() => return None,
            answer = asked => answer,
        },
    };
    traced::evaluated(&evaluation, &result);
    let answer = Answer {
        result,
        elapsed: started.elapsed(),
    };
    Some(resolve(session, hook, answer))
}

/// [`decide`] for a Guardian that answers in process: no future to drive
/// and no timeout to arm. `None` when the Guardian does not answer so;
/// `Some(None)` when `cancel` fired first, as [`decide`] would report it.
fn decide_at_once(
    session: &Session,
    hook: &HookRequest,
    cancel: &CancellationToken,
    started: Instant,
) -> Option<Option<Decided>> {
    let context = session
        .guardian
        .wants_context()
        .then(|| gateway_context(session, hook));
    let result = session
        .guardian
        .decide_at_once(hook, session.metadata(), context.as_ref())?;
    let evaluation = spans::guardian(
        &hook.trace,
        &hook.method,
        session.guardian.source().as_str(),
    );
    if cancel.is_cancelled() {
        return Some(None);
    }
    traced::evaluated(&evaluation, &result);
    let answer = Answer {
        result,
        elapsed: started.elapsed(),
    };
    Some(Some(resolve(session, hook, answer)))
}

/// The Guardian's answer to one hook, asked ahead of the hook's stage in a
/// batch, and kept until the stage applies it (or discards it).
#[derive(Debug, Clone)]
pub struct Answer {
    result: Result<Decision, GuardianError>,
    elapsed: Duration,
}

/// What asking for several hooks at once gave.
#[derive(Debug)]
pub enum Prefetch {
    /// One answer per hook, in the order asked; each resolves on its own
    /// through [`resolve`] exactly as a [`decide`] answer would.
    Answers(Vec<Answer>),
    /// Nothing was asked (a hook would not go to the Guardian, or the
    /// Guardian does not take batches): decide each hook in its turn.
    Sequential,
    /// `cancel` fired first.
    Cancelled,
}

/// Asks the Guardian about `hooks` in one exchange (`[guardian] batch`).
///
/// Only when every hook would be sent on its own too (the session is
/// guarded and the Guardian evaluates each method); otherwise, or when the
/// Guardian refuses batches, [`Prefetch::Sequential`]. The batch has one
/// deadline, the longest of its hooks' negotiated timeouts, so no hook
/// waits less than it would alone; past it every hook has timed out.
pub async fn decide_batch(
    session: &Session,
    hooks: &[&HookRequest],
    cancel: &CancellationToken,
) -> Prefetch {
    // A Guardian that reads the gateway context is in process and answers
    // at once: there is no round trip for a batch to save.
    if hooks.len() < 2
        || session.guardian.wants_context()
        || !hooks.iter().all(|hook| asks_guardian(session, hook))
    {
        return Prefetch::Sequential;
    }
    let negotiated = session.negotiated();
    let limits: Option<Vec<Duration>> = hooks
        .iter()
        .map(|hook| negotiated.timeout_for(&hook.method))
        .collect();
    let limit = limits.and_then(|limits| limits.into_iter().max());
    let started = Instant::now();
    let evaluation = hooks.first().map_or_else(Trace::off, |first| {
        spans::guardian(&first.trace, "batch", session.guardian.source().as_str())
    });
    let asked = evaluation.instrument(session.guardian.decide_batch(hooks, session.metadata()));
    // Err(limit): the deadline passed first.
    let answer = match limit {
        Some(limit) => tokio::select! {
            _ = cancel.cancelled() => return Prefetch::Cancelled,
            answer = within(session, limit, asked) => answer,
        },
        None => tokio::select! {
            _ = cancel.cancelled() => return Prefetch::Cancelled,
            answer = asked => Ok(answer),
        },
    };
    evaluation.end();
    let mut results = match answer {
        Ok(BatchAnswer::Unsupported) => return Prefetch::Sequential,
        Ok(BatchAnswer::Answers(results)) => results,
        Err(limit) => vec![Err(timed_out(limit)); hooks.len()],
    };
    results.resize_with(hooks.len(), || {
        Err(GuardianError::Malformed(
            "the Guardian gave no answer for this hook of the batch".into(),
        ))
    });
    results.truncate(hooks.len());
    let elapsed = started.elapsed();
    Prefetch::Answers(
        results
            .into_iter()
            .map(|result| Answer { result, elapsed })
            .collect(),
    )
}

/// Turns the Guardian's answer to `hook` into the decision to enforce:
/// hooks it does not evaluate are allowed, failures go to the posture
/// (or fail closed), and every decision is counted.
pub fn resolve(session: &Session, hook: &HookRequest, answer: Answer) -> Decided {
    let elapsed = answer.elapsed.as_secs_f64();
    let decided = match answer.result {
        Ok(decision) => {
            if decision
                .reason_codes
                .iter()
                .any(|code| code == "chain_mismatch")
            {
                METRICS.integrity_event("chain_mismatch");
            }
            Decided {
                decision,
                source: session.guardian.source(),
                failure: None,
            }
        }
        Err(err) if err.not_negotiated() => Decided {
            decision: Decision::allow(),
            source: DecisionSource::NotEvaluated,
            failure: Some(err.to_string()),
        },
        Err(err) => failure(session.negotiated().on_decision_failure, &err),
    };
    METRICS.observe_decision(decided.source.as_str(), decided.decision.decision, elapsed);
    count(hook, decided)
}

/// `asked`'s output, or `Err(limit)` once `limit` passes first; an answer
/// ready as the deadline falls wins, as with `tokio::time::timeout`. The
/// timer is one of the session's [`DecisionTimers`], kept for the next
/// decision, so no exchange registers a timer of its own.
async fn within<F: Future>(
    session: &Session,
    limit: Duration,
    asked: F,
) -> Result<F::Output, Duration> {
    let Some(deadline) = tokio::time::Instant::now().checked_add(limit) else {
        return Ok(asked.await);
    };
    let mut timer = session.decision_timers.until(deadline);
    let asked = std::pin::pin!(asked);
    let answer = match future::select(asked, timer.as_mut()).await {
        Either::Left((answer, _)) => Ok(answer),
        Either::Right(((), _)) => Err(limit),
    };
    session.decision_timers.keep(timer);
    answer
}

/// The gateway facts about `hook` for a Guardian that reads them: the
/// session's route and transport, and the server's definition of the tool.
fn gateway_context(session: &Session, hook: &HookRequest) -> GatewayContext {
    let tool = hook
        .tool
        .as_deref()
        .and_then(|name| session.learned().inventory.tool_definition(name));
    GatewayContext {
        route: session.upstream.clone(),
        transport: session.transport.to_owned(),
        client_address: session.client_address.clone(),
        tool,
        aggregate: session.virtual_route.as_ref().map(|r| r.aggregate.clone()),
        called_as: hook.called_as.as_deref().map(str::to_owned),
        limits: limits_in_force::usage(session, hook),
    }
}

/// Whether `hook` goes to the Guardian at all.
fn asks_guardian(session: &Session, hook: &HookRequest) -> bool {
    let negotiated = session.negotiated();
    session.learned().refused.is_none()
        && negotiated.unguarded.is_none()
        && negotiated.evaluates(&hook.method)
}

/// The decision for a hook that is not sent to the Guardian: in a refused
/// or unguarded session, or of a method the Guardian does not evaluate.
fn without_asking(session: &Session, hook: &HookRequest) -> Option<Decided> {
    let negotiated = session.negotiated();
    if session.learned().refused.is_some() {
        // A refused session has no Guardian session to talk to; what is
        // still recorded (its sessionEnd) is recorded without asking.
        return Some(Decided {
            decision: Decision::allow(),
            source: DecisionSource::NotEvaluated,
            failure: Some("the session was refused; not sent to the Guardian".into()),
        });
    }
    if let Some(reason) = &negotiated.unguarded {
        let posture = negotiated.on_decision_failure;
        METRICS
            .decision_failures_total
            .with_label_values(&["unguarded", posture_label(posture)])
            .inc();
        return Some(self::posture(
            posture,
            format!("unguarded session: {reason}"),
        ));
    }
    if !negotiated.evaluates(&hook.method) {
        return Some(Decided {
            decision: Decision::allow(),
            source: DecisionSource::NotEvaluated,
            failure: None,
        });
    }
    None
}

fn timed_out(limit: Duration) -> GuardianError {
    GuardianError::Timeout(u64::try_from(limit.as_millis()).unwrap_or(u64::MAX))
}

/// No usable decision: the failure posture decides, except for failures
/// that always fail closed (DESIGN §3.6).
fn failure(negotiated: FailurePosture, err: &GuardianError) -> Decided {
    let posture = if err.fails_closed() {
        FailurePosture::Deny
    } else {
        negotiated
    };
    if err.is_integrity_event() {
        METRICS.integrity_event("chain_mismatch");
    }
    METRICS
        .decision_failures_total
        .with_label_values(&[err.reason(), posture_label(posture)])
        .inc();
    self::posture(posture, err.to_string())
}

fn posture_label(posture: FailurePosture) -> &'static str {
    match posture {
        FailurePosture::Proceed => "proceed",
        FailurePosture::Deny => "deny",
    }
}

fn posture(posture: FailurePosture, failure: String) -> Decided {
    let decision = match posture {
        FailurePosture::Proceed => Decision::allow(),
        FailurePosture::Deny => Decision::deny(
            format!("no usable Guardian decision ({failure}); the failure posture is deny"),
            None,
        ),
    };
    Decided {
        decision,
        source: DecisionSource::Posture,
        failure: Some(failure),
    }
}

/// Counts the decision, and records it on the step's span.
fn count(hook: &HookRequest, decided: Decided) -> Decided {
    spans::decision(&hook.trace, &decided.decision, decided.source.as_str());
    METRICS.count_decision(
        &hook.method,
        decided.decision.decision,
        decided.source.as_str(),
    );
    if let Some(would_be) = &decided.decision.monitored {
        POLICY_MONITORED
            .with_label_values(&[would_be.decision.as_str()])
            .inc();
    }
    decided
}

/// Appends the audit entry for a decided hook.
pub async fn record_hook(
    session: &Session,
    hook: &HookRequest,
    decided: &Decided,
    context: &MessageContext,
    action: Action,
    detail: Option<String>,
) -> Result<Recorded, AuditError> {
    let decision = &decided.decision;
    let mut record = AuditRecord::for_hook(hook.request_id, hook.method.to_cow())
        .request_digest(session.request_digest(hook))
        .decision(decision.decision.as_str())
        .decision_source(decided.source)
        .reason_codes(decision.reason_codes.clone());
    if let Some(reasoning) = &decision.reasoning {
        record = record.reasoning(reasoning.as_str());
    }
    if let Some(rule) = decision
        .policy_references
        .first()
        .and_then(|r| r.rule_id.as_ref())
    {
        record = record.rule(Arc::clone(rule));
    }
    if let Some(head) = &decision.chain_hash {
        record = record.guardian_chain_hash(head.as_str());
    }
    if let Some(would_be) = &decision.monitored {
        record = record.monitored(Monitored::of(would_be));
    }
    if let Some(digest) = &decision.policy_digest {
        record = record.policy_digest(Arc::clone(digest));
    }
    if session.config.audit.record_content {
        record = record.hook_params(hook.params(session.metadata()));
    }
    if let Some(detail) = detail.or_else(|| decided.failure.clone()) {
        record = record.detail(detail);
    }
    METRICS.count_enforcement(action.as_str());
    append(session, with_context(record, context, action)).await
}

/// Appends an enforcement event (no hook of its own: a posture fallback, an
/// invalid modification, a hold's outcome, a message refused by the proxy).
pub async fn record_event(
    session: &Session,
    step_id: String,
    decision: &Decision,
    context: &MessageContext,
    action: Action,
    detail: String,
) -> Result<Recorded, AuditError> {
    let mut record = AuditRecord::new(step_id, audit::ENFORCEMENT_STEP_TYPE)
        .decision(decision.decision.as_str())
        .decision_source(DecisionSource::Proxy)
        .reason_codes(decision.reason_codes.clone())
        .detail(detail);
    if let Some(reasoning) = &decision.reasoning {
        record = record.reasoning(reasoning.as_str());
    }
    METRICS.count_enforcement(action.as_str());
    append(session, with_context(record, context, action)).await
}

/// Appends the enforcement event of a call a `[[policy.limit]]` refused,
/// naming the limit.
pub async fn record_limit_refusal(
    session: &Session,
    step_id: String,
    decision: &Decision,
    context: &MessageContext,
    limit: &str,
    detail: String,
) -> Result<Recorded, AuditError> {
    let mut record = AuditRecord::new(step_id, audit::ENFORCEMENT_STEP_TYPE)
        .decision(decision.decision.as_str())
        .decision_source(DecisionSource::Proxy)
        .reason_codes(decision.reason_codes.clone())
        .limit(limit)
        .detail(detail);
    if let Some(reasoning) = &decision.reasoning {
        record = record.reasoning(reasoning.as_str());
    }
    METRICS.count_enforcement(Action::Blocked.as_str());
    append(session, with_context(record, context, Action::Blocked)).await
}

fn with_context(
    record: Box<AuditRecord>,
    context: &MessageContext,
    action: Action,
) -> Box<AuditRecord> {
    let mut record = record.direction(context.direction).action(action);
    if !context.mcp_method.is_empty() {
        record = record.mcp_method(context.mcp_method.clone());
    }
    if let Some(id) = &context.mcp_id {
        record = record.mcp_id(id.clone());
    }
    record
}

/// Appends `record`; a failure is an error only when `[audit] on_failure`
/// is `deny`. The writer logs each failure window once; single appends are
/// only counted, so an outage does not flood the log.
async fn append(session: &Session, record: Box<AuditRecord>) -> Result<Recorded, AuditError> {
    match session.audit.append(record).await {
        Ok(receipt) => {
            METRICS.audit_entries_total.inc();
            Ok(Some(receipt))
        }
        Err(err) => {
            METRICS.audit_failures_total.inc();
            match session.config.audit.on_failure {
                OnFailure::Deny => {
                    tracing::debug!(%err, "audit append failed; failing closed");
                    Err(err)
                }
                OnFailure::Allow => {
                    tracing::debug!(%err, "audit append failed; on_failure = allow passes it");
                    Ok(None)
                }
            }
        }
    }
}

/// The deny that stands in for a decision the audit log could not record:
/// nothing passes without a record. Replies to it carry -32013.
pub fn audit_refusal(err: &AuditError) -> Decision {
    Decision::deny(
        format!("{err}; the message was refused"),
        Some(audit::AUDIT_UNAVAILABLE_REASON),
    )
}
