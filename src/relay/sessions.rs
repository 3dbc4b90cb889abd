//! Sessions for network listeners: each MCP session a listener accepts
//! gets its own upstream session (a stdio server is spawned per session,
//! unless the route shares one; a network route's sessions share its
//! client and connection pool) and its own relay and audit chain.

use std::sync::Arc;

use futures_util::future::{BoxFuture, FutureExt};
use tokio_util::sync::CancellationToken;

use super::run::{run_session, SessionContext};
use uuid::Uuid;

use super::aggregate::{self, AggregateContext};
use super::connector::Connector;
use crate::audit::{self, AuditLog, AuditRecord};
use crate::config::{AggregateConfig, Config};
use crate::enforce::Action;
use crate::guardian::{DecisionSource, Disposition, Guardian};
use crate::limits::{LimitExceeded, RequestBudget};
use crate::metrics::METRICS;
use crate::session::Direction;
use crate::transport::downstream::{Downstream, SessionHandle, SessionStarter};

/// Starts relay sessions on behalf of network listeners.
pub struct RelaySessions {
    config: Arc<Config>,
    guardian: Arc<dyn Guardian>,
    audit: AuditLog,
    requests: Arc<RequestBudget>,
    /// Connects each session's upstream (shared children, network clients).
    connector: Connector,
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
            requests: Arc::new(RequestBudget::new(&config.limits)),
            connector: Connector::new(&config.limits),
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
        if let Some(aggregate) = self.config.aggregate(route) {
            return Ok(self.start_aggregate(aggregate.clone(), downstream));
        }
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
        let upstream = self.connector.connect(&upstream_config).await;
        METRICS.upstream_started(route, upstream.is_ok());
        let upstream = upstream.map_err(|err| err.to_string())?;
        let context = SessionContext {
            config: self.config.clone(),
            upstream: upstream_config,
            guardian: self.guardian.clone(),
            audit: self.audit.clone(),
            requests: self.requests.clone(),
            virtual_route: None,
            client_intake: None,
        };
        let stop = self.stop.child_token();
        let done = tokio::spawn(async move {
            let exit = run_session(context, downstream, upstream, stop).await;
            tracing::debug!(?exit, "session ended");
        });
        Ok(SessionHandle { done })
    }

    /// A virtual server's session: its upstreams are opened once the
    /// agent's `initialize` arrives, from the session's own task.
    fn start_aggregate(&self, aggregate: AggregateConfig, downstream: Downstream) -> SessionHandle {
        let context = AggregateContext {
            config: self.config.clone(),
            aggregate,
            guardian: self.guardian.clone(),
            audit: self.audit.clone(),
            requests: self.requests.clone(),
            connector: self.connector.clone(),
        };
        let stop = self.stop.child_token();
        let done = tokio::spawn(async move {
            let exit = aggregate::run(context, downstream, stop).await;
            tracing::debug!(?exit, "virtual server session ended");
        });
        SessionHandle { done }
    }

    /// A session refused before it started gets a chain of its own holding
    /// the one entry that says why.
    async fn record_refusal(&self, route: &str, transport: &str, limit: &LimitExceeded) {
        let chain = self.audit.session(&Uuid::new_v4().to_string());
        let record = AuditRecord::new(Uuid::new_v4().to_string(), audit::ENFORCEMENT_STEP_TYPE)
            .decision(Disposition::Deny.as_str())
            .decision_source(DecisionSource::Proxy)
            .reasoning(limit.to_string())
            .reason_codes(vec!["limit_exceeded".to_owned()])
            .direction(Direction::ClientToServer)
            .action(Action::Blocked)
            .detail(format!(
                "{} limit reached; a new {transport} session on route {route:?} was refused",
                limit.label()
            ));
        METRICS.count_enforcement(Action::Blocked.as_str());
        match chain.append(record).await {
            Ok(_) => METRICS.audit_entries_total.inc(),
            Err(err) => {
                METRICS.audit_failures_total.inc();
                tracing::error!(%err, "could not record a refused session");
            }
        }
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

    fn refused<'a>(
        &'a self,
        route: &'a str,
        transport: &'static str,
        limit: &'a LimitExceeded,
    ) -> BoxFuture<'a, ()> {
        self.record_refusal(route, transport, limit).boxed()
    }
}
