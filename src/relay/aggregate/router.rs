//! A virtual server session's routing state and the moves it makes:
//! forwarding a request to one upstream and its answer back, routing by
//! resource URI, the agent's notifications and its answers to upstream
//! requests (back to the upstream that asked).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use futures_util::future::join_all;
use serde_json::{json, Value};
use tokio::sync::watch;

use super::batch::{Batches, Gathered};
use super::denied::DeniedTools;
use super::leg::Leg;
use super::names::{Kind, NameBook};
use super::own_session::Inventoried;
use super::slots::LegSlots;
use crate::config::AggregateConfig;
use crate::jsonrpc::{codes, RequestId};
use crate::transport::writer::FrameWriter;

/// One virtual server session's routing state.
pub(super) struct Router {
    /// The `[[aggregate]]` served.
    pub(super) aggregate: AggregateConfig,
    /// Each configured upstream's leg, while it serves, and the
    /// capabilities its `initialize` answered.
    pub(super) legs: LegSlots,
    /// Frames to the agent.
    pub(super) client: FrameWriter,
    /// The names given out and what they stand for.
    pub(super) book: Mutex<NameBook>,
    /// Upstream requests sent to the agent: the id the agent saw → the
    /// leg and the id the upstream gave it.
    pub(super) server_requests: Mutex<HashMap<String, (usize, Value)>>,
    next_server_request: AtomicU64,
    /// Where the virtual server's `agbom/snapshot` stands: nothing is
    /// served before the Guardian has seen it, nor after it refused it.
    inventory: watch::Receiver<Inventoried>,
    /// The tools to leave out of the agent's lists, when hidden.
    pub(super) denied_tools: Option<DeniedTools>,
    /// The agent's batches whose replies are being gathered.
    pub(super) batches: Batches,
    /// How deep the agent's messages may nest (`[limits] max_json_depth`).
    pub(super) max_json_depth: usize,
}

impl Router {
    /// A router over `legs`, writing to the agent through `client`.
    pub(super) fn new(
        aggregate: AggregateConfig,
        legs: LegSlots,
        client: FrameWriter,
        inventory: watch::Receiver<Inventoried>,
        denied_tools: Option<DeniedTools>,
        max_json_depth: usize,
    ) -> Self {
        Self {
            book: Mutex::new(NameBook::new(&aggregate)),
            aggregate,
            legs,
            client,
            server_requests: Mutex::new(HashMap::new()),
            next_server_request: AtomicU64::new(1),
            inventory,
            denied_tools,
            batches: Batches::default(),
            max_json_depth,
        }
    }

    /// Whether the virtual server's snapshot is still to be decided.
    pub(super) fn inventory_pending(&self) -> bool {
        *self.inventory.borrow() == Inventoried::Pending
    }

    /// Whether the Guardian has taken the virtual server's snapshot, so
    /// requests go on without waiting.
    pub(super) fn serving(&self) -> bool {
        *self.inventory.borrow() == Inventoried::Allowed
    }

    /// Waits until the virtual server's snapshot has been decided; why
    /// the session serves nothing, when the Guardian refused it.
    pub(super) async fn inventory_refusal(&self) -> Option<String> {
        let mut inventory = self.inventory.clone();
        let decided = inventory
            .wait_for(|state| *state != Inventoried::Pending)
            .await;
        // A snapshot that was never decided (the session is ending) refuses nothing.
        match decided.as_deref() {
            Ok(Inventoried::Refused(reason)) => Some(reason.clone()),
            _ => None,
        }
    }

    /// Answers `id` with the refusal of the session, if it was refused
    /// (waiting for the snapshot's decision first); `true` if it was.
    pub(super) async fn refused(&self, id: &Value) -> bool {
        let Some(reason) = self.inventory_refusal().await else {
            return false;
        };
        let text = format!("acs-proxy: the session was refused: {reason}");
        self.reply_error(id, codes::POLICY_DENIED, &text).await;
        true
    }

    /// The legs still serving.
    pub(super) fn live_legs(&self) -> Vec<Arc<Leg>> {
        self.legs.live()
    }

    /// Writes one message to the agent; a reply to a member of a batch
    /// goes with the batch's other replies, in one array.
    pub(super) async fn to_client(&self, message: &Value) {
        match self.batches.gather(message) {
            Gathered::Alone => send(&self.client, message).await,
            Gathered::Held => {}
            Gathered::Complete(replies) => send(&self.client, &replies).await,
        }
    }

