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
//! - [`pending`]: a leg's requests in flight.
//! - [`answers`]: where a leg's answers go, straight to the agent when
//!   nothing of the leg's is ahead of them.
//! - [`splice`]: routed calls and their answers, changed in their own bytes.
//! - [`batch`]: JSON-RPC batches, routed member by member, answered as one.
//! - [`dispatch`]: the agent's requests, routed by name or URI.
//! - [`router`]: the routing state; forwarding, notifications, answers.
//! - [`listing`]: merged, paginated lists.
//! - [`denied`]: tools the rules deny outright, hidden by either name.
//! - [`names`]: prefixes, `tools` filters and the name book.
//! - [`uris`]: resource URIs, and gateway URIs where two upstreams share one.
//! - [`merge`]: the merged `initialize` result and list cursors.
//! - [`upstream_events`]: upstream requests, notifications and ends.
//! - [`opening`]: connecting an upstream and sending it `initialize`.
//! - [`own_session`]: the virtual server's own ACS session and its one
//!   `agbom/snapshot` of every upstream.
//! - [`slots`]: each upstream's leg, while it serves.
//! - [`restart`]: upstreams that died or did not start, brought back with
//!   a backoff while the session runs.
//! - [`probe`]: the start-up check of `prefix = "never"`.

mod answers;
mod batch;
mod context;
mod denied;
mod dispatch;
mod leg;
mod listing;
mod merge;
mod names;
mod opening;
mod own_session;
mod pending;
pub mod probe;
mod restart;
mod router;
mod slots;
mod splice;
mod upstream_events;
mod uris;

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::future::join_all;
use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

pub use context::AggregateContext;
use leg::{AgentSide, Leg, LegEvent};
use merge::Initialized;
use opening::{finish_closing, open_legs};
use own_session::Inventoried;
use restart::{Restarting, Restarts};
use router::Router;
use slots::LegSlots;

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
    let context = Arc::new(context);
    let client = downstream.writer.clone();
    let Some(initialize) = await_initialize(&mut downstream, &client, &stop).await else {
        return SessionExit::Stopped;
    };
    let agent = Arc::new(AgentSide {
        transport: downstream.transport,
        identity: downstream.identity.clone(),
        client_address: downstream.client_address.clone(),
        upstream_headers: std::mem::take(&mut downstream.upstream_headers),
        client: client.clone(),
    });
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
    let legs: Vec<(Option<Arc<Leg>>, Value)> = opened
        .into_iter()
        .map(|(leg, result)| (leg, result["capabilities"].clone()))
        .collect();
    let (verdict, inventory) = watch::channel(Inventoried::Pending);
    let reporting = tokio::spawn(own_session::report_inventory(
        own.clone(),
        endpoints(&context, &legs),
        verdict,
    ));
    let not_started: Vec<usize> = (0..legs.len())
        .filter(|index| legs[*index].0.is_none())
        .collect();
    let denied_tools = denied::DeniedTools::new(&context.config, agent.identity.clone());
    let router = Arc::new(Router::new(
        context.aggregate.clone(),
        LegSlots::new(legs),
        client.clone(),
        inventory,
        denied_tools,
        context.config.limits.max_json_depth,
    ));
    let mut restarts = Restarts::new(
        Restarting {
            context: context.clone(),
            agent,
            initialize: reinitialize(&initialize, &result),
            events,
            router: router.clone(),
        },
        &stop,
    );
    router.reply(&id, result).await;
    for index in not_started {
        restarts.schedule(index, None);
    }
    let exit = serve(
        &router,
        &mut downstream,
        &mut leg_events,
        &mut restarts,
        &stop,
    )
    .await;
    restarts.stop().await;
    join_all(router.legs.all().iter().map(|leg| leg.close())).await;
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
fn endpoints(
    context: &AggregateContext,
    legs: &[(Option<Arc<Leg>>, Value)],
) -> Vec<(Arc<Leg>, String)> {
    legs.iter()
        .filter_map(|(leg, _)| leg.as_ref())
        .map(|leg| (leg.clone(), endpoint_of(context, &leg.name)))
        .collect()
}

/// The endpoint the Guardian knows the upstream `name` by.
fn endpoint_of(context: &AggregateContext, name: &str) -> String {
    context
        .config
        .upstreams
        .iter()
        .find(|u| u.name == name)
        .map_or_else(|| format!("upstream:{name}"), |u| u.endpoint_uri())
}

/// The agent's `initialize` as an upstream that comes back is sent it:
/// the agent's capabilities and the protocol version the session agreed.
fn reinitialize(initialize: &Value, result: &Value) -> Value {
    let mut again = initialize.clone();
    if let Some(version) = result.get("protocolVersion") {
        again["params"]["protocolVersion"] = version.clone();
    }
    again
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
            Ok(frame) => frame
                .into_bytes()
                .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok()),
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

/// Relays between the agent and the legs until the agent closes or
/// `stop` fires.
async fn serve(
    router: &Arc<Router>,
    downstream: &mut Downstream,
    leg_events: &mut mpsc::UnboundedReceiver<LegEvent>,
    restarts: &mut Restarts,
    stop: &CancellationToken,
) -> SessionExit {
    let mut legs_open = true;
    loop {
        tokio::select! {
            frame = downstream.frames.next() => match frame {
                Some(Ok(LineFrame::Traced { line, carrier })) => {
                    from_client(router, line, Some(&carrier)).await
                }
                Some(Ok(frame)) => match frame.into_bytes() {
                    Some(bytes) => from_client(router, bytes, None).await,
                    None => {
                        router.reply_error(&Value::Null, codes::INVALID_REQUEST, "the message is too large").await;
                    }
                },
                Some(Err(_)) | None => return SessionExit::ClientClosed,
            },
            event = leg_events.recv(), if legs_open => match event {
                Some(LegEvent::Message(index, message, ahead)) => {
                    upstream_events::message(router, index, message).await;
                    drop(ahead);
                }
                Some(LegEvent::Answer(reply, ahead)) => {
                    // The agent may be gone; its session ends with it.
                    let _ = router.client.send(reply).await;
                    drop(ahead);
                }
                Some(LegEvent::Closed(index)) => {
                    if let Some(ended) = upstream_events::closed(router, index).await {
                        restarts.schedule(index, Some(ended));
                    }
                }
                None => legs_open = false,
            },
            () = stop.cancelled() => return SessionExit::Stopped,
        }
    }
}

/// One frame from the agent, with the trace context its transport
/// carried (a `traceparent` header), if any.
async fn from_client(router: &Arc<Router>, bytes: Bytes, carrier: Option<&Carrier>) {
    if carrier.is_none() && dispatch::route_call(router, &bytes).await {
        return;
    }
    let message = match serde_json::from_slice::<Value>(&bytes) {
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
