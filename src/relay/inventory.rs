//! Keeping the Guardian's view of the server's inventory current:
//! `agbom/snapshot` once the server is known, `agbom/changed` whenever a
//! later list differs from what was reported.
//!
//! Right after the client's `notifications/initialized`, the proxy reads the
//! server's tools, prompts and resources itself (with ids no peer uses, and
//! swallowing the answers), so the snapshot describes the whole inventory
//! before the agent's first content-bearing message. While that runs, the
//! agent's next messages wait.

use std::time::Duration;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::decide::{self, MessageContext};
use super::integrity;
use super::traced;
use crate::enforce::Action;
use crate::guardian::{Decision, Disposition};
use crate::hooks::agbom::{Inventory, ListKind};
use crate::hooks::{self, now_rfc3339, HookRequest, VirtualRoute};
use crate::session::{Direction, Session};
use crate::transport::http::metadata::registry;

/// Pages of one list the proxy reads at most.
const MAX_PAGES: usize = 16;

/// A list or snapshot the Guardian refused.
#[derive(Debug)]
pub struct Blocked {
    /// The deny.
    pub decision: Decision,
    /// Its audit entry.
    pub entry_id: Option<String>,
}

/// Remembers what the client declared in its `initialize`.
pub fn note_initialize_request(session: &Session, initialize: &Value) {
    let elicitation = initialize["params"]["capabilities"]
        .get("elicitation")
        .is_some();
    session.learned().client_elicitation = elicitation;
}

/// Marks a list stale when the server says it changed.
pub fn note_notification(session: &Session, method: &str) {
    if !method.ends_with("/list_changed") {
        return;
    }
    if let Some(kind) = ListKind::from_method(method) {
        let mut learned = session.learned();
        if !learned.stale_lists.contains(&kind) {
            learned.stale_lists.push(kind);
        }
    }
}

/// Whether [`observe_response`] learns anything from an answer to
/// `method`: the server's `initialize` result and its lists.
pub fn observes(method: &str) -> bool {
    method == "initialize" || ListKind::from_method(method).is_some()
}

/// Looks at an allowed response on its way to the client: the `initialize`
/// result identifies the server; a complete list result may change the
/// inventory, which the Guardian must accept before the client sees it.
pub async fn observe_response(
    session: &Session,
    method: &str,
    response: &Value,
    context: &MessageContext,
) -> Option<Blocked> {
    let result = response.get("result")?;
    if method == "initialize" {
        {
            let mut learned = session.learned();
            learned.inventory.set_server(result);
            if session.virtual_route.is_some() {
                learned.inventory.set_route(&session.upstream);
            }
            learned.initialize_result = Some(result.clone());
        }
        if !session.config.hooks.inventory {
            return emit_snapshot(session, None).await;
        }
        return None;
    }
    let kind = ListKind::from_method(method)?;
    let items = Inventory::list_items(kind, result)?;
    learn_param_headers(session, kind, items);
    if result.get("nextCursor").is_some_and(|c| !c.is_null()) {
        return None;
    }
    let (snapshot_sent, newer, reason) = {
        let mut learned = session.learned();
        let mut newer = learned.inventory.clone();
        newer.set_list(kind, items);
        let stale = learned.stale_lists.contains(&kind);
        learned.stale_lists.retain(|k| *k != kind);
        let reason = if stale {
            "list_changed"
        } else {
            "list_differs"
        };
        (learned.snapshot_sent, newer, reason)
    };
    if !snapshot_sent {
        return emit_snapshot(session, Some(newer)).await;
    }
    emit_changed(session, newer, reason, context).await
}

/// Reads the server's lists and sends `agbom/snapshot`. Called once, after
/// the client's `notifications/initialized` has reached the server.
pub async fn take_snapshot(session: &Session) {
    let capabilities = {
        let learned = session.learned();
        if learned.snapshot_sent || learned.refused.is_some() {
            return;
        }
        learned
            .initialize_result
            .as_ref()
            .map(|result| result["capabilities"].clone())
            .unwrap_or(Value::Null)
    };
    let mut inventory = session.learned().inventory.clone();
    let limit = Duration::from_millis(session.config.hooks.inventory_timeout_ms);
    let kinds: Vec<ListKind> = ListKind::ALL
        .into_iter()
        .filter(|kind| capabilities.get(kind.capability()).is_some())
        .collect();
    let fetched =
        futures_util::future::join_all(kinds.iter().map(|kind| fetch_list(session, *kind, limit)))
            .await;
    for (kind, items) in kinds.into_iter().zip(fetched) {
        if let Some(items) = items {
            learn_param_headers(session, kind, &items);
            integrity::screen_fetched(session, kind.method(), &items).await;
            inventory.set_list(kind, &items);
        }
    }
    emit_snapshot(session, Some(inventory)).await;
}

/// Tools tell which arguments a 2026-07-28 `tools/call` mirrors into
/// `Mcp-Param-*` headers; the route's listener and upstream client need it.
fn learn_param_headers(session: &Session, kind: ListKind, items: &[Value]) {
    if kind == ListKind::Tools {
        registry::learn(&session.upstream, items);
    }
}

