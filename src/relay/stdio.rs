//! The stdio deployment: the agent spawned the proxy, the proxy spawns the
//! server. One session, ended when either side closes or on SIGTERM/SIGINT.

use std::sync::Arc;

use futures_util::StreamExt;
use tokio::signal::unix::{signal, SignalKind};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::aggregate::{self, AggregateContext};
use super::connector::Connector;
use super::run::{run_session, SessionContext, SessionExit};
use crate::admin::Health;
use crate::audit::AuditLog;
use crate::config::{AggregateConfig, Config};
use crate::guardian::Guardian;
use crate::limits::RequestBudget;
use crate::metrics::METRICS;
use crate::transport::downstream::Downstream;
use crate::transport::stdio::{self, StdioDownstream};
use crate::transport::upstream::{self, UpstreamError};
use crate::transport::writer::FrameWriter;

/// Runs the one stdio session to completion.
pub async fn run_stdio(
    config: Arc<Config>,
    guardian: Arc<dyn Guardian>,
    audit: AuditLog,
    health: Arc<Health>,
) -> Result<SessionExit, UpstreamError> {
    if let Some(aggregate) = config.aggregates.first() {
        let aggregate = aggregate.clone();
        return Ok(run_stdio_aggregate(config, aggregate, guardian, audit, health).await);
    }
    let upstream_config = config
        .upstream()
        .ok_or(crate::transport::child::ChildError::NoCommand)?
        .clone();
    let limits = &config.limits;
    let upstream = upstream::connect(
        &upstream_config,
        limits.max_message_bytes,
        limits.max_in_flight,
    )
    .await;
    METRICS.upstream_started(&upstream_config.name, upstream.is_ok());
    let upstream = upstream?;
    health.set_upstream_up(true);
    let (downstream, agent) = agent_side(&config);
    let stop = CancellationToken::new();
    tokio::spawn(stop_on_signal(stop.clone()));
    let context = SessionContext {
        config: config.clone(),
        upstream: upstream_config,
        guardian,
        audit: audit.clone(),
        requests: Arc::new(RequestBudget::new(limits)),
        virtual_route: None,
        client_intake: None,
    };
    let exit = run_session(context, downstream, upstream, stop).await;
    health.set_upstream_up(false);
    finish(&audit, agent).await;
    Ok(exit)
}

/// The stdio deployment of a virtual server: the agent spawned the proxy,
/// the proxy starts every upstream of the one `[[aggregate]]`.
async fn run_stdio_aggregate(
    config: Arc<Config>,
    aggregate: AggregateConfig,
    guardian: Arc<dyn Guardian>,
    audit: AuditLog,
    health: Arc<Health>,
) -> SessionExit {
    let limits = &config.limits;
    let (downstream, agent) = agent_side(&config);
    let stop = CancellationToken::new();
    tokio::spawn(stop_on_signal(stop.clone()));
    let context = AggregateContext {
        aggregate,
        guardian,
        audit: audit.clone(),
        requests: Arc::new(RequestBudget::new(limits)),
        connector: Connector::new(limits),
        config: config.clone(),
    };
    health.set_upstream_up(true);
    let exit = aggregate::run(context, downstream, stop).await;
    health.set_upstream_up(false);
    finish(&audit, agent).await;
    exit
}

/// What stays with the stdio deployment of the agent's side once its
/// frames and writer are handed to the session: the writer task.
struct AgentOutput {
    writer: FrameWriter,
    task: JoinHandle<std::io::Result<()>>,
}

/// The agent's side of a stdio deployment: this process's stdin and
/// stdout, and the caller the OS user or `[hooks]` names.
fn agent_side(config: &Config) -> (Downstream, AgentOutput) {
    let limits = &config.limits;
    let stdio = StdioDownstream::open(limits.max_message_bytes, limits.max_in_flight);
    let downstream = Downstream {
        frames: stdio.reader.boxed(),
        writer: stdio.writer.clone(),
        transport: "stdio",
        upstream_headers: Vec::new(),
        identity: Some(Arc::new(stdio::caller(&config.hooks))),
        client_address: None,
    };
    let output = AgentOutput {
        writer: stdio.writer,
        task: stdio.writer_task,
    };
    (downstream, output)
}

/// Flushes the audit log, then lets every answer reach the agent.
async fn finish(audit: &AuditLog, agent: AgentOutput) {
    if let Err(err) = audit.flush().await {
        tracing::error!(%err, "the audit log could not be flushed");
    }
    agent.writer.close();
    let _ = agent.task.await;
}

/// Cancels `stop` on SIGTERM or SIGINT.
pub async fn stop_on_signal(stop: CancellationToken) {
    let mut terminate = signal(SignalKind::terminate()).ok();
    match terminate.as_mut() {
        Some(term) => tokio::select! {
            _ = term.recv() => {},
            _ = tokio::signal::ctrl_c() => {},
        },
        None => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
    stop.cancel();
}
