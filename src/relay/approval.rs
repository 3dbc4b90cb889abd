//! Asking the human for an ASK decision through the agent's client, and
//! resolving any held decision (DESIGN §3.7). The rules of a hold (the
//! elicitation request, how an answer reads, the deferral budget) are in
//! `enforce::approval`; this module drives them over the session.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::enforce::approval::{
    defer, elicitation_request, read_elicitation_answer, timed_out, Resolution, DEFAULT_ASK_TIMEOUT,
};
use crate::guardian::{Decision, Disposition};
use crate::hooks::HookRequest;
use crate::session::Session;

/// Resolves an `ask` or `defer` decision into allow or deny. Returns `None`
/// if the step was cancelled while held.
pub async fn resolve(
    session: &Session,
    held: &Decision,
    hook: &HookRequest,
    cancel: &CancellationToken,
) -> Option<Resolution> {
    match held.decision {
        Disposition::Ask => ask(session, held, hook, cancel).await,
        Disposition::Defer => defer(&session.deferrals, held, cancel).await,
        _ => Some(Resolution::new(held.clone(), "not held")),
    }
}

async fn ask(
    session: &Session,
    held: &Decision,
    hook: &HookRequest,
    cancel: &CancellationToken,
) -> Option<Resolution> {
    if !session.learned().client_elicitation {
        let reasoning = format!(
            "approval required ({}) but the client did not declare the MCP elicitation capability, so no approver can be asked",
            held.reasoning.as_deref().unwrap_or("ask")
        );
        return Some(Resolution::new(
            Decision::deny(reasoning, Some("approver_unavailable")),
            "ask: approver_unavailable",
        ));
    }
    let details = held.ask_details.clone().unwrap_or_default();
    let timeout = details
        .timeout_seconds
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_ASK_TIMEOUT);
    let on_timeout = details.timeout_disposition.unwrap_or(Disposition::Deny);
    let question = details
        .question
        .clone()
        .or_else(|| held.reasoning.clone())
        .unwrap_or_else(|| "Approve this action?".into());
    let (id, answer) = session.proxy_to_client.register();
    let request = elicitation_request(id.as_json(), &question, hook);
    if session.writers.client.send(request.into()).await.is_err() {
        return Some(Resolution::new(
            Decision::deny(
                "the client went away before approving",
                Some("approver_unavailable"),
            ),
            "ask: client closed",
        ));
    }
    let outcome = tokio::select! {
        _ = cancel.cancelled() => None,
        answer = tokio::time::timeout(timeout, answer) => Some(answer),
    };
    let Some(outcome) = outcome else {
        session.proxy_to_client.forget(&id);
        return None;
    };
    Some(match outcome {
        Ok(Ok(bytes)) => read_elicitation_answer(&bytes),
        _ => {
            session.proxy_to_client.forget(&id);
            timed_out(on_timeout, "ask: approver did not answer in time")
        }
    })
}
