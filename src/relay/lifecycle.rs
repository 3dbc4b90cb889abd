//! Session start and end: the handshake with the Guardian and
//! `steps/sessionStart` before the first client message moves, and
//! `steps/sessionEnd` sealing the audit chain when either side closes.
//!
//! A `steps/sessionStart` the audit log cannot take (it is failing, and
//! `[audit] on_failure` is `deny`) does not end the session: it is
//! recorded again before each later client message, and until that works
//! the client's messages are refused, so no chain lacks its start.

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::decide::{self, MessageContext};
use super::traced;
use crate::audit::AuditError;
use crate::config::{PostureSetting, StartupPosture};
use crate::enforce::Action;
use crate::guardian::remote::wire::codes;
use crate::guardian::{Disposition, FailurePosture, GuardianError, Negotiated};
use crate::hooks::lifecycle::{
    session_end_payload, session_start_payload, SessionEndReason, SessionStartInfo,
};
use crate::hooks::{self, HookRequest, Metadata};
use crate::jsonrpc::Frame;
use crate::session::{Direction, Session, UnrecordedStart};
use crate::transport::http::metadata::{META_CLIENT_INFO, META_VERSION};

/// Runs the session start the first time the client sends anything, and
/// later retries recording it if the audit log could not.
///
/// Both run once, or rarely, in the pump that reads every message: they
/// are boxed, so the pump's own future (held by every session, idle ones
/// too) does not carry their kilobytes of state.
pub async fn start_once(session: &Session, first: &Frame) {
    if session.begin() {
        Box::pin(start(session, first)).await;
    } else if session.learned().unrecorded_start.is_some() {
        let _ = Box::pin(record_unrecorded_start(session)).await;
    }
}

/// Whether the session's start is behind it: begun, and recorded.
pub fn started(session: &Session) -> bool {
    session.has_begun() && session.learned().unrecorded_start.is_none()
}

/// Records a session start the audit log refused earlier, if any. An
/// error means it is still unrecorded.
pub async fn record_unrecorded_start(session: &Session) -> Result<(), AuditError> {
    let Some(start) = session.learned().unrecorded_start.take() else {
        return Ok(());
    };
    let context = lifecycle_context("initialize");
    let recorded = decide::record_hook(
        session,
        &start.hook,
        &start.decided,
        &context,
        Action::Recorded,
        None,
    )
    .await;
    if let Err(err) = recorded {
        session.learned().unrecorded_start = Some(start);
        return Err(err);
    }
    Ok(())
}

async fn start(session: &Session, first: &Frame) {
    let (client_info, protocol_version) = client_of(first);
    session.set_metadata(Metadata {
        agent_id: agent_id(session, client_info.as_ref()),
        session_id: session.session_id,
        environment: session.config.hooks.environment.clone(),
        user: session.identity.clone(),
    });
    if let Some(refusal) = handshake(session, protocol_version.as_deref()).await {
        refuse(session, refusal).await;
        return;
    }
    let info = SessionStartInfo {
        transport: session.transport,
        upstream: session.upstream.clone(),
        client_info,
        protocol_version,
        user: session.identity.clone(),
    };
    let hook = HookRequest::new(hooks::SESSION_START, session_start_payload(&info), None);
    let hook = traced::session_start(session, hook);
    let context = lifecycle_context("initialize");
    let Some(decided) = decide::decide(session, &hook, &CancellationToken::new()).await else {
        return;
    };
    let denied = decided.decision.decision == Disposition::Deny;
    let action = if denied {
        Action::Blocked
    } else {
        Action::Recorded
    };
    let recorded = decide::record_hook(session, &hook, &decided, &context, action, None).await;
    if denied {
        session.learned().refused = decided
            .decision
            .reasoning
            .clone()
            .or(Some("session start denied".into()));
    } else if recorded.is_err() {
        session.learned().unrecorded_start = Some(UnrecordedStart { hook, decided });
    }
}