    /// Answers the agent's request `id` with `result`.
    pub(super) async fn reply(&self, id: &Value, result: Value) {
        self.to_client(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
            .await;
    }

    /// Answers the agent's request `id` with an error.
    pub(super) async fn reply_error(&self, id: &Value, code: i64, message: &str) {
        self.to_client(&error(id, code, message)).await;
    }

    /// Answers that no upstream offers `name`.
    pub(super) async fn unknown_name(&self, kind: Kind, message: &Value, name: &str) {
        let what = match kind {
            Kind::Tool => "tool",
            Kind::Prompt => "prompt",
        };
        let text = format!("unknown {what}: {name}");
        self.reply_error(&message["id"], codes::INVALID_PARAMS, &text)
            .await;
    }

    /// To the leg a gateway URI names, or that listed `uri`, or that offers
    /// a template it fits; with one leg offering resources at all, to that
    /// one. The URI (at `pointer` in the message) is given as the leg
    /// knows it.
    pub(super) async fn route_resource(self: &Arc<Self>, pointer: &str, mut message: Value) {
        let uri = message
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let resolved = lock(&self.book).uris.resolve(&uri);
        let target = resolved.or_else(|| Some((self.only_leg_with("resources")?, uri.clone())));
        match target {
            Some((leg, original)) => {
                if let Some(field) = message.pointer_mut(pointer) {
                    *field = Value::from(original);
                }
                self.forward(leg, message).await;
            }
            None => {
                let text = format!("no upstream serves the resource {uri}");
                self.reply_error(&message["id"], codes::INVALID_PARAMS, &text)
                    .await;
            }
        }
    }

    /// The one live leg with `capability`, when there is exactly one.
    pub(super) fn only_leg_with(&self, capability: &str) -> Option<usize> {
        let live = self.live_legs();
        let mut with = live
            .iter()
            .filter(|leg| self.legs.capabilities(leg.index).get(capability).is_some());
        let leg = with.next()?;
        with.next().is_none().then_some(leg.index)
    }

    /// `logging/setLevel` goes to every upstream that logs; the gateway
    /// answers once they have.
    pub(super) async fn set_level(&self, id: Value, message: Value) {
        let mut replies = Vec::new();
        for leg in self.live_legs() {
            if self.legs.capabilities(leg.index).get("logging").is_none() {
                continue;
            }
            if let Ok(reply) = leg
                .request("logging/setLevel", Some(message["params"].clone()))
                .await
            {
                replies.push(reply);
            }
        }
        join_all(replies).await;
        self.reply(&id, json!({})).await;
    }

    /// Sends the agent's request to `leg` and, in the background, its
    /// answer back under the agent's id; a leg that is gone (or goes before
    /// answering) is answered -32011.
    ///
    /// Before the snapshot is decided, the request waits for it in a task
    /// of its own, so the agent's other messages (`initialized`, which
    /// lets the upstreams read their inventories) keep moving.
    pub(super) async fn forward(self: &Arc<Self>, leg: usize, message: Value) {
        if self.inventory_pending() {
            let router = self.clone();
            tokio::spawn(async move { router.forward_decided(leg, message).await });
            return;
        }
        self.forward_decided(leg, message).await;
    }

    async fn forward_decided(self: &Arc<Self>, leg: usize, message: Value) {
        let id = message["id"].clone();
        if self.refused(&id).await {
            return;
        }
        let Some(target) = self.legs.get(leg) else {
            return self.unavailable(&id, leg).await;
        };
        let is_read = message["method"] == "resources/read";
        let Ok(answer) = target
            .forward_request(message, Some(RequestId::from_json(&id.to_string())))
            .await
        else {
            return self.unavailable(&id, leg).await;
        };
        let router = self.clone();
        tokio::spawn(async move {
            match answer.await {
                Ok(mut reply) => {
                    reply["id"] = id;
                    if is_read {
                        router.contents_seen_as(leg, &mut reply);
                    }
                    router.to_client(&reply).await;
                }
                Err(_) => router.unavailable(&id, leg).await,
            }
        });
    }

    /// A `resources/read` answer names its contents' URIs as the agent
    /// knows them.
    fn contents_seen_as(&self, leg: usize, reply: &mut Value) {
        // Read with `get_mut`: indexing would add a `result` to an error.
        let contents = reply
            .get_mut("result")
            .and_then(|result| result.get_mut("contents"))
            .and_then(Value::as_array_mut);
        let Some(contents) = contents else {
            return;
        };
        let book = lock(&self.book);
        for content in contents {
            if let Some(uri) = content["uri"].as_str() {
                content["uri"] = Value::from(book.uris.seen_as(leg, uri));
            }
        }
    }

    /// Answers that the upstream `leg` is not there to serve `id`.
    async fn unavailable(&self, id: &Value, leg: usize) {
        let name = self
            .aggregate
            .upstreams
            .get(leg)
            .map_or("?", String::as_str);
        let text = format!("the upstream server {name:?} is not available");
        self.reply_error(id, codes::UPSTREAM_UNAVAILABLE, &text)
            .await;
    }

    /// A notification from the agent: a cancellation goes to the leg
    /// running the request it names (under the leg's id); anything else
    /// (`initialized`, `roots/list_changed`) to every upstream.
    pub(super) async fn client_notification(&self, mut message: Value) {
        if message["method"] == "notifications/cancelled" {
            let key = message["params"]["requestId"].to_string();
            let running = self
                .live_legs()
                .into_iter()
                .find_map(|leg| Some((leg.leg_id_of(&key)?, leg)));
            if let Some((leg_id, target)) = running {
                message["params"]["requestId"] = leg_id.to_value();
                let _ = target.send(&message).await;
            }
            return;
        }
        for leg in self.live_legs() {
            let _ = leg.send(&message).await;
        }
    }

    /// The agent's answer to an upstream's request goes back to that
    /// upstream, under the id it gave.
    pub(super) async fn client_response(&self, mut message: Value) {
        let key = message["id"].to_string();
        let Some((leg, original)) = lock(&self.server_requests).remove(&key) else {
            tracing::debug!("the agent answered a request no upstream is waiting on");
            return;
        };
        if let Some(target) = self.legs.get(leg) {
            message["id"] = original;
            let _ = target.send(&message).await;
        }
    }

    /// A fresh id for an upstream's request as the agent sees it, unique
    /// across upstreams.
    pub(super) fn server_request_id(&self, leg: &Leg) -> Value {
        let n = self.next_server_request.fetch_add(1, Ordering::Relaxed);
        Value::from(format!("{}:{n}", leg.name))
    }
}

/// Writes one message to the agent through `client`.
pub(super) async fn send(client: &FrameWriter, message: &Value) {
    if let Ok(bytes) = serde_json::to_vec(message) {
        let _ = client.send(Bytes::from(bytes)).await;
    }
}

/// A JSON-RPC error response.
pub(super) fn error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// Locks a router table; a panic elsewhere does not make it unusable.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
