//! The hook pipeline for one MCP message: each stage builds a hook from the
//! message as the previous stage left it, asks the Guardian, and applies
//! the decision (DESIGN §3.2: deny at any stage stops).
//!
//! With `[guardian] batch`, a message with several stages (a `tools/call`
//! with `hooks.tools_call = "both"`) has every stage's hook built from the
//! message as read and asked in one batch before the first stage runs.
//! Each stage then applies its pre-fetched answer, but only while every
//! earlier stage let the message through as it was: after a modify the
//! answer is about a message that no longer exists, and after an ask or a
//! defer it predates the approval, so it is discarded and the stage asks
//! again about the message as it now is. A deny stops the pipeline and
//! the later answers are simply dropped. Audit entries are the same as
//! without batching: one per stage that ran.

use std::sync::Arc;

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::approval;
use super::decide::{self, Answer, Decided, MessageContext, Prefetch, Recorded};
use super::delivery::Outcome;
pub use super::stages::{stages, Stage};
use crate::enforce::modify::{self, ModifyError, OutputMap, Target};
use crate::enforce::{Action, MessageDoc};
use crate::guardian::{Decision, Disposition};
use crate::hooks::tool_call::{ToolCallRequest, ToolCallResult};
use crate::hooks::{self, mcp, HookRequest};
use crate::jsonrpc::MessageKind;
use crate::session::Session;
use crate::telemetry::{spans, Trace};

/// What the pipeline knows about the message beyond its content.
#[derive(Debug, Clone)]
pub struct Flow {
    /// Direction, method and id, for hooks and audit entries.
    pub context: MessageContext,
    /// Request, response or notification.
    pub kind: MessageKind,
    /// The tool of a `tools/call`.
    pub tool: Option<Arc<str>>,
    /// The name the agent called that tool by, when it came through a
    /// virtual server under another name.
    pub called_as: Option<Arc<str>>,
    /// For a `tools/call` response: the `steps/toolCallRequest` request id.
    pub request_ref: Option<Uuid>,
    /// For a `tools/call` response: how long the call took.
    pub duration_ms: u64,
    /// The MCP request's server span (off unless traced): the parent of
    /// each stage's step span.
    pub trace: Trace,
}

/// How a message's whole pipeline ended.
#[derive(Debug)]
pub enum Passage {
    /// Every stage let the message through (possibly rewritten).
    Through {
        /// The `steps/toolCallRequest` hook that let it through (the
        /// response's `request_id_ref`), if there was one.
        tool_call_request: Option<Uuid>,
    },
    /// A stage blocked the message.
    Blocked {
        /// The deny (policy, posture, proxy or audit failure).
        decision: Box<Decision>,
        /// The audit entry recording it.
        entry_id: Option<String>,
    },
    /// The message was cancelled while being decided or held.
    Cancelled,
}

/// A stage's hook, built and asked ahead of the stage (in a batch), with
/// the Guardian's answer.
#[derive(Debug)]
struct Prefetched {
    hook: HookRequest,
    answer: Answer,
}

/// The message was cancelled while its batch was out.
struct Cancelled;

/// Runs every stage over `doc`, in order, stopping at the first that
/// blocks. `detach` is the in-order delivery slot: a hold releases it so
/// later messages are not stuck behind an approval.
pub async fn run_all(
    session: &Session,
    stages: &[Stage],
    doc: &mut MessageDoc,
    flow: &Flow,
    cancel: &CancellationToken,
    detach: &mut Option<oneshot::Sender<Outcome>>,
) -> Passage {
    let Ok(ahead) = prefetch(session, stages, doc, flow, cancel).await else {
        return Passage::Cancelled;
    };
    let mut ahead = ahead.into_iter();
    let mut as_read = true;
    let mut tool_call_request = None;
    for stage in stages {
        let ahead = match ahead.next() {
            Some(prefetched) if !as_read => {
                tracing::debug!(
                    method = %prefetched.hook.method,
                    "an earlier stage changed or held the message; asking again"
                );
                None
            }
            ahead => ahead,
        };
        match run(session, *stage, doc, flow, cancel, detach, ahead).await {
            StageResult::Continue {
                hook_id,
                as_read: unchanged,
            } => {
                as_read &= unchanged;
                if *stage == Stage::ToolCallRequest {
                    tool_call_request = hook_id;
                }
            }
            StageResult::Blocked { decision, entry_id } => {
                return Passage::Blocked { decision, entry_id }
            }
            StageResult::Cancelled => return Passage::Cancelled,
        }
    }
    Passage::Through { tool_call_request }
}

