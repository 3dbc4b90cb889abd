//! What happens to one message read from one side: requests, responses and
//! notifications each take their own path through the hook pipeline and
//! come out as zero or more [`Delivery`]s.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::decide::{self, MessageContext};
pub use super::delivery::Delivery;
use super::delivery::Outcome;
use super::stage::{self, Flow, Passage};
use super::{integrity, inventory, lifecycle, quota, timeout, tool_latency, traced};
use crate::enforce::reply::{self, Denial};
use crate::enforce::{Action, MessageDoc};
use crate::guardian::Decision;
use crate::hooks::mcp;
use crate::jsonrpc::{
    codes, error_response, BorrowedJson, Message, MessageKind, MessageTree, RequestId,
};
use crate::metrics::METRICS;
use crate::session::{AdmissionError, Direction, PendingRequest, PendingState, Session};
use crate::telemetry::{Carrier, Trace};

/// Handles one message; `carrier` is the trace context it came with,
/// outside the message (an HTTP header).
pub async fn handle_message(
    session: &Arc<Session>,
    direction: Direction,
    message: Message,
    carrier: Option<&Carrier>,
    detach: &mut Option<oneshot::Sender<Outcome>>,
) -> Vec<Delivery> {
    METRICS.count_message(direction, message.method());
    if let Some(refusal) = refused(session, direction, &message).await {
        return refusal;
    }
    match message.kind {
        MessageKind::Request => handle_request(session, direction, message, carrier, detach).await,
        MessageKind::Response => handle_response(session, direction, message).await,
        MessageKind::Notification => handle_notification(session, direction, message).await,
    }
}

/// A session whose start (or inventory) was denied serves nothing more;
/// one whose start the audit log has not recorded yet serves nothing until
/// it has.
async fn refused(
    session: &Session,
    direction: Direction,
    message: &Message,
) -> Option<Vec<Delivery>> {
    if direction != Direction::ClientToServer {
        return None;
    }
    let unrecorded = session.learned().unrecorded_start.is_some();
    if unrecorded {
        if let Err(err) = lifecycle::record_unrecorded_start(session).await {
            return Some(refuse_unrecorded(message, &err));
        }
    }
    let reason = session.learned().refused.clone()?;
    let decision = Decision::deny(format!("the session was refused: {reason}"), None);
    let context = context_of(direction, message, message.method_name());
    let action = if message.kind == MessageKind::Request {
        Action::Blocked
    } else {
        Action::Dropped
    };
    let step = uuid::Uuid::new_v4().to_string();
    let receipt = decide::record_event(
        session,
        step,
        &decision,
        &context,
        action,
        "session refused".into(),
    )
    .await;
    let entry = receipt
        .ok()
        .flatten()
        .map(|receipt| receipt.entry_id_text());
    Some(match (&message.kind, &message.id) {
        (MessageKind::Request, Some(id)) => vec![Delivery::Reply(reply::blocked_request(
            id,
            message.method(),
            &Denial::of(&decision, entry.as_deref()),
        ))],
        _ => Vec::new(),
    })
}

/// A request is answered -32013; anything else is dropped.
fn refuse_unrecorded(message: &Message, err: &crate::audit::AuditError) -> Vec<Delivery> {
    let decision = decide::audit_refusal(err);
    match (&message.kind, &message.id) {
        (MessageKind::Request, Some(id)) => vec![Delivery::Reply(reply::blocked_request(
            id,
            message.method(),
            &Denial::of(&decision, None),
        ))],
        _ => Vec::new(),
    }
}

fn context_of(
    direction: Direction,
    message: &Message,
    mcp_method: Cow<'static, str>,
) -> MessageContext {
    MessageContext::for_method(direction, mcp_method, message.id.as_ref())
}

/// The message as a tree for the hooks; a message that has none (a
/// duplicate object key) is refused and recorded.
async fn parse(
    session: &Session,
    direction: Direction,
    message: &Message,
    answer_to: Option<&str>,
) -> Result<MessageDoc, Vec<Delivery>> {
    if let Some(tree) = &message.tree {
        return Ok(MessageDoc::new(tree.clone()));
    }
    match MessageTree::parse(message.bytes.clone()) {
        Ok(tree) => Ok(MessageDoc::new(Arc::new(tree))),
        Err(err) => Err(refuse_unparsable(session, direction, message, answer_to, &err).await),
    }
}

