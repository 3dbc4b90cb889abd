//! A virtual server: one agent session over the several upstreams of an
//! `[[aggregate]]`, their tools and prompts merged under prefixed names.
//!
//! Each upstream is reached through a relay session of its own (a *leg*),
//! so its hooks, Guardian decisions, enforcement and audit chain are those
//! of a plain route and name the upstream and the tool as its server knows
//! it. The router in front of the legs speaks to the agent:
//!
//! ```text
//! agent ⇄ router ─┬─ leg: relay session ⇄ upstream A
//!                 ├─ leg: relay session ⇄ upstream B
//!                 └─ leg: relay session ⇄ upstream C
//! ```
//!
//! - [`leg`]: one upstream's relay session behind in-memory channels.
//! - [`batch`]: JSON-RPC batches, routed member by member, answered as one.
//! - [`dispatch`]: the agent's requests, routed by name or URI.
//! - [`router`]: the routing state; forwarding, notifications, answers.
//! - [`listing`]: merged, paginated lists.
//! - [`denied`]: tools the rules deny outright, hidden by either name.
//! - [`names`]: prefixes, `tools` filters and the name book.
//! - [`uris`]: resource URIs, and gateway URIs where two upstreams share one.
//! - [`merge`]: the merged `initialize` result and list cursors.
//! - [`upstream_events`]: upstream requests, notifications and ends.
//! - [`own_session`]: the virtual server's own ACS session and its one
//!   `agbom/snapshot` of every upstream.
//! - [`probe`]: the start-up check of `prefix = "never"`.

mod batch;
mod context;
mod denied;
mod dispatch;
mod leg;
mod listing;
mod merge;
mod names;
mod own_session;
pub mod probe;
mod router;
mod upstream_events;
mod uris;

use std::sync::{Arc, Mutex};

use futures_util::future::join_all;
use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

pub use context::AggregateContext;
use leg::{AgentSide, Leg, LegEvent};
use merge::Initialized;
use own_session::Inventoried;
use router::Router;

use crate::hooks::lifecycle::SessionEndReason;
use crate::jsonrpc::codes;
use crate::relay::SessionExit;
use crate::telemetry::Carrier;
use crate::transport::downstream::Downstream;
use crate::transport::upstream::UpstreamExit;
use crate::transport::writer::FrameWriter;
use crate::transport::LineFrame;

/// Runs one agent session of a virtual server until the agent closes or
/// `stop` fires; every upstream's relay session is ended in order (each
/// seals its audit chain) before it returns.
pub async fn run(
    context: AggregateContext,
    mut downstream: Downstream,
    stop: CancellationToken,
) -> SessionExit {
    let client = downstream.writer.clone();
    let Some(initialize) = await_initialize(&mut downstream, &client, &stop).await else {
        return SessionExit::Stopped;
    };
    let agent = AgentSide {
        transport: downstream.transport,
        identity: downstream.identity.clone(),
        client_address: downstream.client_address.clone(),
        upstream_headers: std::mem::take(&mut downstream.upstream_headers),
    };
    // Unbounded on purpose: the router may wait on a leg's input while that
    // leg's relay waits to hand the router an event; a bounded queue here
    // could close that circle. The legs' own limits bound their requests.
    let id = initialize["id"].clone();
    let own = match own_session::start(&context, &agent, &initialize).await {
        Ok(own) => own,
        Err(reason) => return refuse_session(&client, &id, &reason).await,
    };
    let (events, mut leg_events) = mpsc::unbounded_channel();
    let closing = Mutex::new(Vec::new());
    let opened = open_legs(&context, &agent, &initialize, &events, &stop, &closing).await;
    drop(events);
    let started: Vec<Initialized<'_>> = opened
        .iter()
        .filter_map(|(leg, result)| {
            Some(Initialized {
                name: &leg.as_ref()?.name,
                result,
            })
        })
        .collect();
    if started.is_empty() {
        let exit = refuse_start(&client, &id, &context.aggregate.name).await;
        finish_closing(closing).await;
        own_session::end(&own, SessionEndReason::Error).await;
        return exit;
    }
    let result = merge::initialize_result(&context.aggregate.name, &started);
    let capabilities = opened
        .iter()
        .map(|(_, result)| result["capabilities"].clone())
        .collect();
    let legs: Vec<Option<Arc<Leg>>> = opened.into_iter().map(|(leg, _)| leg).collect();
    let (verdict, inventory) = watch::channel(Inventoried::Pending);
    let reporting = tokio::spawn(own_session::report_inventory(
        own.clone(),
        endpoints(&context, &legs),
        verdict,
    ));
    let denied_tools = denied::DeniedTools::new(&context.config, agent.identity.clone());
    let router = Arc::new(Router::new(
        context.aggregate,
        legs,
        capabilities,
        client.clone(),
        inventory,
        denied_tools,
    ));
    router.reply(&id, result).await;
    let exit = serve(&router, &mut downstream, &mut leg_events, &stop).await;
    join_all(router.legs.iter().flatten().map(|leg| leg.close())).await;
    // A snapshot still waiting for an upstream is not sent any more.
    reporting.abort();
    client.close();
    finish_closing(closing).await;
    let reason = match exit {
        SessionExit::ClientClosed => SessionEndReason::Completed,
        SessionExit::Stopped => SessionEndReason::Cancelled,
        SessionExit::ServerExited(_) => SessionEndReason::Error,
    };
    own_session::end(&own, reason).await;
    exit
}

