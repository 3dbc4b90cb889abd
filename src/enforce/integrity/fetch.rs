//! Reading an upstream's current definitions for a review (`acs-proxy pins
//! diff|approve`): connect to the configured server the way a session
//! would (spawned over stdio, or over Streamable HTTP, SSE or WebSocket),
//! `initialize`, and read each list it declares, every page.
//!
//! A review is a short, one-off command: it runs on a runtime of its own
//! and talks to one server at a time.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::time::Instant;

use super::error::IntegrityError;
use super::section::Section;
use crate::config::UpstreamConfig;
use crate::transport::upstream::{self, Upstream};

/// How long the whole read may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);
/// Pages of one list read at most.
const MAX_PAGES: usize = 64;
/// The longest message read from the server.
const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// Messages queued towards the server.
const QUEUE: usize = 16;

/// An upstream's definitions, by section.
pub type Definitions = BTreeMap<Section, Vec<Value>>;

/// Reads every list `upstream` declares.
pub fn fetch(upstream: &UpstreamConfig) -> Result<Definitions, IntegrityError> {
    let failed = |message: String| IntegrityError::Fetch {
        upstream: upstream.name.clone(),
        message,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| failed(format!("cannot start a runtime: {err}")))?;
    runtime.block_on(async {
        let connection = upstream::connect(upstream, MAX_MESSAGE_BYTES, QUEUE)
            .await
            .map_err(|err| failed(format!("cannot reach the server: {err}")))?;
        let mut talk = Conversation::new(connection);
        let read = talk.read_all().await;
        talk.close().await;
        read.map_err(failed)
    })
}

/// Requests and answers over one upstream connection.
struct Conversation {
    upstream: Upstream,
    deadline: Instant,
    next_id: u64,
}

impl Conversation {
    fn new(upstream: Upstream) -> Self {
        Self {
            upstream,
            deadline: Instant::now() + FETCH_TIMEOUT,
            next_id: 0,
        }
    }

    async fn read_all(&mut self) -> Result<Definitions, String> {
        let initialized = self
            .request(
                "initialize",
                json!({
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": { "name": "acs-proxy pins", "version": env!("CARGO_PKG_VERSION") },
                }),
            )
            .await?;
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await?;
        let capabilities = &initialized["capabilities"];
        let mut definitions = Definitions::new();
        for section in Section::ALL {
            if capabilities.get(section.capability()).is_none() {
                continue;
            }
            match self.list(section).await {
                Ok(items) => {
                    definitions.insert(section, items);
                }
                // Templates are optional for a server with resources.
                Err(_) if section == Section::ResourceTemplates => {}
                Err(err) => return Err(err),
            }
        }
        Ok(definitions)
    }

    async fn list(&mut self, section: Section) -> Result<Vec<Value>, String> {
        let mut items = Vec::new();
        let mut cursor: Option<Value> = None;
        for _ in 0..MAX_PAGES {
            let params = match &cursor {
                Some(cursor) => json!({ "cursor": cursor }),
                None => json!({}),
            };
            let result = self.request(section.list_method(), params).await?;
            items.extend(section.items(&result).cloned().unwrap_or_default());
            cursor = result.get("nextCursor").filter(|c| !c.is_null()).cloned();
            if cursor.is_none() {
                break;
            }
        }
        Ok(items)
    }

    /// Sends a request and waits for its result, skipping anything else
    /// the server says meanwhile.
    async fn request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        loop {
            let frame = tokio::time::timeout_at(self.deadline, self.upstream.frames.next())
                .await
                .map_err(|_| format!("no answer to {method}"))?;
            let line = match frame {
                Some(Ok(frame)) => match frame.into_bytes() {
                    Some(line) => line,
                    None => continue,
                },
                Some(Err(err)) => return Err(format!("reading the answer to {method}: {err}")),
                None => return Err(format!("the server went away before answering {method}")),
            };
            let Ok(message) = serde_json::from_slice::<Value>(&line) else {
                continue;
            };
            if message.get("id") != Some(&id) || message.get("method").is_some() {
                continue;
            }
            if let Some(error) = message.get("error") {
                return Err(format!("{method} failed: {error}"));
            }
            return Ok(message.get("result").cloned().unwrap_or(Value::Null));
        }
    }

    async fn send(&mut self, message: &Value) -> Result<(), String> {
        self.upstream
            .writer
            .send(Bytes::from(message.to_string()))
            .await
            .map_err(|_| "the server stopped taking messages".to_owned())
    }

    /// Ends the conversation as a session would: input closed, then the
    /// server shut down in order.
    async fn close(mut self) {
        self.upstream.writer.close();
        let _ = self.upstream.control.shutdown().await;
    }
}
