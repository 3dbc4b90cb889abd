//! One session from start to an orderly end, whatever the transports: two
//! pumps, then whichever side closes first decides how the other is ended,
//! and `steps/sessionEnd` seals the audit chain.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::decide::{self, MessageContext};
use super::intake::SharedIntake;
use super::{inventory, lifecycle, pump};
use crate::audit::AuditLog;
use crate::config::{Config, UpstreamConfig};
use crate::enforce::Action;
use crate::guardian::{Decision, Guardian};
use crate::hooks::lifecycle::SessionEndReason;
use crate::hooks::VirtualRoute;
use crate::jsonrpc::{codes, error_response};
use crate::limits::RequestBudget;
use crate::metrics::METRICS;
use crate::session::{Direction, Session, Writers};
use crate::transport::downstream::Downstream;
use crate::transport::upstream::{Upstream, UpstreamExit};

/// How long the server may keep writing after its input was closed,
/// before its output is abandoned.
const DRAIN_LIMIT: Duration = Duration::from_secs(5);

/// How a session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionExit {
    /// The client closed its side; the server was shut down in order.
    ClientClosed,
    /// The proxy was asked to stop.
    Stopped,
    /// The server ended on its own; in-flight requests were failed.
    ServerExited(UpstreamExit),
}

/// What a session runs with besides its two sides.
pub struct SessionContext {
    /// The configuration in force.
    pub config: Arc<Config>,
    /// The upstream route this session is bound to.
    pub upstream: UpstreamConfig,
    /// Who decides.
    pub guardian: Arc<dyn Guardian>,
    /// Where the session's chain is written.
    pub audit: AuditLog,
    /// The in-flight request limits shared by every session of the process.
    pub requests: Arc<RequestBudget>,
    /// The virtual server the session is one upstream of, when it is.
    pub virtual_route: Option<Arc<VirtualRoute>>,
    /// Where the client-side intake is shared with the sender of the
    /// client's frames, which may then take a frame itself.
    pub client_intake: Option<Arc<SharedIntake>>,
}

/// Runs one session until either side closes or `stop` fires.
pub async fn run_session(
    context: SessionContext,
    downstream: Downstream,
    mut upstream: Upstream,
    stop: CancellationToken,
) -> SessionExit {
    let writers = Writers {
        client: downstream.writer.clone(),
        server: upstream.writer.clone(),
    };
    let session_id = Uuid::new_v4();
    let chain = match &context.virtual_route {
        Some(_) => context.audit.session_of_upstream(
            &session_id.to_string(),
            downstream.identity.clone(),
            &context.upstream.name,
        ),
        None => context
            .audit
            .session_of(&session_id.to_string(), downstream.identity.clone()),
    };
    let session = Arc::new(
        Session::new(
            context.config.clone(),
            &context.upstream,
            downstream.transport,
            context.guardian.clone(),
            chain,
            session_id,
            writers,
        )
        .with_request_budget(context.requests.clone())
        .with_identity(downstream.identity.clone())
        .with_virtual_route(context.virtual_route.clone())
        .with_client_address(downstream.client_address.clone()),
    );
    let active = METRICS
        .sessions_active
        .with_label_values(&[context.upstream.name.as_str()]);
    active.inc();
    let shared_intake = context.client_intake.clone();
    let mut client_pump = match shared_intake.clone() {
        Some(shared) => tokio::spawn(pump::run_shared(
            session.clone(),
            Direction::ClientToServer,
            downstream.frames,
            shared,
        )),
        None => tokio::spawn(pump::run(
            session.clone(),
            Direction::ClientToServer,
            downstream.frames,
        )),
    };
    let mut server_pump = tokio::spawn(pump::run(
        session.clone(),
        Direction::ServerToClient,
        upstream.frames,
    ));

    let exit = tokio::select! {
        _ = &mut client_pump => {
            upstream.writer.close();
            let exit = upstream.control.shutdown().await;
            drain(&mut server_pump).await;
            tracing::debug!(?exit, "client closed; upstream shut down");
            SessionExit::ClientClosed
        }
        _ = &mut server_pump => {
            let exit = upstream.control.wait().await;
            METRICS.upstream_exited(&session.upstream);
            Box::pin(fail_pending(&session, &exit)).await;
            if session.virtual_route.is_some() {
                Box::pin(inventory::withdraw(&session)).await;
            }
            stop_reading(&mut client_pump, shared_intake.as_deref()).await;
            SessionExit::ServerExited(exit)
        }
        _ = stop.cancelled() => {
            stop_reading(&mut client_pump, shared_intake.as_deref()).await;
            upstream.writer.close();
            let _ = upstream.control.shutdown().await;
            drain(&mut server_pump).await;
            SessionExit::Stopped
        }
    };
    let reason = match exit {
        SessionExit::ClientClosed => SessionEndReason::Completed,
        SessionExit::Stopped => SessionEndReason::Cancelled,
        SessionExit::ServerExited(_) => SessionEndReason::Error,
    };
    // Boxed, as are the failures above: this future lives as long as the
    // session, and what runs once at its end need not make it larger.
    Box::pin(lifecycle::end(&session, reason)).await;
    active.dec();
    upstream.writer.close();
    if let Some(task) = upstream.writer_task.take() {
        let _ = task.await;
    }
    exit
}

/// The client's frames are read no more: its pump stops, and a shared
/// intake takes nothing more, so what its sender sends next fails.
async fn stop_reading(pump: &mut JoinHandle<()>, shared: Option<&SharedIntake>) {
    pump.abort();
    if let Some(shared) = shared {
        shared.close().await;
    }
}

async fn drain(pump: &mut JoinHandle<()>) {
    if tokio::time::timeout(DRAIN_LIMIT, &mut *pump).await.is_err() {
        pump.abort();
    }
}

/// The server is gone: every request still waiting for it gets an error
/// reply and an audit entry.
async fn fail_pending(session: &Session, exit: &UpstreamExit) {
    let reason = exit.describe();
    let decision = Decision::deny(reason.clone(), None);
    for (id, request) in session.client_pending.drain() {
        request.cancel.cancel();
        let context = MessageContext::new(Direction::ServerToClient, &request.method, Some(&id));
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
