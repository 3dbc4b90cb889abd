//! Requests the listener refuses before they reach a session (no or a
//! wrong bearer token, a foreign `Origin` or `Host`, a body too large, too
//! slow or malformed, a header that does not fit, an unknown session) are
//! recorded in the listener's own audit chain, the *edge chain*, so a
//! security team sees probing that no session chain would show.
//!
//! - One chain per listener run, `session_id = "edge-<uuid>"`, hash-chained
//!   like any session and sealed with `steps/sessionEnd` at shutdown.
//! - Each entry is an `enforcement` step: decision `deny`, source `proxy`,
//!   action `blocked`, the error message the client got as `reasoning`,
//!   `HTTP <status> <method> route <route>` as `detail`, the JSON-RPC id
//!   when one was read, the SHA-256 of the body when one was read
//!   (`content_digest`), and the caller when the request authenticated
//!   (refused later, e.g. naming another principal's session). Headers are
//!   never recorded, so neither is a bearer token.
//! - Recording never holds a response back, and a flood of refusals cannot
//!   fill memory or crowd sessions out of the audit writer: refusals wait
//!   in a bounded queue; what does not fit is counted and recorded as one
//!   summary entry.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use axum::http::{Method, StatusCode};
use axum::response::Response;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::responses::Refusal;
use crate::audit::{AuditChain, AuditLog, AuditRecord, ENFORCEMENT_STEP_TYPE};
use crate::enforce::Action;
use crate::guardian::DecisionSource;
use crate::hooks::Identity;
use crate::metrics::METRICS;
use crate::session::Direction;

/// Refusals that may wait for the audit writer.
const QUEUE: usize = 256;

/// One refused request, as queued for the edge chain.
struct Refused {
    route: Arc<str>,
    method: Method,
    status: StatusCode,
    refusal: Refusal,
    caller: Option<Arc<Identity>>,
}