/// Each started leg with its upstream's endpoint, for the snapshot.
fn endpoints(context: &AggregateContext, legs: &[Option<Arc<Leg>>]) -> Vec<(Arc<Leg>, String)> {
    legs.iter()
        .flatten()
        .map(|leg| {
            let endpoint = context
                .config
                .upstreams
                .iter()
                .find(|u| u.name == leg.name)
                .map_or_else(|| format!("upstream:{}", leg.name), |u| u.endpoint_uri());
            (leg.clone(), endpoint)
        })
        .collect()
}

/// The Guardian refused the virtual server's session: the agent's
/// `initialize` is refused and no upstream is started.
async fn refuse_session(client: &FrameWriter, id: &Value, reason: &str) -> SessionExit {
    let text = format!("acs-proxy: the session was refused: {reason}");
    router::send(client, &router::error(id, codes::POLICY_DENIED, &text)).await;
    client.close();
    SessionExit::ServerExited(UpstreamExit::Closed(reason.to_owned()))
}

/// No upstream started: the agent's `initialize` is answered -32011 and
/// the session ends.
async fn refuse_start(client: &FrameWriter, id: &Value, aggregate: &str) -> SessionExit {
    let reason = format!("no upstream of the virtual server {aggregate:?} could be started");
    let refusal = router::error(id, codes::UPSTREAM_UNAVAILABLE, &reason);
    router::send(client, &refusal).await;
    client.close();
    SessionExit::ServerExited(UpstreamExit::Closed(reason))
}

/// Waits until the legs that failed to start have shut their servers down.
async fn finish_closing(closing: Mutex<Vec<JoinHandle<()>>>) {
    let closing = closing
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    join_all(closing).await;
}

/// Waits for the agent's `initialize`; what comes before it is answered
/// with an error (a `ping` with an empty result).
async fn await_initialize(
    downstream: &mut Downstream,
    client: &FrameWriter,
    stop: &CancellationToken,
) -> Option<Value> {
    loop {
        let frame = tokio::select! {
            frame = downstream.frames.next() => frame,
            () = stop.cancelled() => return None,
        };
        let message = match frame? {
            Ok(LineFrame::Line(bytes) | LineFrame::Traced { line: bytes, .. }) => {
                serde_json::from_slice::<Value>(&bytes).ok()
            }
            Ok(LineFrame::TooLong) => None,
            Err(_) => return None,
        };
        let Some(message) = message else { continue };
        match (message["method"].as_str(), message.get("id")) {
            (Some("initialize"), Some(_)) => return Some(message),
            (Some("ping"), Some(id)) => {
                router::send(client, &json!({"jsonrpc": "2.0", "id": id, "result": {}})).await;
            }
            (Some(_), Some(id)) => {
                let text = "the session is not initialized";
                router::send(client, &router::error(id, codes::INVALID_REQUEST, text)).await;
            }
            _ => {}
        }
    }
}

/// Opens every upstream at once, each within the start-up timeout, and
/// sends it the agent's `initialize`. An upstream that fails is left out
/// (`None`) and the session goes on with the others.
async fn open_legs(
    context: &AggregateContext,
    agent: &AgentSide,
    initialize: &Value,
    events: &mpsc::UnboundedSender<LegEvent>,
    stop: &CancellationToken,
    closing: &Mutex<Vec<JoinHandle<()>>>,
) -> Vec<(Option<Arc<Leg>>, Value)> {
    let deadline = Instant::now() + Duration::from_millis(context.aggregate.startup_timeout_ms);
    let opens = context
        .aggregate
        .upstreams
        .iter()
        .enumerate()
        .map(|(index, name)| async move {
            let config = context.config.upstreams.iter().find(|u| &u.name == name)?;
            let opening = LegOpening {
                index,
                context,
                agent,
                events,
                stop,
                deadline,
                closing,
            };
            match open_leg(opening, config, initialize).await {
                Ok(opened) => Some(opened),
                Err(reason) => {
                    tracing::warn!(upstream = %name, %reason, "an upstream of a virtual server did not start");
                    None
                }
            }
        });
    join_all(opens)
        .await
        .into_iter()
        .map(|opened| match opened {
            Some((leg, result)) => (Some(leg), result),
            None => (None, Value::Null),
        })
        .collect()
}

/// What opening one leg needs besides its upstream.
struct LegOpening<'a> {
    index: usize,
    context: &'a AggregateContext,
    agent: &'a AgentSide,
    events: &'a mpsc::UnboundedSender<LegEvent>,
    stop: &'a CancellationToken,
    /// When the upstream must have answered `initialize`.
    deadline: Instant,
    /// Where the closing of a leg that failed is kept, to be awaited.
    closing: &'a Mutex<Vec<JoinHandle<()>>>,
}

