//! What the server answered, handed to the relay, and the errors the
//! client writes in place of answers that cannot come.

use bytes::{Bytes, BytesMut};
use reqwest::Response;
use serde_json::{json, Value};

use super::message::Incoming;
use super::net::describe_reqwest;
use super::pending::Pending;
use super::{content_type, Client, StreamEnd, JSON, MAX_ERROR_BODY};
use crate::jsonrpc::{codes, error_response};

impl Client {
    pub(super) fn unanswered(&self, pending: &Pending, reason: &str) -> StreamEnd {
        if pending.is_empty() {
            StreamEnd::Answered
        } else {
            StreamEnd::Dropped(reason.to_owned())
        }
    }

    /// Hands one message to the relay, noting what it answers (and the
    /// version an `initialize` result negotiated).
    pub(super) async fn deliver(&self, bytes: Bytes, pending: &mut Pending) -> bool {
        if !pending.is_empty() {
            let incoming = Incoming::peek(&bytes, pending.initialize.as_deref());
            if let Some(version) = &incoming.version {
                self.lock().version = Some(version.clone());
            }
            pending.answer(&incoming);
        }
        let delivered = self.link.emit(bytes).await;
        if pending
            .initialize
            .as_ref()
            .is_some_and(|key| !pending.contains(key))
        {
            pending.initialize = None;
            if let Some(gate) = pending.gate.take() {
                let _ = gate.send(());
            }
        }
        delivered
    }

    /// An error status for a POST holding requests: the server's own
    /// JSON-RPC answer when the body is one, else an error per request.
    pub(super) async fn refuse(&self, response: Response, pending: &mut Pending) {
        let status = response.status();
        let json = content_type(&response).as_deref() == Some(JSON);
        let body = match json {
            true => self
                .read_body(response, MAX_ERROR_BODY.min(self.max_message_bytes))
                .await
                .ok()
                .flatten(),
            false => None,
        };
        let mut data = json!({ "httpStatus": status.as_u16() });
        if let Some(body) = body {
            let incoming = Incoming::peek(&body, None);
            if incoming.answers.iter().any(|key| pending.contains(key)) {
                if !self.deliver(body, pending).await {
                    return;
                }
            } else if let Ok(Value::Object(reply)) = serde_json::from_slice::<Value>(&body) {
                if let Some(error) = reply.get("error") {
                    data["upstreamError"] = error.clone();
                }
            }
        }
        let reason = format!("the upstream server answered HTTP {status}");
        self.fail(pending, &reason, Some(data)).await;
    }

    /// Answers every waiting request with an "upstream unavailable" error.
    pub(super) async fn fail(&self, pending: &mut Pending, reason: &str, data: Option<Value>) {
        for (_, id) in pending.requests.drain(..) {
            tracing::debug!(route = %self.route.target.route, id = %id, reason, "answering a request the upstream could not");
            let reply =
                error_response(Some(&id), codes::UPSTREAM_UNAVAILABLE, reason, data.clone());
            if !self.link.emit(reply).await {
                break;
            }
        }
        if let Some(gate) = pending.gate.take() {
            let _ = gate.send(());
        }
    }

    /// Reads a whole body of at most `limit` bytes; `None` when it is larger.
    pub(super) async fn read_body(
        &self,
        mut response: Response,
        limit: usize,
    ) -> Result<Option<Bytes>, String> {
        if response
            .content_length()
            .is_some_and(|length| length > limit as u64)
        {
            return Ok(None);
        }
        let mut body = BytesMut::new();
        while let Some(chunk) = response.chunk().await.map_err(describe_reqwest)? {
            if body.len() + chunk.len() > limit {
                return Ok(None);
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Some(body.freeze()))
    }

    pub(super) fn too_long(&self) -> String {
        format!(
            "the upstream's reply exceeds the {}-byte message limit and was discarded",
            self.max_message_bytes
        )
    }
}
