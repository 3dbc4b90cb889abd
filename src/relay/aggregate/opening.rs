//! Opening the legs: each upstream connected and sent the agent's
//! `initialize` within the start-up timeout, at the session's start and
//! again when an upstream is brought back.

use std::sync::{Arc, Mutex};

use futures_util::future::join_all;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

use super::context::AggregateContext;
use super::leg::{AgentSide, Leg, LegEvent};

/// Opens every upstream at once, each within the start-up timeout, and
/// sends it the agent's `initialize`. An upstream that fails is left out
/// (`None`) and the session goes on with the others.
pub(super) async fn open_legs(
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
                returning: false,
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
pub(super) struct LegOpening<'a> {
    pub(super) index: usize,
    pub(super) context: &'a AggregateContext,
    pub(super) agent: &'a AgentSide,
    pub(super) events: &'a mpsc::UnboundedSender<LegEvent>,
    pub(super) stop: &'a CancellationToken,
    /// When the upstream must have answered `initialize`.
    pub(super) deadline: Instant,
    /// Where the closing of a leg that failed is kept, to be awaited.
    pub(super) closing: &'a Mutex<Vec<JoinHandle<()>>>,
    /// Whether the upstream is started again during the session.
    pub(super) returning: bool,
}

/// Connects one upstream and initializes it before the deadline; a leg
/// that misses it is closed (its server shut down), not left running.
pub(super) async fn open_leg(
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
            opening.returning,
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

/// Waits until the legs that failed to start have shut their servers down.
pub(super) async fn finish_closing(closing: Mutex<Vec<JoinHandle<()>>>) {
    let closing = closing
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    join_all(closing).await;
}
