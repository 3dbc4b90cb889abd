//! Sessions for network listeners: each MCP session a listener accepts
//! gets its own upstream connection (a stdio server is spawned per session)
//! and its own relay and audit chain.

use std::sync::Arc;

use futures_util::future::{BoxFuture, FutureExt};
use tokio_util::sync::CancellationToken;

use super::run::{run_session, SessionContext};
use crate::audit::AuditLog;
use crate::config::Config;
use crate::guardian::Guardian;
use crate::metrics::METRICS;
use crate::transport::downstream::{Downstream, SessionHandle, SessionStarter};
use crate::transport::upstream;

/// Starts relay sessions on behalf of network listeners.
pub struct RelaySessions {
    config: Arc<Config>,
    guardian: Arc<dyn Guardian>,
    audit: AuditLog,
    stop: CancellationToken,
}

impl RelaySessions {
    /// Sessions that end when `stop` fires (graceful shutdown seals each chain).
    pub fn new(
        config: Arc<Config>,
        guardian: Arc<dyn Guardian>,
        audit: AuditLog,
        stop: CancellationToken,
    ) -> Self {
        Self {
            config,
            guardian,
            audit,
            stop,
        }
    }

    async fn start_session(
        &self,
        route: &str,
        downstream: Downstream,
    ) -> Result<SessionHandle, String> {
        let mut upstream_config = self
            .config
            .upstreams
            .iter()
            .find(|u| u.name == route)
            .ok_or_else(|| format!("no upstream route named {route:?}"))?
            .clone();
        upstream_config
            .headers
            .extend(downstream.upstream_headers.iter().cloned());
        let limits = &self.config.limits;
        let upstream = upstream::connect(
            &upstream_config,
            limits.max_message_bytes,
            limits.max_in_flight,
        )
        .await
        .map_err(|err| {
            METRICS
                .upstream_errors_total
                .with_label_values(&[route, "connect"])
                .inc();
            err.to_string()
        })?;
        let context = SessionContext {
            config: self.config.clone(),
            upstream: upstream_config,
            guardian: self.guardian.clone(),
            audit: self.audit.clone(),
        };
        let stop = self.stop.child_token();
        let done = tokio::spawn(async move {
            let exit = run_session(context, downstream, upstream, stop).await;
            tracing::debug!(?exit, "session ended");
        });
        Ok(SessionHandle { done })
    }
}

impl SessionStarter for RelaySessions {
    fn start<'a>(
        &'a self,
        route: &'a str,
        downstream: Downstream,
    ) -> BoxFuture<'a, Result<SessionHandle, String>> {
        self.start_session(route, downstream).boxed()
    }
}
