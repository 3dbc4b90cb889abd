//! The request path's spans (ACS-Trace): where an MCP request's server
//! span starts, how its trip upstream is traced and its context passed on,
//! and what the Guardian's answer adds. Every function is a no-op when
//! tracing is off; the flow calls them and knows nothing more of tracing.

use crate::enforce::MessageDoc;
use crate::guardian::{Decision, GuardianError};
use crate::hooks::HookRequest;
use crate::jsonrpc::{BorrowedJson, Message};
use crate::session::{Direction, Session};
use crate::telemetry::{self, spans, Carrier, Trace};

/// The server span of a request from the agent: continuing the agent's
/// trace when the request came with a context (`carrier`, from an HTTP
/// header, or `params._meta.traceparent`), else under the session's span.
/// Requests from the server are not traced.
pub fn request(
    session: &Session,
    direction: Direction,
    carrier: Option<&Carrier>,
    message: &Message,
    doc: &MessageDoc,
    tool: Option<&str>,
) -> Trace {
    if !telemetry::enabled() || direction != Direction::ClientToServer {
        return Trace::off();
    }
    let in_meta;
    let carrier = match carrier {
        Some(carrier) => Some(carrier),
        None => {
            in_meta = Carrier::from_message(doc.value());
            in_meta.as_ref()
        }
    };
    let id = message
        .id
        .as_ref()
        .map(|id| id.as_json().trim_matches('"').to_owned())
        .unwrap_or_default();
    spans::request(
        carrier,
        &session.session_span(),
        message.method(),
        &session.session_id.to_string(),
        &id,
        tool,
    )
}

/// The request's span as it is forwarded: a client span for its trip to
/// the server, whose context goes into `params._meta` (a network client
/// also sends it as `traceparent`/`tracestate` headers). Only with
/// tracing on does the message change.
pub fn forward(
    session: &Session,
    request: &Trace,
    method: &str,
    tool: Option<&str>,
    doc: &mut MessageDoc,
) -> Trace {
    let upstream = spans::upstream(request, method, tool, &session.upstream);
    if let Some(carrier) = upstream.carrier() {
        carrier.write_meta(doc.value_mut());
        doc.mark_rewritten();
    }
    upstream
}

/// A blocked request's span records why.
pub fn blocked(trace: &Trace, decision: &Decision) {
    trace.fail(|| {
        decision
            .reasoning
            .clone()
            .unwrap_or_else(|| format!("blocked: {}", decision.decision.as_str()))
    });
}

/// The server's answer: an error answer marks the request's span failed.
pub fn answered(trace: &Trace, response: &BorrowedJson<'_>) {
    if let Some(error) = response.get("error") {
        trace.fail(|| {
            error
                .get("message")
                .and_then(BorrowedJson::as_str)
                .unwrap_or("the server answered with an error")
                .to_owned()
        });
    }
}

/// Ends the Guardian call's span with what it answered.
pub fn evaluated(evaluation: &Trace, result: &Result<Decision, GuardianError>) {
    match result {
        Ok(decision) => evaluation.annotate(|| {
            vec![opentelemetry::KeyValue::new(
                "acs.decision",
                decision.decision.as_str(),
            )]
        }),
        Err(err) => evaluation.fail(|| err.to_string()),
    }
    evaluation.end();
}

/// A session-level hook (`steps/sessionEnd`, `agbom/*`) with its step span
/// under the session's.
pub fn session_step(session: &Session, hook: HookRequest) -> HookRequest {
    let step = spans::step(&session.session_span(), &hook, session.metadata());
    hook.traced(step)
}

/// `steps/sessionStart` with the session's span, which it opens: the
/// parent of the session-level steps, ended by [`session_ended`].
pub fn session_start(session: &Session, hook: HookRequest) -> HookRequest {
    let span = spans::session(&hook, session.metadata());
    if span.is_on() {
        let _ = session.session_trace.set(span.clone());
    }
    hook.traced(span)
}

/// Ends the session's span, after `steps/sessionEnd`.
pub fn session_ended(session: &Session) {
    session.session_span().end();
}