/// Refuses a message the peek accepted but whose tree cannot be built. A
/// request is answered -32600 (duplicate key) or -32700; a response is
/// replaced by an error to its requester (`answer_to`: the method it
/// answers); a notification is dropped. Each is recorded.
async fn refuse_unparsable(
    session: &Session,
    direction: Direction,
    message: &Message,
    answer_to: Option<&str>,
    err: &serde_json::Error,
) -> Vec<Delivery> {
    let (code, kind) = if err.is_data() {
        (codes::INVALID_REQUEST, "invalid request")
    } else {
        (codes::PARSE_ERROR, "parse error")
    };
    let reason = format!("{kind}: {err}");
    let method = answer_to.unwrap_or(message.method());
    let context = context_of(direction, message, mcp::method_name(method));
    let (action, deliveries) = match (message.kind, &message.id) {
        (MessageKind::Request, Some(id)) => (
            Action::Blocked,
            vec![Delivery::Reply(error_response(
                Some(id),
                code,
                &reason,
                None,
            ))],
        ),
        (MessageKind::Response, Some(id)) => (
            Action::Blocked,
            vec![Delivery::Forward(error_response(
                Some(id),
                codes::INTERNAL_ERROR,
                &format!("the response was refused: {err}"),
                None,
            ))],
        ),
        _ => (Action::Dropped, Vec::new()),
    };
    let decision = Decision::deny("malformed input refused by the proxy", None);
    let step = uuid::Uuid::new_v4().to_string();
    let _ = decide::record_event(session, step, &decision, &context, action, reason).await;
    deliveries
}

async fn handle_request(
    session: &Arc<Session>,
    direction: Direction,
    message: Message,
    carrier: Option<&Carrier>,
    detach: &mut Option<oneshot::Sender<Outcome>>,
) -> Vec<Delivery> {
    let Some(id) = message.id.clone() else {
        return Vec::new();
    };
    let method = message.method_name();
    let mut doc = match parse(session, direction, &message, None).await {
        Ok(doc) => doc,
        Err(reply) => return reply,
    };
    let tool = tool_name(&method, doc.tree().root());
    let trace = traced::request(session, direction, carrier, &message, &doc, tool.as_deref());
    let cancel = CancellationToken::new();
    let started = Instant::now();
    let pending = session.pending_from(direction);
    let registered = pending.insert(
        id.clone(),
        PendingRequest {
            method: method.clone(),
            tool: tool.clone(),
            started,
            step_request_id: None,
            state: PendingState::Deciding,
            cancel: cancel.clone(),
            admitted: None,
            trace: trace.clone(),
            upstream_trace: Trace::off(),
        },
    );
    match registered {
        Ok(()) => {}
        Err(AdmissionError::DuplicateId) => {
            return vec![Delivery::Reply(error_response(
                Some(&id),
                codes::INVALID_REQUEST,
                &AdmissionError::DuplicateId.to_string(),
                None,
            ))]
        }
        Err(AdmissionError::Limit(limit)) => {
            return quota::refuse_in_flight(session, direction, &message, limit).await
        }
    }
    if let Err(refusal) = quota::admit(session, direction, &id, &method, tool.as_deref()).await {
        return refusal;
    }
    if method == "initialize" {
        inventory::note_initialize_request(session, doc.value());
    }
    let context = context_of(direction, &message, method.clone());
    if direction == Direction::ClientToServer {
        if let Some(refusal) = integrity::check_call(session, &method, &doc, &id, &context).await {
            pending.remove_blocked(&id);
            return vec![Delivery::Reply(refusal)];
        }
    }
    let flow = Flow {
        context,
        kind: MessageKind::Request,
        called_as: session.tool_called_as(tool.as_deref()),
        tool,
        request_ref: None,
        duration_ms: 0,
        trace,
    };
    let stages = stage::stages(
        &method,
        MessageKind::Request,
        session.config.hooks.tools_call,
    );
    let step_request_id =
        match stage::run_all(session, stages, &mut doc, &flow, &cancel, detach).await {
            Passage::Through { tool_call_request } => tool_call_request,
            Passage::Blocked { decision, entry_id } => {
                pending.remove_blocked(&id);
                traced::blocked(&flow.trace, &decision);
                let denial = Denial::of(&decision, entry_id.as_deref());
                return vec![Delivery::Reply(reply::blocked_request(
                    &id, &method, &denial,
                ))];
            }
            Passage::Cancelled => {
                pending.remove_blocked(&id);
                return Vec::new();
            }
        };
    if cancel.is_cancelled() {
        pending.remove_blocked(&id);
        return Vec::new();
    }
    let upstream_trace = traced::forward(
        session,
        &flow.trace,
        &method,
        flow.tool.as_deref(),
        &mut doc,
    );
    pending.update(&id, |request| {
        request.state = PendingState::Forwarded;
        request.step_request_id = step_request_id;
        request.upstream_trace = upstream_trace;
    });
    if direction == Direction::ClientToServer {
        let answered = cancel;
        timeout::watch(
            session,
            timeout::Watched {
                id,
                started,
                answered,
            },
        );
    }
    vec![Delivery::Forward(doc.into_bytes())]
}

/// The tool a `tools/call` names, for policy matching and the result hook.
fn tool_name(method: &str, message: &BorrowedJson<'_>) -> Option<Arc<str>> {
    if method != "tools/call" {
        return None;
    }
    message.get("params")?.get("name")?.as_str().map(Arc::from)
}

