//! Where each of the agent's requests goes: to the upstream that owns
//! the tool, prompt or resource it names (under the name that upstream
//! knows), to every upstream (lists, `logging/setLevel`), or answered by
//! the gateway itself (`ping`).

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Value};

use super::listing;
use super::names::Kind;
use super::router::{lock, Router};
use super::splice;
use crate::config::PrefixMode;
use crate::jsonrpc::codes;

/// A request from the agent.
pub(super) async fn client_request(router: &Arc<Router>, message: Value) {
    let id = message["id"].clone();
    let method = message["method"].as_str().unwrap_or_default().to_owned();
    match method.as_str() {
        "ping" => router.reply(&id, json!({})).await,
        "initialize" => {
            router
                .reply_error(
                    &id,
                    codes::INVALID_REQUEST,
                    "the session is already initialized",
                )
                .await
        }
        "tools/list" | "prompts/list" | "resources/list" | "resources/templates/list" => {
            tokio::spawn(listing::answer(router.clone(), id, method, message));
        }
        "tools/call" => route_named(router, Kind::Tool, message).await,
        "prompts/get" => route_named(router, Kind::Prompt, message).await,
        "completion/complete" => route_completion(router, message).await,
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
            router.route_resource("/params/uri", message).await;
        }
        "logging/setLevel" => router.set_level(id, message).await,
        _ => {
            let text = format!("method not found: {method}");
            router
                .reply_error(&id, codes::METHOD_NOT_FOUND, &text)
                .await;
        }
    }
}

/// A `tools/call` or `prompts/get` of a name the router knows, sent on in
/// its own bytes while the session serves; `false` (nothing done) for any
/// other message, which is then parsed and dispatched as a tree.
pub(super) async fn route_call(router: &Arc<Router>, bytes: &Bytes) -> bool {
    let Some(call) = splice::peek_named_call(bytes, router.max_json_depth) else {
        return false;
    };
    if !router.serving() {
        return false;
    }
    let kind = if call.is_tool {
        Kind::Tool
    } else {
        Kind::Prompt
    };
    let Some(target) = lock(&router.book).resolve(kind, call.request.name()) else {
        return false;
    };
    let Some(leg) = router.legs.get(target.leg) else {
        return false;
    };
    if kind == Kind::Tool {
        leg.route.note(&target.original, call.request.name());
    }
    leg.forward_call(call, &target).await;
    true
}

/// `tools/call` and `prompts/get`: to the owner of the name, which is
/// given the name its server knows. A name not listed yet (under a
/// mode that does not always prefix) is looked up by listing first; a
/// name still unknown goes to the one upstream that has tools (or
/// prompts) when there is one, so it answers as it would alone.
async fn route_named(router: &Arc<Router>, kind: Kind, mut message: Value) {
    let name = message["params"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let known = lock(&router.book).resolve(kind, &name);
    let target = match known {
        Some(target) => target,
        None if router.aggregate.prefix != PrefixMode::Always => {
            let router = router.clone();
            tokio::spawn(async move {
                listing::refresh(&router, kind).await;
                let found = lock(&router.book).resolve(kind, &name);
                match (found, router.only_leg_with(kind.capability())) {
                    (Some(target), _) => {
                        message["params"]["name"] = Value::from(&*target.original);
                        router.forward(target.leg, message).await;
                    }
                    // One server answers for its own names, listed or not.
                    (None, Some(leg)) => router.forward(leg, message).await,
                    (None, None) => router.unknown_name(kind, &message, &name).await,
                }
            });
            return;
        }
        None => return router.unknown_name(kind, &message, &name).await,
    };
    if kind == Kind::Tool {
        if let Some(leg) = router.legs.get(target.leg) {
            leg.route.note(&target.original, &name);
        }
    }
    message["params"]["name"] = Value::from(&*target.original);
    router.forward(target.leg, message).await;
}

/// `completion/complete` names a prompt (renamed) or a resource (by URI).
async fn route_completion(router: &Arc<Router>, mut message: Value) {
    if message["params"]["ref"]["type"] == "ref/resource" {
        return router.route_resource("/params/ref/uri", message).await;
    }
    let name = message["params"]["ref"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let found = lock(&router.book).resolve(Kind::Prompt, &name);
    match found {
        Some(target) => {
            message["params"]["ref"]["name"] = Value::from(&*target.original);
            router.forward(target.leg, message).await;
        }
        None => router.unknown_name(Kind::Prompt, &message, &name).await,
    }
}