/// Reads every page of one list, or `None` if the server did not answer in time.
async fn fetch_list(session: &Session, kind: ListKind, limit: Duration) -> Option<Vec<Value>> {
    let mut items = Vec::new();
    let mut cursor: Option<Value> = None;
    for _ in 0..MAX_PAGES {
        let (id, answer) = session.proxy_to_server.register();
        let mut params = json!({});
        if let Some(cursor) = &cursor {
            params["cursor"] = cursor.clone();
        }
        let request = json!({
            "jsonrpc": "2.0",
            "id": id.to_value(),
            "method": kind.method(),
            "params": params,
        });
        session
            .writers
            .server
            .send(request.to_string().into())
            .await
            .ok()?;
        let Ok(Ok(bytes)) = tokio::time::timeout(limit, answer).await else {
            session.proxy_to_server.forget(&id);
            tracing::warn!(
                list = kind.method(),
                "the server did not answer the inventory read in time"
            );
            return None;
        };
        let response: Value = serde_json::from_slice(&bytes).ok()?;
        let result = response.get("result")?;
        items.extend(Inventory::list_items(kind, result)?.iter().cloned());
        cursor = result.get("nextCursor").filter(|c| !c.is_null()).cloned();
        if cursor.is_none() {
            return Some(items);
        }
    }
    Some(items)
}

async fn emit_snapshot(session: &Session, inventory: Option<Inventory>) -> Option<Blocked> {
    let inventory = inventory.unwrap_or_else(|| session.learned().inventory.clone());
    if let Some(route) = session.virtual_route.as_ref().filter(|r| r.is_return()) {
        return rejoin(session, route, inventory).await;
    }
    if let Some(route) = &session.virtual_route {
        // One upstream of a virtual server: its inventory goes into the
        // virtual server's one snapshot; its later changes are its own.
        let mut learned = session.learned();
        learned.snapshot_sent = true;
        learned.inventory = inventory.clone();
        route.report_inventory(inventory);
        return None;
    }
    let payload = inventory.snapshot_payload(
        &session.metadata().agent_id,
        &session.endpoint,
        &now_rfc3339(),
    );
    let blocked = send_snapshot(session, payload).await;
    if blocked.as_ref().is_some_and(|b| audit_failed(&b.decision)) {
        // Not reported yet; the next complete list response tries again.
        return blocked;
    }
    let mut learned = session.learned();
    learned.snapshot_sent = true;
    learned.inventory = inventory;
    if let Some(blocked) = &blocked {
        learned.refused = Some(format!(
            "the server's inventory was denied: {}",
            blocked.decision.reasoning.as_deref().unwrap_or("denied")
        ));
    }
    blocked
}

/// An upstream of a virtual server that came back: the Guardian hears of
/// every component again from the upstream's own session (`agbom/changed`,
/// reason `server_restarted`), as it heard of their loss (`withdraw`).
async fn rejoin(session: &Session, route: &VirtualRoute, inventory: Inventory) -> Option<Blocked> {
    {
        let mut learned = session.learned();
        learned.snapshot_sent = true;
        learned.inventory = Inventory::default();
    }
    let context = MessageContext::new(
        Direction::ServerToClient,
        "notifications/tools/list_changed",
        None,
    );
    let blocked = emit_changed(session, inventory.clone(), "server_restarted", &context).await;
    match &blocked {
        None => route.report_inventory(inventory),
        Some(blocked) => {
            let reason = blocked.decision.reasoning.as_deref().unwrap_or("denied");
            let reason = format!("the returning upstream's inventory was denied: {reason}");
            session.learned().refused = Some(reason.clone());
            route.report_refusal(reason);
        }
    }
    blocked
}

/// Sends an `agbom/snapshot` of `payload` (a canonical AgBOM document),
/// records it, and says whether the Guardian refused it.
pub async fn send_snapshot(session: &Session, payload: Value) -> Option<Blocked> {
    let hook = traced::session_step(
        session,
        HookRequest::new(hooks::AGBOM_SNAPSHOT, payload, None),
    );
    let context = MessageContext::new(Direction::ServerToClient, "initialize", None);
    decide_inventory(session, &hook, &context).await
}

/// The server went away for good: every component it offered is reported
/// removed (`agbom/changed`, reason `server_exited`), so the Guardian's
/// view of a virtual server loses the upstream's tools with it.
pub async fn withdraw(session: &Session) {
    if !session.learned().snapshot_sent {
        return;
    }
    let context = MessageContext::new(
        Direction::ServerToClient,
        "notifications/tools/list_changed",
        None,
    );
    let _ = emit_changed(session, Inventory::default(), "server_exited", &context).await;
}

/// Whether the deny stands in for a decision the audit log could not take.
fn audit_failed(decision: &Decision) -> bool {
    decision
        .reason_codes
        .iter()
        .any(|code| code == crate::audit::AUDIT_UNAVAILABLE_REASON)
}

async fn emit_changed(
    session: &Session,
    newer: Inventory,
    reason: &str,
    context: &MessageContext,
) -> Option<Blocked> {
    let diff = {
        let learned = session.learned();
        learned.inventory.diff(&newer, &session.endpoint, reason)
    }?;
    let hook = traced::session_step(session, HookRequest::new(hooks::AGBOM_CHANGED, diff, None));
    let blocked = decide_inventory(session, &hook, context).await;
    if blocked.is_none() {
        session.learned().inventory = newer;
    }
    blocked
}

/// agbom hooks may be allowed or denied (a banned component, a blocked
/// hot-swap); anything else is treated as allow and recorded as such.
async fn decide_inventory(
    session: &Session,
    hook: &HookRequest,
    context: &MessageContext,
) -> Option<Blocked> {
    let decided = decide::decide(session, hook, &CancellationToken::new()).await?;
    let denied = decided.decision.decision == Disposition::Deny;
    let action = if denied {
        Action::Blocked
    } else {
        Action::Recorded
    };
    let receipt = decide::record_hook(session, hook, &decided, context, action, None).await;
    match (denied, receipt) {
        (false, Ok(_)) => None,
        (true, Ok(receipt)) => Some(Blocked {
            decision: decided.decision,
            entry_id: receipt.map(|receipt| receipt.entry_id_text()),
        }),
        (_, Err(err)) => Some(Blocked {
            decision: decide::audit_refusal(&err),
            entry_id: None,
        }),
    }
}
