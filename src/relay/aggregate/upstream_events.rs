//! What the upstreams send on their own: their requests to the agent
//! (sampling, elicitation, roots) under ids unique across upstreams, their
//! notifications, and the end of an upstream, which takes its tools,
//! prompts and resources out of the agent's lists until it comes back.

use std::sync::Arc;

use serde_json::{json, Value};

use super::leg::Leg;
use super::router::{lock, Router};

/// A request or notification from leg `index`.
pub(super) async fn message(router: &Arc<Router>, index: usize, mut message: Value) {
    let Some(leg) = router.legs.get(index) else {
        return;
    };
    if message.get("method").is_none() {
        tracing::debug!(upstream = %leg.name, "dropped a response no request is waiting on");
        return;
    }
    if message.get("id").is_some() {
        let id = router.server_request_id(&leg);
        let original = std::mem::replace(&mut message["id"], id.clone());
        lock(&router.server_requests).insert(id.to_string(), (index, original));
        return router.to_client(&message).await;
    }
    if message["method"] == "notifications/cancelled" {
        // The upstream gave up on one of its own requests: the agent knows
        // it under the id the gateway gave it.
        let original = message["params"]["requestId"].clone();
        let seen_as = lock(&router.server_requests)
            .iter()
            .find(|(_, (leg, id))| *leg == index && *id == original)
            .map(|(seen_as, _)| seen_as.clone());
        let Some(seen_as) = seen_as else {
            return;
        };
        lock(&router.server_requests).remove(&seen_as);
        message["params"]["requestId"] =
            serde_json::from_str(&seen_as).unwrap_or(Value::String(seen_as));
    }
    if message["method"] == "notifications/resources/updated" {
        // Said of the URI the agent knows: a gateway URI when it has one.
        if let Some(uri) = message["params"]["uri"].as_str() {
            let seen_as = lock(&router.book).uris.seen_as(index, uri);
            message["params"]["uri"] = Value::from(seen_as);
        }
    }
    router.to_client(&message).await;
}

/// Leg `index` ended: what it offered is forgotten and the agent is told
/// its lists changed. Its requests in flight have already been answered
/// -32011 (by its relay, or by the leg when the relay could not).
///
/// Returns the ended leg, to be closed and its upstream started again;
/// `None` when the end is not news: a leg that never served (one that
/// failed to start or to come back) or an end already taken.
pub(super) async fn closed(router: &Arc<Router>, index: usize) -> Option<Arc<Leg>> {
    let ended = router.legs.take_gone(index)?;
    tracing::warn!(upstream = %ended.name, aggregate = %router.aggregate.name,
        "an upstream of a virtual server went away; the others go on serving");
    lock(&router.book).forget_leg(index);
    lock(&router.server_requests).retain(|_, (leg, _)| *leg != index);
    lists_changed(router, index).await;
    Some(ended)
}

/// Tells the agent that every list upstream `index` offers changed: it
/// went away, or came back.
pub(super) async fn lists_changed(router: &Router, index: usize) {
    let capabilities = router.legs.capabilities(index);
    for (capability, method) in [
        ("tools", "notifications/tools/list_changed"),
        ("prompts", "notifications/prompts/list_changed"),
        ("resources", "notifications/resources/list_changed"),
    ] {
        if capabilities.get(capability).is_some() {
            router
                .to_client(&json!({"jsonrpc": "2.0", "method": method}))
                .await;
        }
    }
}
