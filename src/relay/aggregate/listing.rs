//! Merged lists: `tools/list`, `prompts/list`, `resources/list` and
//! `resources/templates/list` asked of every upstream at once, their items
//! renamed for the agent, one cursor standing for every upstream's place.

use std::sync::Arc;

use futures_util::future::join_all;
use serde_json::{json, Value};

use super::merge::Positions;
use super::names::Kind;
use super::router::{lock, Router};
use crate::jsonrpc::codes;

/// The key under which a list method's result holds its items.
fn items_key(method: &str) -> &'static str {
    match method {
        "tools/list" => "tools",
        "prompts/list" => "prompts",
        "resources/list" => "resources",
        _ => "resourceTemplates",
    }
}

/// Answers the agent's list request `id` with one merged page.
pub(super) async fn answer(router: Arc<Router>, id: Value, method: String, message: Value) {
    if router.refused(&id).await {
        return;
    }
    let positions = match message["params"]["cursor"].as_str() {
        None => Positions::start(router.live_legs().iter().map(|leg| leg.index)),
        Some(cursor) => match Positions::decode(cursor) {
            Some(positions) => positions,
            None => {
                return router
                    .reply_error(&id, codes::INVALID_PARAMS, "invalid cursor")
                    .await
            }
        },
    };
    let (items, next) = page(&router, &method, positions).await;
    let mut result = json!({ items_key(&method): items });
    if !next.0.is_empty() {
        result["nextCursor"] = Value::from(next.encode());
    }
    router.reply(&id, result).await;
}

/// Lists every page of `kind` from every live upstream, so that names the
/// agent uses without having listed them (or listed them only in part)
/// can be routed.
pub(super) async fn refresh(router: &Router, kind: Kind) {
    let method = match kind {
        Kind::Tool => "tools/list",
        Kind::Prompt => "prompts/list",
    };
    let mut positions = Positions::start(router.live_legs().iter().map(|leg| leg.index));
    while !positions.0.is_empty() {
        positions = page(router, method, positions).await.1;
    }
}

/// One page from each upstream still to list: their items, merged and
/// renamed, and where each upstream stands afterwards. An upstream that
/// fails to answer is left out of this page and the next.
async fn page(router: &Router, method: &str, positions: Positions) -> (Vec<Value>, Positions) {
    let asks = positions.0.into_iter().map(|(leg, cursor)| async move {
        let target = router.legs.get(leg)?;
        let params = cursor.map(|cursor| json!({ "cursor": cursor }));
        let reply = target.request(method, params).await.ok()?.await.ok()?;
        if let Some(error) = reply.get("error") {
            tracing::warn!(upstream = %target.name, %method, %error, "an upstream refused a list");
            return None;
        }
        Some((leg, reply.get("result").cloned().unwrap_or(Value::Null)))
    });
    let answered: Vec<(usize, Value)> = join_all(asks).await.into_iter().flatten().collect();
    let key = items_key(method);
    let mut items = Vec::new();
    let mut next = Positions::default();
    let mut book = lock(&router.book);
    let kind = match method {
        "tools/list" => Some(Kind::Tool),
        "prompts/list" => Some(Kind::Prompt),
        _ => None,
    };
    if let Some(kind) = kind {
        for (leg, result) in &answered {
            for item in listed(result, key) {
                if let Some(name) = item["name"].as_str() {
                    book.note_offer(kind, *leg, name);
                }
            }
        }
    }
    for (leg, result) in answered {
        if let Some(cursor) = result["nextCursor"].as_str() {
            next.0.insert(leg, Some(cursor.to_owned()));
        }
        for mut item in listed(&result, key).iter().cloned() {
            match kind {
                Some(kind) => {
                    let Some(original) = item["name"].as_str() else {
                        continue;
                    };
                    let Some(exposed) = book.expose(kind, leg, original) else {
                        continue;
                    };
                    let denied = router.denied_tools.as_ref();
                    if kind == Kind::Tool && denied.is_some_and(|d| d.hides(original, &exposed)) {
                        continue;
                    }
                    if kind == Kind::Tool {
                        if let Some(target) = router.legs.get(leg) {
                            target.route.note(original, &exposed);
                        }
                    }
                    item["name"] = Value::from(exposed);
                }
                None if key == "resources" => {
                    if let Some(uri) = item["uri"].as_str() {
                        item["uri"] = Value::from(book.uris.expose_resource(leg, uri));
                    }
                }
                None => {
                    if let Some(template) = item["uriTemplate"].as_str() {
                        item["uriTemplate"] = Value::from(book.uris.expose_template(leg, template));
                    }
                }
            }
            items.push(item);
        }
    }
    (items, next)
}

fn listed<'a>(result: &'a Value, key: &str) -> &'a [Value] {
    result[key].as_array().map_or(&[], Vec::as_slice)
}
