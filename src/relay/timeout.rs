//! The per-request upstream timeout (`[limits] upstream_request_timeout_ms`).
//!
//! A request forwarded to the server is watched until it is answered. If
//! the server stays silent past the limit, the request is taken out of the
//! in-flight table, the client gets -32014, the server gets
//! `notifications/cancelled`, and the event is audited and counted. A late
//! answer then matches nothing in flight and is dropped (and recorded) like
//! any unmatched response.
//!
//! One watcher task per session sleeps until the earliest deadline (see
//! [`crate::session::Deadlines`]); a request answered in time costs a
//! queue slot, not a task and a timer.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::decide::{self, MessageContext};
use crate::enforce::Action;
use crate::guardian::Decision;
use crate::jsonrpc::{codes, error_response, RequestId};
use crate::metrics::METRICS;
use crate::session::{Direction, Due, PendingState, Session};

/// One forwarded request to watch.
pub struct Watched {
    /// Its JSON-RPC id.
    pub id: RequestId,
    /// When it was read, which tells it apart from a later request reusing the id.
    pub started: Instant,
    /// Cancelled once the request is answered (or failed), ending the watch.
    pub answered: CancellationToken,
}

/// Watches a request just forwarded to the server, when a limit is set:
/// queues it on the session's deadlines, and starts the session's watcher
/// if none runs.
pub fn watch(session: &Arc<Session>, request: Watched) {
    let Some(limit) = session.config.limits.upstream_request_timeout() else {
        return;
    };
    let due = Due {
        due: Instant::now() + limit,
        id: request.id,
        started: request.started,
        answered: request.answered,
    };
    if session.upstream_deadlines.push(due) {
        tokio::spawn(watcher(Arc::downgrade(session), limit));
    }
}

/// Sleeps until the session's next deadline and fails what is due, until
/// nothing is left to watch. Holds the session weakly, so a session that
/// ended is not kept until its last deadline.
async fn watcher(session: Weak<Session>, limit: Duration) {
    loop {
        let expired = match session.upgrade() {
            Some(session) => {
                let mut expired = session.upstream_deadlines.take_due(Instant::now());
                // Each on its own, as a reply or cancellation held up by
                // one peer must not delay the others.
                for request in expired.requests.drain(..) {
                    let session = Arc::clone(&session);
                    tokio::spawn(async move { expire(&session, &request, limit).await });
                }
                expired
            }
            None => return,
        };
        match expired.next {
            Some(next) => tokio::time::sleep_until(next.into()).await,
            None => return,
        }
    }
}

/// The limit passed: fails the request if it is still the one in flight.
async fn expire(session: &Session, watched: &Due, limit: Duration) {
    let pending = &session.client_pending;
    let still_waiting = pending
        .get(&watched.id)
        .is_some_and(|r| r.started == watched.started && r.state == PendingState::Forwarded);
    if !still_waiting {
        return;
    }
    let Some(request) = pending.remove(&watched.id) else {
        return;
    };
    request.cancel.cancel();
    let limit_ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX);
    let reason = format!("the upstream server did not answer within {limit_ms} ms");
    tracing::warn!(method = %request.method, id = %watched.id.as_json(), "{reason}");
    METRICS
        .upstream_errors_total
        .with_label_values(&[session.upstream.as_str(), "timeout"])
        .inc();
    let context = MessageContext::new(
        Direction::ClientToServer,
        &request.method,
        Some(&watched.id),
    );
    let decision = Decision::deny(reason.clone(), None);
    let step = uuid::Uuid::new_v4().to_string();
    let detail = format!("{reason}; cancelled upstream");
    let _ = decide::record_event(session, step, &decision, &context, Action::Blocked, detail).await;
    let cancel = cancellation(&watched.id, &reason);
    if session.writers.server.send(cancel).await.is_err() {
        tracing::debug!("the server closed before its cancellation could be sent");
    }
    let data = json!({ "timeout_ms": limit_ms });
    let reply = error_response(
        Some(&watched.id),
        codes::UPSTREAM_TIMEOUT,
        &reason,
        Some(data),
    );
    let _ = session.writers.client.send(reply).await;
}

/// `notifications/cancelled` for a request the proxy gave up on.
fn cancellation(id: &RequestId, reason: &str) -> bytes::Bytes {
    let notification = json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": { "requestId": id.to_value(), "reason": reason },
    });
    bytes::Bytes::from(notification.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancellation_names_the_request_exactly() {
        let id = RequestId::from_json("\"a-1\"");
        let sent: serde_json::Value = serde_json::from_slice(&cancellation(&id, "late")).unwrap();
        assert_eq!(sent["method"], "notifications/cancelled");
        assert_eq!(sent["params"]["requestId"], "a-1");
        assert_eq!(sent["params"]["reason"], "late");
    }
}
