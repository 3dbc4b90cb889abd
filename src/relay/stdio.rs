//! The stdio deployment: the agent spawned the proxy, the proxy spawns the
//! server. One session, ended when either side closes or on SIGTERM/SIGINT.

use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{signal, SignalKind};
use uuid::Uuid;

use super::decide::{self, MessageContext};
use super::{lifecycle, pump};
use crate::admin::Health;
use crate::audit::AuditLog;
use crate::config::Config;
use crate::enforce::Action;
use crate::guardian::{Decision, Guardian};
use crate::hooks::lifecycle::SessionEndReason;
use crate::jsonrpc::{codes, error_response};
use crate::metrics::METRICS;
use crate::session::{Direction, Session, Writers};
use crate::transport::child::{ChildError, ChildExit, ChildUpstream};
use crate::transport::stdio::StdioDownstream;

/// How long the server may keep writing after the proxy closed its stdin
/// and it exited, before its output is abandoned.
const DRAIN_LIMIT: Duration = Duration::from_secs(5);

/// How a stdio run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StdioExit {
    /// The client closed its side; the server was shut down in order.
    ClientClosed,
    /// The proxy was asked to stop.
    Signalled,
    /// The server exited on its own; in-flight requests were failed.
    ServerExited(ChildExit),
}

/// Runs one stdio session to completion.
pub async fn run_stdio(
    config: Arc<Config>,
    guardian: Arc<dyn Guardian>,
    audit: AuditLog,
    health: Arc<Health>,
) -> Result<StdioExit, ChildError> {
    let upstream_config = config.upstream().ok_or(ChildError::NoCommand)?.clone();
    let limits = &config.limits;
    let upstream = ChildUpstream::spawn(
        &upstream_config,
        limits.max_message_bytes,
        limits.max_in_flight,
    )?;
    let (mut process, server_frames, server_writer, server_writer_task) = upstream.into_parts();
    health.set_upstream_up(true);
    let downstream = StdioDownstream::open(limits.max_message_bytes, limits.max_in_flight);
    let writers = Writers {
        client: downstream.writer.clone(),
        server: server_writer.clone(),
    };
    let session_id = Uuid::new_v4();
    let chain = audit.session(&session_id.to_string());
    let session = Arc::new(Session::new(
        config.clone(),
        guardian,
        chain,
        session_id,
        writers,
    ));
    METRICS.sessions_active.inc();

    let mut client_pump = tokio::spawn(pump::run(
        session.clone(),
        Direction::ClientToServer,
        downstream.reader,
    ));
    let mut server_pump = tokio::spawn(pump::run(
        session.clone(),
        Direction::ServerToClient,
        server_frames,
    ));
    let mut terminate = signal(SignalKind::terminate()).ok();
    let stopped = async {
        match terminate.as_mut() {
            Some(term) => tokio::select! {
                _ = term.recv() => {},
                _ = tokio::signal::ctrl_c() => {},
            },
            None => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    };

    let exit = tokio::select! {
        _ = &mut client_pump => {
            server_writer.close();
            let exit = process.shutdown().await;
            drain(&mut server_pump).await;
            tracing::info!(?exit, "client closed; upstream shut down");
            StdioExit::ClientClosed
        }
        _ = &mut server_pump => {
            let exit = process.wait().await;
            fail_pending(&session, &exit).await;
            client_pump.abort();
            StdioExit::ServerExited(exit)
        }
        _ = stopped => {
            client_pump.abort();
            server_writer.close();
            let _ = process.shutdown().await;
            drain(&mut server_pump).await;
            StdioExit::Signalled
        }
    };
    health.set_upstream_up(false);
    let reason = match exit {
        StdioExit::ClientClosed => SessionEndReason::Completed,
        StdioExit::Signalled => SessionEndReason::Cancelled,
        StdioExit::ServerExited(_) => SessionEndReason::Error,
    };
    lifecycle::end(&session, reason).await;
    METRICS.sessions_active.dec();
    drop(session);
    if let Err(err) = audit.flush().await {
        tracing::error!(%err, "the audit log could not be flushed");
    }
    server_writer.close();
    downstream.writer.close();
    let _ = downstream.writer_task.await;
    let _ = server_writer_task.await;
    Ok(exit)
}

async fn drain(pump: &mut tokio::task::JoinHandle<()>) {
    if tokio::time::timeout(DRAIN_LIMIT, &mut *pump).await.is_err() {
        pump.abort();
    }
}

/// The server is gone: every request still waiting for it gets an error
/// reply and an audit entry.
async fn fail_pending(session: &Session, exit: &ChildExit) {
    let reason = match (exit.code, exit.signalled) {
        (Some(code), _) => format!("the upstream server exited with status {code}"),
        (None, _) => "the upstream server was killed by a signal".to_owned(),
    };
    let decision = Decision::deny(reason.clone(), None);
    for (id, request) in session.client_pending.drain() {
        request.cancel.cancel();
        let context = MessageContext {
            direction: Direction::ServerToClient,
            mcp_method: request.method.clone(),
            mcp_id: Some(id.to_value()),
        };
        let step = Uuid::new_v4().to_string();
        let _ = decide::record_event(
            session,
            step,
            &decision,
            &context,
            Action::Blocked,
            reason.clone(),
        )
        .await;
        let reply = error_response(Some(&id), codes::UPSTREAM_UNAVAILABLE, &reason, None);
        let _ = session.writers.client.send(reply).await;
    }
}
