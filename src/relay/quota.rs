//! Requests refused for a limit: the `[limits]` caps on requests in flight
//! ([`refuse_in_flight`]) and the `[[policy.limit]]` rate limits
//! ([`admit`]).
//!
//! Rate limits are checked when a request is read, before any hook is built:
//! a refused call costs no Guardian decision and never reaches the server,
//! and a call the Guardian would deny still counts (what is limited is
//! how often an agent may try). The places a call takes under concurrency
//! limits are held by its in-flight entry, so they are given back however
//! the call ends: answered, blocked, cancelled, timed out or abandoned
//! with its session.
//!
//! A refusal is answered with JSON-RPC error -32012 whose message names
//! the limit and whose `data` carries `limit` and `retry_after_ms`; it is
//! recorded in the audit chain (`limit` names it) and counted in
//! `acs_proxy_rate_limited_total{limit}`.

use std::sync::Arc;

use serde_json::json;

use super::decide::{self, MessageContext};
use super::delivery::Delivery;
use super::limits_in_force;
use crate::enforce::Action;
use crate::guardian::Decision;
use crate::hooks::{self, mcp};
use crate::jsonrpc::{codes, error_response, Message, RequestId};
use crate::limits::LimitExceeded;
use crate::metrics::RATE_LIMITED;
use crate::policy::limit::{LimitedCall, RateLimited};
use crate::session::{Direction, Session};

/// The reason code of an audit entry for a rate-limited call.
pub const RATE_LIMITED_REASON: &str = "rate_limited";

/// Counts the agent's request `id` against the limits, keeping what it
/// holds in its in-flight entry; `Err` is the reply to a refused request.
///
/// `initialize` is never limited: refusing it would leave a session that
/// can do nothing, not a slower one.
pub async fn admit(
    session: &Session,
    direction: Direction,
    id: &RequestId,
    mcp_method: &str,
    tool: Option<&str>,
) -> Result<(), Vec<Delivery>> {
    if direction != Direction::ClientToServer || mcp_method == "initialize" {
        return Ok(());
    }
    let wrapped = mcp::wrapped_method(mcp_method);
    let hooks: &[&str] = if mcp_method == "tools/call" {
        &[wrapped.as_str(), hooks::TOOL_CALL_REQUEST]
    } else {
        &[wrapped.as_str()]
    };
    let metadata = session.metadata();
    let session_id = session.session_id.to_string();
    let called_as = session.tool_called_as(tool);
    let call = LimitedCall {
        hooks,
        tool,
        called_as: called_as.as_deref(),
        user: metadata.user.as_deref(),
        agent: &metadata.agent_id,
        session: &session_id,
    };
    let pending = session.pending_from(direction);
    let admitted = limits_in_force::with_limits(session, |limits| {
        (!limits.is_empty()).then(|| limits.admit(&call))
    });
    let Some(admitted) = admitted else {
        return Ok(());
    };
    match admitted {
        Ok(admitted) => {
            let admitted = Arc::new(admitted);
            pending.update(id, |request| request.admitted = Some(admitted));
            Ok(())
        }
        Err(refused) => {
            pending.remove_blocked(id);
            Err(refuse(session, direction, id, mcp_method, &refused).await)
        }
    }
}

/// Counts, records and answers a refused call.
async fn refuse(
    session: &Session,
    direction: Direction,
    id: &RequestId,
    mcp_method: &str,
    refused: &RateLimited,
) -> Vec<Delivery> {
    RATE_LIMITED.with_label_values(&[refused.limit()]).inc();
    let reason = refused.to_string();
    let decision = Decision::deny(reason.clone(), Some(RATE_LIMITED_REASON));
    let context = MessageContext::new(direction, mcp_method, Some(id));
    let step = uuid::Uuid::new_v4().to_string();
    let detail = format!("limit {:?} reached; request refused", refused.limit());
    let recorded =
        decide::record_limit_refusal(session, step, &decision, &context, refused.limit(), detail)
            .await;
    if let Err(err) = recorded {
        tracing::debug!(%err, "a rate-limit refusal could not be recorded");
    }
    let data = json!({
        "limit": refused.limit(),
        "retry_after_ms": refused.retry_after_ms(),
    });
    vec![Delivery::Reply(error_response(
        Some(id),
        codes::LIMIT_EXCEEDED,
        &reason,
        Some(data),
    ))]
}

/// A request over an in-flight limit is answered at once with -32012
/// naming the limit, counted, and recorded; it never reaches the Guardian
/// or the server.
pub async fn refuse_in_flight(
    session: &Session,
    direction: Direction,
    message: &Message,
    limit: LimitExceeded,
) -> Vec<Delivery> {
    limit.count();
    let reason = limit.to_string();
    let decision = Decision::deny(reason.clone(), Some("limit_exceeded"));
    let context = MessageContext::new(direction, message.method(), message.id.as_ref());
    let step = uuid::Uuid::new_v4().to_string();
    let detail = format!("{} limit reached; request refused", limit.label());
    let _ = decide::record_event(session, step, &decision, &context, Action::Blocked, detail).await;
    let data = json!({ "limit": limit.label() });
    vec![Delivery::Reply(error_response(
        message.id.as_ref(),
        limit.code(),
        &reason,
        Some(data),
    ))]
}
