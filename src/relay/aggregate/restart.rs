//! Bringing an upstream back while the agent's session runs: one that
//! died, or did not start, is started again with an exponential backoff,
//! sent the agent's `initialize` again, reported to the Guardian by its
//! new relay session with its components added again (`agbom/changed`,
//! reason `server_restarted`), and offered to the agent again
//! (`list_changed`).
//!
//! An agent over stdio keeps one session for hours; without this, a
//! crashed upstream would stay gone until the agent restarts. Every try
//! runs in a task of the session's own and ends with it: a try under way
//! when the session ends shuts the server it started down before the
//! session finishes.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::context::AggregateContext;
use super::leg::{AgentSide, Leg, LegEvent};
use super::opening::{finish_closing, open_leg, LegOpening};
use super::router::Router;
use super::upstream_events;
use crate::config::AggregateConfig;

/// What every restart of one session's upstreams needs.
pub(super) struct Restarting {
    /// The configuration and services the session runs with.
    pub(super) context: Arc<AggregateContext>,
    /// How the agent's side looks to each leg.
    pub(super) agent: Arc<AgentSide>,
    /// The agent's `initialize`, at the protocol version the session
    /// agreed, as each upstream is sent it again.
    pub(super) initialize: Value,
    /// Where a leg's upstream messages and end go.
    pub(super) events: mpsc::UnboundedSender<LegEvent>,
    /// The session's routing state, where a leg that came back is put.
    pub(super) router: Arc<Router>,
}

/// The restarts under way in one session.
pub(super) struct Restarts {
    shared: Arc<Restarting>,
    tasks: JoinSet<()>,
    stop: CancellationToken,
}

impl Restarts {
    /// No restart yet; each ends when `session_stop` fires or when
    /// [`Restarts::stop`] is called.
    pub(super) fn new(shared: Restarting, session_stop: &CancellationToken) -> Self {
        Self {
            shared: Arc::new(shared),
            tasks: JoinSet::new(),
            stop: session_stop.child_token(),
        }
    }

    /// Starts bringing upstream `index` back, once `ended` (its leg that
    /// ended, if it had one) has shut down and sealed its chain.
    pub(super) fn schedule(&mut self, index: usize, ended: Option<Arc<Leg>>) {
        // Restarts that are over leave nothing to wait for.
        while self.tasks.try_join_next().is_some() {}
        let shared = self.shared.clone();
        let stop = self.stop.clone();
        self.tasks.spawn(bring_back(shared, index, ended, stop));
    }

    /// Ends every restart and waits until each has shut down the server
    /// it was starting.
    pub(super) async fn stop(mut self) {
        self.stop.cancel();
        while self.tasks.join_next().await.is_some() {}
    }
}

/// How one try to bring an upstream back ended.
enum Outcome {
    /// It serves again.
    Back,
    /// It did not start or answer; tried again after the next wait.
    Failed(String),
    /// The Guardian refused it: it stays out of this session.
    Refused(String),
    /// The session is ending.
    Stopped,
}

/// Tries to bring upstream `index` back until it serves, is refused, or
/// the session ends.
async fn bring_back(
    shared: Arc<Restarting>,
    index: usize,
    ended: Option<Arc<Leg>>,
    stop: CancellationToken,
) {
    if let Some(ended) = ended {
        ended.close().await;
    }
    let name = shared
        .context
        .aggregate
        .upstreams
        .get(index)
        .cloned()
        .unwrap_or_default();
    let mut backoff = Backoff::new(&shared.context.aggregate);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(backoff.next_wait()) => {}
        }
        match try_once(&shared, index, &stop).await {
            Outcome::Back => {
                tracing::info!(upstream = %name, aggregate = %shared.context.aggregate.name,
                    "an upstream of a virtual server came back");
                return;
            }
            Outcome::Failed(reason) => {
                tracing::warn!(upstream = %name, %reason, "an upstream of a virtual server did not come back; trying again");
            }
            Outcome::Refused(reason) => {
                tracing::warn!(upstream = %name, %reason, "an upstream of a virtual server was refused on its return");
                return;
            }
            Outcome::Stopped => return,
        }
    }
}