/// Connects one upstream and initializes it before the deadline; a leg
/// that misses it is closed (its server shut down), not left running.
async fn open_leg(
    opening: LegOpening<'_>,
    config: &crate::config::UpstreamConfig,
    initialize: &Value,
) -> Result<(Arc<Leg>, Value), String> {
    let late = || "it did not start in time".to_owned();
    let leg = tokio::time::timeout_at(
        opening.deadline,
        Leg::open(
            opening.index,
            config.clone(),
            opening.context,
            opening.agent,
            opening.events.clone(),
            opening.stop.child_token(),
        ),
    )
    .await
    .map_err(|_| late())??;
    let answered = async {
        let answer = leg
            .request("initialize", initialize.get("params").cloned())
            .await
            .map_err(|err| err.to_string())?;
        answer
            .await
            .map_err(|_| "it ended during initialize".to_owned())
    };
    let reply = tokio::time::timeout_at(opening.deadline, answered)
        .await
        .unwrap_or_else(|_| Err(late()));
    match reply {
        Ok(reply) if reply.get("result").is_some() => Ok((leg, reply["result"].clone())),
        failed => {
            let closed = tokio::spawn(async move { leg.close().await });
            opening
                .closing
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(closed);
            Err(match failed {
                Ok(reply) => format!("initialize was refused: {}", reply["error"]),
                Err(reason) => reason,
            })
        }
    }
}

/// Relays between the agent and the legs until the agent closes or
/// `stop` fires.
async fn serve(
    router: &Arc<Router>,
    downstream: &mut Downstream,
    leg_events: &mut mpsc::UnboundedReceiver<LegEvent>,
    stop: &CancellationToken,
) -> SessionExit {
    let mut legs_open = true;
    loop {
        tokio::select! {
            frame = downstream.frames.next() => match frame {
                Some(Ok(LineFrame::Line(bytes))) => from_client(router, &bytes, None).await,
                Some(Ok(LineFrame::Traced { line, carrier })) => {
                    from_client(router, &line, Some(&carrier)).await
                }
                Some(Ok(LineFrame::TooLong)) => {
                    router.reply_error(&Value::Null, codes::INVALID_REQUEST, "the message is too large").await;
                }
                Some(Err(_)) | None => return SessionExit::ClientClosed,
            },
            event = leg_events.recv(), if legs_open => match event {
                Some(LegEvent::Message(index, message)) => {
                    upstream_events::message(router, index, message).await;
                }
                Some(LegEvent::Closed(index)) => upstream_events::closed(router, index).await,
                None => legs_open = false,
            },
            () = stop.cancelled() => return SessionExit::Stopped,
        }
    }
}

/// One frame from the agent, with the trace context its transport
/// carried (a `traceparent` header), if any.
async fn from_client(router: &Arc<Router>, bytes: &[u8], carrier: Option<&Carrier>) {
    let message = match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(message)) => Value::Object(message),
        Ok(Value::Array(mut members)) if !members.is_empty() => {
            for member in &mut members {
                continue_trace(member, carrier);
            }
            return from_client_batch(router, members).await;
        }
        Ok(Value::Array(_)) => {
            let text = "an empty JSON-RPC batch";
            return router
                .reply_error(&Value::Null, codes::INVALID_REQUEST, text)
                .await;
        }
        Ok(_) => {
            return router
                .reply_error(
                    &Value::Null,
                    codes::INVALID_REQUEST,
                    "not a JSON-RPC message",
                )
                .await
        }
        Err(err) => {
            let text = format!("parse error: {err}");
            return router
                .reply_error(&Value::Null, codes::PARSE_ERROR, &text)
                .await;
        }
    };
    let mut message = message;
    continue_trace(&mut message, carrier);
    from_client_message(router, message).await;
}

/// A request that came with a trace context in its transport carries it
/// on to its upstream's relay session in `params._meta`, where that
/// session reads it (and replaces it with its own before the server sees
/// it), so the request's spans continue the agent's trace.
fn continue_trace(message: &mut Value, carrier: Option<&Carrier>) {
    if let Some(carrier) = carrier {
        if message.get("method").is_some() && message.get("id").is_some() {
            carrier.write_meta(message);
        }
    }
}

/// One message from the agent, alone or a member of a batch.
async fn from_client_message(router: &Arc<Router>, message: Value) {
    match (message.get("method").is_some(), message.get("id").is_some()) {
        (true, true) => dispatch::client_request(router, message).await,
        (true, false) => router.client_notification(message).await,
        (false, _) => router.client_response(message).await,
    }
}

/// A batch from the agent: its members are routed in order and the
/// replies to its requests go back as one array.
async fn from_client_batch(router: &Arc<Router>, members: Vec<Value>) {
    let members = batch::sort(members);
    if let Some(replies) = router.batches.open(&members.ids, members.early) {
        router.to_client(&replies).await;
    }
    for member in members.routed {
        from_client_message(router, member).await;
    }
}
