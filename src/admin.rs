//! The operations endpoint: `/metrics` (Prometheus text), `/healthz` (the
//! process is up) and `/readyz` (the proxy can do its job: the audit log
//! records, the upstream is running, and a remote Guardian answers
//! `system/ping`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use crate::audit::AuditLog;
use crate::metrics::METRICS;

/// Readiness facts, set by the parts that know them.
#[derive(Debug, Default)]
pub struct Health {
    upstream_up: AtomicBool,
    audit: OnceLock<AuditLog>,
    guardian_down: AtomicBool,
}

impl Health {
    /// A fresh, not-yet-ready state.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Records whether the upstream is running.
    pub fn set_upstream_up(&self, up: bool) {
        self.upstream_up.store(up, Ordering::Relaxed);
    }

    /// Makes readiness follow the audit log: not ready while it cannot be
    /// written, ready again once a retry succeeds.
    pub fn watch_audit(&self, log: AuditLog) {
        let _ = self.audit.set(log);
    }

    /// Records whether a remote Guardian answers `system/ping`.
    pub fn set_guardian_up(&self, up: bool) {
        self.guardian_down.store(!up, Ordering::Relaxed);
        METRICS.guardian_up(up);
    }

    /// Whether the proxy can serve traffic now.
    pub fn is_ready(&self) -> bool {
        self.upstream_up.load(Ordering::Relaxed)
            && self.audit.get().is_some_and(AuditLog::is_healthy)
            && !self.guardian_down.load(Ordering::Relaxed)
    }
}

/// Binds the endpoint and serves it in the background. Binding happens
/// before this returns, so a taken port is a startup error.
pub async fn serve(address: SocketAddr, health: Arc<Health>) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(address).await?;
    let bound = listener.local_addr()?;
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(health);
    tokio::spawn(async move {
        if let Err(err) = axum::serve(listener, app).await {
            tracing::error!(%err, "the metrics endpoint stopped");
        }
    });
    Ok(bound)
}

/// Asks `/healthz` at `address` (the container `HEALTHCHECK`); plain
/// HTTP/1.1 over a socket, so the image needs no curl.
pub fn probe(address: &str) -> Result<(), String> {
    use std::io::{Read, Write};
    use std::time::Duration;
    let mut stream =
        std::net::TcpStream::connect(address).map_err(|e| format!("{address}: {e}"))?;
    let timeout = Some(Duration::from_secs(3));
    stream
        .set_read_timeout(timeout)
        .map_err(|e| e.to_string())?;
    stream
        .set_write_timeout(timeout)
        .map_err(|e| e.to_string())?;
    write!(
        stream,
        "GET /healthz HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .map_err(|e| e.to_string())?;
    match response.lines().next() {
        Some(status) if status.starts_with("HTTP/1.1 200") => Ok(()),
        Some(status) => Err(format!("{address}: {status}")),
        None => Err(format!("{address}: empty response")),
    }
}

async fn metrics() -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        METRICS.render(),
    )
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(health): State<Arc<Health>>) -> impl IntoResponse {
    if health.is_ready() {
        (StatusCode::OK, "ready\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
    }
}
