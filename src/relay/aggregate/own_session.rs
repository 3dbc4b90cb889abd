//! The virtual server's own ACS session: the agent's one session as the
//! Guardian sees it, beside the relay session of each upstream.
//!
//! It starts before any upstream is opened (a Guardian that refuses it
//! refuses the agent), carries the one `agbom/snapshot` that lists every
//! upstream as its own component with its tools, and is sealed after the
//! upstreams' sessions. The upstreams' sessions send no snapshot of their
//! own (each hands its inventory over instead) but keep reporting their
//! own changes with `agbom/changed`, under the same component ids, so no
//! component is reported twice.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::future::join_all;
use serde_json::Value;
use tokio::sync::watch;
use uuid::Uuid;

use super::context::AggregateContext;
use super::leg::{AgentSide, Leg};
use crate::hooks::agbom::Inventory;
use crate::hooks::lifecycle::SessionEndReason;
use crate::hooks::now_rfc3339;
use crate::jsonrpc::peek_frame;
use crate::relay::{inventory, lifecycle};
use crate::session::{Session, Writers};
use crate::transport::writer::FrameWriter;

/// Where the virtual server's snapshot stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Inventoried {
    /// Not every upstream has handed its inventory over yet.
    Pending,
    /// The Guardian took the snapshot.
    Allowed,
    /// The Guardian refused it: the session serves nothing more.
    Refused(String),
}

/// Starts the virtual server's session (`steps/sessionStart` for the
/// agent's `initialize`); the reason when it is refused.
pub(super) async fn start(
    context: &AggregateContext,
    agent: &AgentSide,
    initialize: &Value,
) -> Result<Arc<Session>, String> {
    let name = &context.aggregate.name;
    let first = context
        .aggregate
        .upstreams
        .iter()
        .find_map(|upstream| {
            context
                .config
                .upstreams
                .iter()
                .find(|u| &u.name == upstream)
        })
        .ok_or_else(|| format!("the virtual server {name:?} names no configured upstream"))?;
    // The session stands for the aggregate: its route is the aggregate's
    // name and its endpoint the aggregate itself.
    let mut route = first.clone();
    route.name.clone_from(name);
    let session_id = Uuid::new_v4();
    let chain = context
        .audit
        .session_of(&session_id.to_string(), agent.identity.clone());
    // Nothing is relayed through this session: its writers lead nowhere.
    let writers = Writers {
        client: FrameWriter::channel(1).0,
        server: FrameWriter::channel(1).0,
    };
    let mut session = Session::new(
        context.config.clone(),
        &route,
        agent.transport,
        context.guardian.clone(),
        chain,
        session_id,
        writers,
    )
    .with_identity(agent.identity.clone())
    .with_client_address(agent.client_address.clone());
    session.endpoint = format!("aggregate:{name}");
    let session = Arc::new(session);
    let bytes = serde_json::to_vec(initialize).map_err(|err| err.to_string())?;
    let frame = peek_frame(Bytes::from(bytes)).map_err(|err| err.to_string())?;
    lifecycle::start_once(&session, &frame).await;
    let refused = session.learned().refused.clone();
    match refused {
        Some(reason) => {
            lifecycle::end(&session, SessionEndReason::Error).await;
            Err(reason)
        }
        None => Ok(session),
    }
}

/// Waits for the inventory of every upstream in `legs` (each with its
/// endpoint) that is still there, sends them as one `agbom/snapshot`, and
/// publishes what the Guardian decided on `verdict`.
pub(super) async fn report_inventory(
    session: Arc<Session>,
    legs: Vec<(Arc<Leg>, String)>,
    verdict: watch::Sender<Inventoried>,
) {
    let reported = join_all(legs.iter().map(|(leg, endpoint)| async move {
        tokio::select! {
            inventory = leg.route.reported_inventory() => Some((inventory, endpoint.as_str())),
            () = leg.gone() => None,
        }
    }))
    .await;
    let servers: Vec<(&Inventory, &str)> = reported
        .iter()
        .flatten()
        .map(|(inventory, endpoint)| (inventory.as_ref(), *endpoint))
        .collect();
    let payload = Inventory::combined_snapshot_payload(
        &servers,
        &session.metadata().agent_id,
        &now_rfc3339(),
    );
    let outcome = match inventory::send_snapshot(&session, payload).await {
        None => Inventoried::Allowed,
        Some(blocked) => Inventoried::Refused(format!(
            "the virtual server's inventory was denied: {}",
            blocked.decision.reasoning.as_deref().unwrap_or("denied")
        )),
    };
    verdict.send_replace(outcome);
}

/// Seals the virtual server's audit chain.
pub(super) async fn end(session: &Session, reason: SessionEndReason) {
    lifecycle::end(session, reason).await;
}