/// Starts upstream `index` once: open, `initialize`, `initialized`, its
/// inventory reported, then put in its slot and announced to the agent.
async fn try_once(shared: &Restarting, index: usize, stop: &CancellationToken) -> Outcome {
    let context = &shared.context;
    let Some(config) = context
        .aggregate
        .upstreams
        .get(index)
        .and_then(|name| context.config.upstreams.iter().find(|u| &u.name == name))
    else {
        return Outcome::Refused("it is not configured".to_owned());
    };
    let closing = Mutex::new(Vec::new());
    let opening = LegOpening {
        index,
        context,
        agent: &shared.agent,
        events: &shared.events,
        stop,
        deadline: Instant::now() + Duration::from_millis(context.aggregate.startup_timeout_ms),
        closing: &closing,
        returning: true,
    };
    let opened = open_leg(opening, config, &shared.initialize).await;
    finish_closing(closing).await;
    let (leg, result) = match opened {
        Ok(opened) => opened,
        Err(reason) => return Outcome::Failed(reason),
    };
    let outcome = rejoin(shared, &leg, stop).await;
    match outcome {
        Outcome::Back => install(shared, leg, result["capabilities"].clone()).await,
        other => {
            leg.close().await;
            other
        }
    }
}

/// Lets the started leg read its inventory (after `initialized`, as the
/// agent's own did) and report it to the Guardian from its own session,
/// once the session's snapshot has been decided.
async fn rejoin(shared: &Restarting, leg: &Leg, stop: &CancellationToken) -> Outcome {
    let refused = tokio::select! {
        refused = shared.router.inventory_refusal() => refused,
        () = stop.cancelled() => return Outcome::Stopped,
    };
    if refused.is_some() || stop.is_cancelled() {
        return Outcome::Stopped;
    }
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    if leg.send(&initialized).await.is_err() {
        return Outcome::Failed("it ended after initialize".to_owned());
    }
    tokio::select! {
        _ = leg.route.reported_inventory() => Outcome::Back,
        reason = leg.route.refusal() => Outcome::Refused(reason),
        () = leg.gone() => Outcome::Failed("it ended before its inventory was read".to_owned()),
        () = stop.cancelled() => Outcome::Stopped,
    }
}

/// Puts the leg in its slot and tells the agent its lists changed; a leg
/// that ended meanwhile is taken out again (unless its end was already
/// taken, and with it a new restart begun).
async fn install(shared: &Restarting, leg: Arc<Leg>, capabilities: Value) -> Outcome {
    let router = &shared.router;
    let index = leg.index;
    router.legs.install(index, leg.clone(), capabilities);
    if leg.is_gone() {
        return match router.legs.take_gone(index) {
            Some(ended) => {
                ended.close().await;
                Outcome::Failed("it ended as it came back".to_owned())
            }
            None => Outcome::Stopped,
        };
    }
    upstream_events::lists_changed(router, index).await;
    Outcome::Back
}

/// The waits between tries: from `restart_backoff_ms`, doubling up to
/// `restart_max_backoff_ms`.
struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    fn new(aggregate: &AggregateConfig) -> Self {
        Self {
            next: Duration::from_millis(aggregate.restart_backoff_ms),
            max: Duration::from_millis(aggregate.restart_max_backoff_ms),
        }
    }

    /// The wait before the next try: somewhere in the upper half of the
    /// current step, so the sessions of one crashed shared server do not
    /// all try at the same instant.
    fn next_wait(&mut self) -> Duration {
        let step = self.next;
        self.next = (step * 2).min(self.max);
        step.mul_f64(0.5 + fastrand::f64() * 0.5)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_with_jitter_up_to_the_cap() {
        let mut backoff = Backoff {
            next: Duration::from_millis(1_000),
            max: Duration::from_millis(5_000),
        };
        for step in [1_000, 2_000, 4_000, 5_000, 5_000] {
            let wait = backoff.next_wait().as_millis();
            assert!(
                (step / 2..=step).contains(&wait),
                "{wait} ms for a step of {step} ms"
            );
        }
    }
}