/// The listener's edge chain, shared by every endpoint.
pub(crate) struct EdgeLog {
    queue: Mutex<Option<mpsc::Sender<Refused>>>,
    unrecorded: Arc<AtomicU64>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl EdgeLog {
    /// Records into a new chain of `audit`; records nothing without one.
    pub(crate) fn new(audit: Option<AuditLog>) -> Self {
        let unrecorded = Arc::new(AtomicU64::new(0));
        let Some(audit) = audit else {
            return Self {
                queue: Mutex::new(None),
                unrecorded,
                writer: Mutex::new(None),
            };
        };
        let chain = audit.session(&format!("edge-{}", uuid::Uuid::new_v4()));
        let (queue, refusals) = mpsc::channel(QUEUE);
        let writer = tokio::spawn(record_all(chain, refusals, unrecorded.clone()));
        Self {
            queue: Mutex::new(Some(queue)),
            unrecorded,
            writer: Mutex::new(Some(writer)),
        }
    }

    /// Records `response` when it refuses the request (status 400 and up)
    /// of `caller`, when it authenticated.
    pub(crate) fn note(
        &self,
        route: &Arc<str>,
        method: &Method,
        response: &Response,
        caller: Option<Arc<Identity>>,
    ) {
        let status = response.status();
        if status.as_u16() < 400 {
            return;
        }
        let queue = self
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let Some(queue) = queue else { return };
        let refusal = response
            .extensions()
            .get::<Refusal>()
            .cloned()
            .unwrap_or_else(|| Refusal {
                message: status.canonical_reason().unwrap_or("refused").to_owned(),
                ..Refusal::default()
            });
        let refused = Refused {
            route: route.clone(),
            method: method.clone(),
            status,
            refusal,
            caller,
        };
        if queue.try_send(refused).is_err() {
            self.unrecorded.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Records what is queued, seals the chain (when it has entries) and
    /// stops.
    pub(crate) async fn close(&self) {
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let writer = self
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(writer) = writer {
            if let Err(err) = writer.await {
                tracing::error!(%err, "the edge audit writer failed");
            }
        }
    }
}

async fn record_all(
    chain: AuditChain,
    mut refusals: mpsc::Receiver<Refused>,
    unrecorded: Arc<AtomicU64>,
) {
    while let Some(refused) = refusals.recv().await {
        let skipped = unrecorded.swap(0, Ordering::Relaxed);
        if skipped > 0 {
            let detail = format!(
                "{skipped} refused requests were not recorded one by one: too many at once"
            );
            append(&chain, refusal_record(detail, None)).await;
        }
        let detail = format!(
            "HTTP {} {} route {}",
            refused.status.as_u16(),
            refused.method,
            refused.route
        );
        let mut record = refusal_record(detail, Some(refused.refusal));
        if let Some(caller) = &refused.caller {
            record.set_caller(caller);
        }
        append(&chain, record).await;
    }
    if chain.head().await.is_some() {
        let seal = AuditRecord::new(
            uuid::Uuid::new_v4().to_string(),
            crate::audit::SESSION_END_STEP_TYPE,
        )
        .decision("allow")
        .decision_source(DecisionSource::Proxy)
        .action(Action::Recorded)
        .detail("the listener stopped");
        append(&chain, seal).await;
    }
}

fn refusal_record(detail: String, refusal: Option<Refusal>) -> Box<AuditRecord> {
    let mut record = AuditRecord::new(uuid::Uuid::new_v4().to_string(), ENFORCEMENT_STEP_TYPE)
        .decision("deny")
        .decision_source(DecisionSource::Proxy)
        .direction(Direction::ClientToServer)
        .action(Action::Blocked)
        .detail(detail);
    if let Some(refusal) = refusal {
        if !refusal.message.is_empty() {
            record = record.reasoning(refusal.message);
        }
        if let Some(id) = refusal.mcp_id {
            record = record.mcp_id(id);
        }
        if let Some(digest) = refusal.body_digest {
            record = record.content_digest(digest);
        }
    }
    record
}

async fn append(chain: &AuditChain, record: Box<AuditRecord>) {
    match chain.append(record).await {
        Ok(_) => METRICS.audit_entries_total.inc(),
        Err(err) => {
            METRICS.audit_failures_total.inc();
            tracing::error!(%err, "a refused request could not be recorded");
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::audit::{verify_file, AuditSettings, FsyncMode};
    use crate::jcs::sha256_hex;
    use crate::transport::http::server::responses::{json_error, rejection, with_body_digest};

    fn open(dir: &tempfile::TempDir) -> (AuditLog, std::path::PathBuf) {
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open(&AuditSettings {
            path: path.clone(),
            fsync: FsyncMode::Never,
        })
        .unwrap();
        (log, path)
    }

    fn entries(path: &std::path::Path) -> Vec<Value> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    #[tokio::test]
    async fn refusals_form_a_sealed_chain_without_headers() {
        let dir = tempfile::tempdir().unwrap();
        let (log, path) = open(&dir);
        let edge = EdgeLog::new(Some(log.clone()));
        let route: Arc<str> = Arc::from("demo");
        let id = crate::jsonrpc::RequestId::from_json("7");
        let malformed = with_body_digest(
            json_error(StatusCode::BAD_REQUEST, Some(&id), -32600, "bad body"),
            b"{}",
        );
        edge.note(&route, &Method::POST, &malformed, None);
        let unauthorized = rejection(StatusCode::UNAUTHORIZED, "a valid bearer token is required");
        edge.note(&route, &Method::GET, &unauthorized, None);
        edge.note(
            &route,
            &Method::POST,
            &Response::new(axum::body::Body::empty()),
            None,
        );
        edge.close().await;
        log.flush().await.unwrap();

        let report = verify_file(&path).unwrap();
        assert_eq!(report.sessions.len(), 1);
        assert!(report.sessions[0].sealed);
        let entries = entries(&path);
        assert_eq!(entries.len(), 3, "two refusals and the seal");
        assert!(entries[0]["session_id"]
            .as_str()
            .unwrap()
            .starts_with("edge-"));
        assert_eq!(entries[0]["detail"], "HTTP 400 POST route demo");
        assert_eq!(entries[0]["reasoning"], "bad body");
        assert_eq!(entries[0]["mcp_id"], 7);
        assert_eq!(entries[0]["content_digest"], sha256_hex(b"{}"));
        assert_eq!(entries[1]["detail"], "HTTP 401 GET route demo");
        assert_eq!(entries[2]["step_type"], "steps/sessionEnd");
    }

    #[tokio::test]
    async fn a_flood_beyond_the_queue_is_summarized() {
        let dir = tempfile::tempdir().unwrap();
        let (log, path) = open(&dir);
        let edge = EdgeLog::new(Some(log.clone()));
        let route: Arc<str> = Arc::from("demo");
        let refused = rejection(StatusCode::FORBIDDEN, "this Origin is not allowed");
        // The single-threaded test runtime runs the writer only once this
        // test yields, so exactly QUEUE refusals fit.
        for _ in 0..QUEUE + 44 {
            edge.note(&route, &Method::POST, &refused, None);
        }
        edge.close().await;
        log.flush().await.unwrap();
        let entries = entries(&path);
        assert_eq!(
            entries.len(),
            QUEUE + 2,
            "the queued ones, a summary, the seal"
        );
        assert_eq!(
            entries[0]["detail"],
            "44 refused requests were not recorded one by one: too many at once"
        );
        verify_file(&path).unwrap();
    }

    #[tokio::test]
    async fn nothing_is_written_when_nothing_was_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (log, path) = open(&dir);
        let edge = EdgeLog::new(Some(log.clone()));
        edge.close().await;
        log.flush().await.unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "");
    }
}