async fn handle_response(
    session: &Session,
    direction: Direction,
    message: Message,
) -> Vec<Delivery> {
    let Some(id) = message.id.clone() else {
        return Vec::new();
    };
    // A response answers a request that travelled the other way.
    let Some(request) = session.pending_from(direction.reverse()).remove(&id) else {
        return unmatched_response(session, direction, &message).await;
    };
    // Ends the request's upstream timeout watch.
    request.cancel.cancel();
    request.upstream_trace.end();
    if direction == Direction::ServerToClient {
        tool_latency::observe(session, &request);
    }
    let mut doc = match parse(session, direction, &message, Some(&request.method)).await {
        Ok(doc) => doc,
        Err(refusal) => return refusal,
    };
    let flow = Flow {
        context: context_of(direction, &message, request.method.clone()),
        kind: MessageKind::Response,
        tool: request.tool.clone(),
        called_as: session.tool_called_as(request.tool.as_deref()),
        request_ref: request.step_request_id,
        duration_ms: u64::try_from(request.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        trace: request.trace.clone(),
    };
    traced::answered(&flow.trace, doc.tree().root());
    let cancel = CancellationToken::new();
    let stages = stage::stages(
        &request.method,
        MessageKind::Response,
        session.config.hooks.tools_call,
    );
    match stage::run_all(session, stages, &mut doc, &flow, &cancel, &mut None).await {
        Passage::Through { .. } => {}
        Passage::Blocked { decision, entry_id } => {
            let denial = Denial::of(&decision, entry_id.as_deref());
            let blocked = reply::blocked_response(&id, &request.method, &denial);
            return vec![Delivery::Answer(blocked, id)];
        }
        Passage::Cancelled => return Vec::new(),
    }
    let observed = if inventory::observes(&request.method) {
        inventory::observe_response(session, &request.method, doc.value(), &flow.context).await
    } else {
        None
    };
    if let Some(blocked) = observed {
        let denial = Denial::of(&blocked.decision, blocked.entry_id.as_deref());
        let blocked = reply::blocked_response(&id, &request.method, &denial);
        return vec![Delivery::Answer(blocked, id)];
    }
    if direction == Direction::ServerToClient {
        integrity::screen_list(session, &request.method, &mut doc, &flow.context).await;
    }
    vec![Delivery::Answer(doc.into_bytes(), id)]
}

/// A response to nothing in flight is not passed on: the other side never
/// asked, or already gave up. It is recorded so it is not lost silently.
async fn unmatched_response(
    session: &Session,
    direction: Direction,
    message: &Message,
) -> Vec<Delivery> {
    let context = context_of(direction, message, Cow::Borrowed(""));
    let decision = Decision::deny("response to no request in flight", None);
    let step = uuid::Uuid::new_v4().to_string();
    let detail = "dropped a response whose id matches no request in flight".to_owned();
    let _ = decide::record_event(session, step, &decision, &context, Action::Dropped, detail).await;
    Vec::new()
}

async fn handle_notification(
    session: &Session,
    direction: Direction,
    message: Message,
) -> Vec<Delivery> {
    let method = message.method_name();
    let mut doc = match parse(session, direction, &message, None).await {
        Ok(doc) => doc,
        Err(refusal) => return refusal,
    };
    if method == "notifications/cancelled" && cancels_unforwarded(session, direction, doc.value()) {
        let context = context_of(direction, &message, method.clone());
        let detail = "cancellation of a request that was never forwarded; not passed on".to_owned();
        let step = uuid::Uuid::new_v4().to_string();
        let _ = decide::record_event(
            session,
            step,
            &Decision::allow(),
            &context,
            Action::Dropped,
            detail,
        )
        .await;
        return Vec::new();
    }
    inventory::note_notification(session, &method);
    let flow = Flow {
        context: context_of(direction, &message, method.clone()),
        kind: MessageKind::Notification,
        tool: None,
        called_as: None,
        request_ref: None,
        duration_ms: 0,
        trace: Trace::off(),
    };
    let cancel = CancellationToken::new();
    let stages = stage::stages(
        &method,
        MessageKind::Notification,
        session.config.hooks.tools_call,
    );
    match stage::run_all(session, stages, &mut doc, &flow, &cancel, &mut None).await {
        Passage::Through { .. } => {}
        Passage::Blocked { .. } | Passage::Cancelled => return Vec::new(),
    }
    vec![Delivery::Forward(doc.into_bytes())]
}

/// A cancellation of a request still being decided or held cancels that
/// decision; it is passed on only if the request itself was (DESIGN §4),
/// and then gives back the request's `[[policy.limit]]` places.
fn cancels_unforwarded(session: &Session, direction: Direction, notification: &Value) -> bool {
    let Some(raw_id) = notification["params"].get("requestId") else {
        return false;
    };
    let id = RequestId::from_json(&raw_id.to_string());
    let pending = session.pending_from(direction);
    if pending.was_blocked(&id) {
        return true;
    }
    match pending.get(&id) {
        Some(request) if request.state != PendingState::Forwarded => {
            request.cancel.cancel();
            pending.remove_blocked(&id);
            true
        }
        Some(_) => {
            // The agent gave up on it: its rate-limit places are free even
            // if the server never answers.
            pending.update(&id, |request| request.admitted = None);
            false
        }
        None => false,
    }
}