/// The client's `clientInfo` and protocol version: from `initialize`, or,
/// from 2026-07-28 on, from the first request's `_meta`.
fn client_of(first: &Frame) -> (Option<Value>, Option<String>) {
    let Frame::Single(message) = first else {
        return (None, None);
    };
    let Ok(value) = message.to_value() else {
        return (None, None);
    };
    let params = &value["params"];
    let (info, version) = if message.method() == "initialize" {
        (params.get("clientInfo"), params.get("protocolVersion"))
    } else {
        let meta = &params["_meta"];
        (meta.get(META_CLIENT_INFO), meta.get(META_VERSION))
    };
    let version = version.and_then(Value::as_str).map(str::to_owned);
    (info.cloned(), version)
}

/// Marks the session refused and records why.
async fn refuse(session: &Session, reason: String) {
    tracing::warn!(%reason, "session refused");
    let decision = crate::guardian::Decision::deny(reason.clone(), None);
    let step = uuid::Uuid::new_v4().to_string();
    let context = lifecycle_context("initialize");
    let _ = decide::record_event(
        session,
        step,
        &decision,
        &context,
        Action::Blocked,
        reason.clone(),
    )
    .await;
    session.learned().refused = Some(reason);
}

/// `hooks.agent_id`, else the client's `clientInfo.name`.
fn agent_id(session: &Session, client_info: Option<&Value>) -> String {
    session
        .config
        .hooks
        .agent_id
        .clone()
        .or_else(|| {
            client_info
                .and_then(|info| info.get("name"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "unknown-agent".to_owned())
}

/// The ACS handshake (§4). Returns why the session must not run, if it
/// must not: the Guardian refused it (-32000..-32002), or it did not answer
/// and the startup posture is `refuse`. With the posture `proceed` an
/// unanswered handshake leaves the session unguarded, every hook allowed and
/// audited as a bypass (§4.1).
async fn handshake(session: &Session, mcp_version: Option<&str>) -> Option<String> {
    let err = match session
        .guardian
        .hello(session.metadata(), mcp_version)
        .await
    {
        Ok(negotiated) => {
            session.set_negotiated(negotiated);
            return None;
        }
        Err(err) => err,
    };
    if let GuardianError::Refused { code, message } = &err {
        if codes::is_handshake_refusal(*code) {
            return Some(format!(
                "the Guardian refused the session ({code}: {message})"
            ));
        }
    }
    match session.config.guardian.startup_posture {
        StartupPosture::Refuse => Some(format!(
            "the Guardian handshake failed ({err}) and the startup posture is refuse"
        )),
        StartupPosture::Proceed => {
            tracing::warn!(%err, "the Guardian handshake failed; the session runs unguarded");
            // Unguarded hooks resolve by the failure posture: a local `deny`
            // still makes every one of them a deny.
            let local = match session.config.guardian.on_decision_failure {
                Some(PostureSetting::Deny) => FailurePosture::Deny,
                _ => FailurePosture::Proceed,
            };
            session.set_negotiated(Negotiated {
                on_decision_failure: local,
                unguarded: Some(format!("the Guardian handshake failed: {err}")),
                ..Negotiated::default()
            });
            None
        }
    }
}

/// Seals the session's audit chain with `steps/sessionEnd`.
pub async fn end(session: &Session, reason: SessionEndReason) {
    if !session.finish() {
        return;
    }
    let head = session.audit.head().await;
    let payload = session_end_payload(reason, head.as_deref());
    let hook = traced::session_step(session, HookRequest::new(hooks::SESSION_END, payload, None));
    let Some(decided) = decide::decide(session, &hook, &CancellationToken::new()).await else {
        return;
    };
    let context = lifecycle_context("");
    if let Err(err) =
        decide::record_hook(session, &hook, &decided, &context, Action::Recorded, None).await
    {
        tracing::error!(%err, "could not seal the audit chain");
    }
    hook.trace.end();
    traced::session_ended(session);
    session.guardian.close_session(session.metadata());
}

fn lifecycle_context(mcp_method: &str) -> MessageContext {
    MessageContext::new(Direction::ClientToServer, mcp_method, None)
}