/// With `[guardian] batch` and more than one stage: every stage's hook,
/// built from the message as read, asked in one batch. One per stage, or
/// none when nothing was asked ahead: empty, so that the usual case (no
/// batching) allocates nothing.
async fn prefetch(
    session: &Session,
    stages: &[Stage],
    doc: &MessageDoc,
    flow: &Flow,
    cancel: &CancellationToken,
) -> Result<Vec<Prefetched>, Cancelled> {
    let nothing = Vec::new;
    if stages.len() < 2 || !session.config.guardian.batch {
        return Ok(nothing());
    }
    let built: Option<Vec<HookRequest>> = stages
        .iter()
        .map(|stage| build_hook(session, *stage, doc, flow))
        .collect();
    let Some(built) = built else {
        return Ok(nothing());
    };
    let hooks: Vec<&HookRequest> = built.iter().collect();
    let answers = match decide::decide_batch(session, &hooks, cancel).await {
        Prefetch::Answers(answers) => answers,
        Prefetch::Sequential => return Ok(nothing()),
        Prefetch::Cancelled => return Err(Cancelled),
    };
    Ok(built
        .into_iter()
        .zip(answers)
        .map(|(hook, answer)| Prefetched { hook, answer })
        .collect())
}

/// How a stage ended.
#[derive(Debug)]
enum StageResult {
    /// Go on to the next stage (or forward).
    Continue {
        /// The hook's request id (`steps/toolCallRequest`'s becomes `request_id_ref`).
        hook_id: Option<Uuid>,
        /// The stage let the message through as it was: allowed outright,
        /// not rewritten and not held.
        as_read: bool,
    },
    /// Stop: the message is blocked for this reason.
    Blocked {
        /// The deny (policy, posture, proxy or audit failure).
        decision: Box<Decision>,
        /// The audit entry recording it.
        entry_id: Option<String>,
    },
    /// The message was cancelled while being decided or held.
    Cancelled,
}

/// Runs one stage over `doc`: applies the pre-fetched answer when there
/// is one, else builds the hook from `doc` as it now is and asks.
async fn run(
    session: &Session,
    stage: Stage,
    doc: &mut MessageDoc,
    flow: &Flow,
    cancel: &CancellationToken,
    detach: &mut Option<oneshot::Sender<Outcome>>,
    ahead: Option<Prefetched>,
) -> StageResult {
    let (hook, decided) = match ahead {
        Some(Prefetched { hook, answer }) => {
            let decided = decide::resolve(session, &hook, answer);
            (hook, decided)
        }
        None => {
            let Some(hook) = build_hook(session, stage, doc, flow) else {
                return StageResult::Continue {
                    hook_id: None,
                    as_read: true,
                };
            };
            let Some(decided) = decide::decide(session, &hook, cancel).await else {
                return StageResult::Cancelled;
            };
            (hook, decided)
        }
    };
    match decided.decision.decision {
        Disposition::Allow => record(session, &hook, &decided, flow, Action::Forwarded, None).await,
        Disposition::Deny => block(session, &hook, &decided, flow).await,
        Disposition::Modify => modify(session, &hook, &decided, doc, flow, stage).await,
        Disposition::Ask | Disposition::Defer => {
            hold(session, &hook, &decided, flow, cancel, detach).await
        }
    }
}

/// The stage's hook, with its step span under the request's.
fn build_hook(
    session: &Session,
    stage: Stage,
    doc: &MessageDoc,
    flow: &Flow,
) -> Option<HookRequest> {
    let hook = build_plain_hook(session, stage, doc, flow)?;
    let step = spans::step(&flow.trace, &hook, session.metadata());
    Some(hook.with_called_as(flow.called_as.clone()).traced(step))
}

fn build_plain_hook(
    session: &Session,
    stage: Stage,
    doc: &MessageDoc,
    flow: &Flow,
) -> Option<HookRequest> {
    let provider = &session.provider;
    match stage {
        Stage::Wrapped => {
            let method = mcp::wrapped_method(&flow.context.mcp_method);
            Some(HookRequest::new(
                method,
                Arc::clone(doc.tree()),
                flow.tool.clone(),
            ))
        }
        Stage::ToolCallRequest => {
            let payload = ToolCallRequest::read(doc.tree(), provider)?;
            Some(HookRequest::new(
                hooks::TOOL_CALL_REQUEST,
                payload,
                flow.tool.clone(),
            ))
        }
        Stage::ToolCallResult => {
            let tool = flow.tool.clone().unwrap_or_else(|| Arc::from("unknown"));
            let result = ToolCallResult::read(
                doc.tree(),
                tool,
                provider,
                flow.request_ref,
                flow.duration_ms,
            );
            Some(HookRequest::new(
                hooks::TOOL_CALL_RESULT,
                result,
                flow.tool.clone(),
            ))
        }
    }
}

async fn record(
    session: &Session,
    hook: &HookRequest,
    decided: &Decided,
    flow: &Flow,
    action: Action,
    detail: Option<String>,
) -> StageResult {
    match decide::record_hook(session, hook, decided, &flow.context, action, detail).await {
        Ok(_) => StageResult::Continue {
            hook_id: Some(hook.request_id),
            as_read: action == Action::Forwarded,
        },
        Err(err) => audit_failed(err),
    }
}

async fn block(
    session: &Session,
    hook: &HookRequest,
    decided: &Decided,
    flow: &Flow,
) -> StageResult {
    let action = blocked_action(flow.kind);
    match decide::record_hook(session, hook, decided, &flow.context, action, None).await {
        Ok(receipt) => StageResult::Blocked {
            decision: Box::new(decided.decision.clone()),
            entry_id: receipt.map(|receipt| receipt.entry_id_text()),
        },
        Err(err) => audit_failed(err),
    }
}

/// A blocked notification is dropped; anything else is answered.
fn blocked_action(kind: MessageKind) -> Action {
    match kind {
        MessageKind::Notification => Action::Dropped,
        _ => Action::Blocked,
    }
}

async fn modify(
    session: &Session,
    hook: &HookRequest,
    decided: &Decided,
    doc: &mut MessageDoc,
    flow: &Flow,
    stage: Stage,
) -> StageResult {
    let applied = match &decided.decision.modifications {
        Some(modifications) => apply_modifications(doc, modifications, stage, flow.kind, hook),
        None => Err(ModifyError::Empty),
    };
    match applied {
        Ok(()) => {
            doc.mark_rewritten();
            record(session, hook, decided, flow, Action::Rewritten, None).await
        }
        Err(err) => refuse_modification(session, hook, decided, flow, err).await,
    }
}

fn apply_modifications(
    doc: &mut MessageDoc,
    modifications: &crate::guardian::decision::Modifications,
    stage: Stage,
    kind: MessageKind,
    hook: &HookRequest,
) -> Result<(), ModifyError> {
    match stage {
        Stage::Wrapped => {
            let target = match kind {
                MessageKind::Request => Target::WrappedMcpRequest,
                _ => Target::WrappedMcpResponse,
            };
            modify::apply(doc.value_mut(), modifications, target)
        }
        Stage::ToolCallRequest => {
            modify::tool_request_to_mcp(modifications)?.apply(doc.value_mut())
        }
        Stage::ToolCallResult => {
            // Where each output came from in the response the hook was
            // asked about: wanted only here, so worked out only here.
            let sources = hook.payload.tool_result().map(ToolCallResult::sources);
            let mapped =
                modify::tool_result_to_mcp(modifications, &OutputMap(sources.unwrap_or_default()))?;
            modify::apply(doc.value_mut(), &mapped, Target::WrappedMcpResponse)
        }
    }
}

/// §6.3/§6.5: a modification that cannot be applied is a deny, recorded
/// with the reason; `modify_unsupported` when the change is of a kind this
/// message cannot take at all.
async fn refuse_modification(
    session: &Session,
    hook: &HookRequest,
    decided: &Decided,
    flow: &Flow,
    err: ModifyError,
) -> StageResult {
    let code = match err {
        ModifyError::ModifiedContentUnsupported { .. }
        | ModifyError::OverridesUnsupported { .. } => "modify_unsupported",
        _ => "invalid_modification",
    };
    let denial = Decision::deny(
        format!("the requested modification cannot be applied: {err}"),
        Some(code),
    );
    let action = blocked_action(flow.kind);
    let detail = Some(format!("modification refused: {err}"));
    if let Err(err) =
        decide::record_hook(session, hook, decided, &flow.context, action, detail).await
    {
        return audit_failed(err);
    }
    let event = decide::record_event(
        session,
        hook.request_id.to_string(),
        &denial,
        &flow.context,
        action,
        format!("{code}: {err}"),
    )
    .await;
    blocked_with(denial, event)
}

async fn hold(
    session: &Session,
    hook: &HookRequest,
    decided: &Decided,
    flow: &Flow,
    cancel: &CancellationToken,
    detach: &mut Option<oneshot::Sender<Outcome>>,
) -> StageResult {
    if let Err(err) =
        decide::record_hook(session, hook, decided, &flow.context, Action::Held, None).await
    {
        return audit_failed(err);
    }
    if let Some(slot) = detach.take() {
        let _ = slot.send(Outcome::Detached);
    }
    let wait = spans::approval(&hook.trace, &decided.decision);
    let Some(resolution) = approval::resolve(session, &decided.decision, hook, cancel).await else {
        wait.fail(|| "cancelled while waiting".into());
        return StageResult::Cancelled;
    };
    wait.end();
    spans::decision(&hook.trace, &resolution.decision, "approval");
    let allowed = resolution.decision.decision == Disposition::Allow;
    let action = if allowed {
        Action::Forwarded
    } else {
        blocked_action(flow.kind)
    };
    let event = decide::record_event(
        session,
        hook.request_id.to_string(),
        &resolution.decision,
        &flow.context,
        action,
        resolution.detail,
    )
    .await;
    match (allowed, event) {
        (true, Ok(_)) => StageResult::Continue {
            hook_id: Some(hook.request_id),
            as_read: false,
        },
        (_, event) => blocked_with(resolution.decision, event),
    }
}

fn blocked_with(
    decision: Decision,
    event: Result<Recorded, crate::audit::AuditError>,
) -> StageResult {
    match event {
        Ok(receipt) => StageResult::Blocked {
            decision: Box::new(decision),
            entry_id: receipt.map(|receipt| receipt.entry_id_text()),
        },
        Err(err) => audit_failed(err),
    }
}

/// Nothing passes that could not be recorded.
fn audit_failed(err: crate::audit::AuditError) -> StageResult {
    StageResult::Blocked {
        decision: Box::new(decide::audit_refusal(&err)),
        entry_id: None,
    }
}
