//! Gateway facts a policy may use that are not on the ACS wire.
//!
//! A remote Guardian sees only the envelope; the embedded Rego engine also
//! knows which route and transport a session came through and how the
//! server described the tool being called. These facts are gathered only
//! for a Guardian that reads them ([`crate::guardian::Guardian::wants_context`]),
//! so the rules engine's hot path does not pay for them.

use std::sync::{Arc, RwLock};

use foldhash::HashMap;
use serde_json::{Map, Value};
use tokio::sync::watch;

use super::agbom::Inventory;

/// What the gateway knows about one hook beyond its envelope.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GatewayContext {
    /// The `[[upstream]]` route name.
    pub route: String,
    /// The downstream transport (`stdio`, `http`, `ws`, `sse`).
    pub transport: String,
    /// The agent's network address, when the transport has one.
    pub client_address: Option<String>,
    /// The server's definition of the tool the hook concerns (its
    /// `tools/list` entry: description, schemas, annotations), when known.
    pub tool: Option<Arc<Value>>,
    /// The `[[aggregate]]` whose agent session this route serves, when it
    /// is one upstream of a virtual server.
    pub aggregate: Option<String>,
    /// The tool's name as the agent of a virtual server calls it
    /// (`everything__echo`), beside its own name in the payload.
    pub called_as: Option<String>,
    /// The `[[policy.limit]]` entries the call falls under and where its
    /// caller stands under each (a JSON array of
    /// `policy::limit::LimitUsage`), when limits are configured.
    pub limits: Option<Value>,
}

impl GatewayContext {
    /// `input.context`: `route`, `transport`, and `client_address`, `tool`
    /// and `limits` when known.
    pub fn to_value(&self) -> Value {
        let mut map = Map::with_capacity(5);
        map.insert("route".into(), Value::from(self.route.as_str()));
        map.insert("transport".into(), Value::from(self.transport.as_str()));
        if let Some(address) = &self.client_address {
            map.insert("client_address".into(), Value::from(address.as_str()));
        }
        if let Some(tool) = &self.tool {
            map.insert("tool".into(), (**tool).clone());
        }
        if let Some(aggregate) = &self.aggregate {
            map.insert("aggregate".into(), Value::from(aggregate.as_str()));
        }
        if let Some(called_as) = &self.called_as {
            map.insert("called_as".into(), Value::from(called_as.as_str()));
        }
        if let Some(limits) = &self.limits {
            map.insert("limits".into(), limits.clone());
        }
        Value::Object(map)
    }
}

/// One upstream's place in a virtual server, shared by the router (which
/// gives out the names) and the upstream's relay session (whose hooks name
/// both): the aggregate, the name the agent knows each tool by, and the
/// upstream's inventory, which goes to the Guardian in the virtual
/// server's one `agbom/snapshot` rather than in a snapshot of its own.
///
/// An upstream that comes back during the session (a *return*) reports
/// its inventory itself, as an `agbom/changed` adding its components
/// again; the Guardian may refuse that.
#[derive(Debug)]
pub struct VirtualRoute {
    /// The `[[aggregate]]` name.
    pub aggregate: String,
    called_as: RwLock<HashMap<String, Arc<str>>>,
    inventory: watch::Sender<Option<Arc<Inventory>>>,
    returning: bool,
    refusal: watch::Sender<Option<String>>,
}

impl VirtualRoute {
    /// An upstream of the aggregate `aggregate`, no names given out yet.
    pub fn new(aggregate: impl Into<String>) -> Self {
        Self {
            aggregate: aggregate.into(),
            called_as: RwLock::default(),
            inventory: watch::Sender::new(None),
            returning: false,
            refusal: watch::Sender::new(None),
        }
    }

    /// An upstream of the aggregate `aggregate` started again after it
    /// died or did not start.
    pub fn returning(aggregate: impl Into<String>) -> Self {
        Self {
            returning: true,
            ..Self::new(aggregate)
        }
    }

    /// Whether the upstream is coming back during the session.
    pub fn is_return(&self) -> bool {
        self.returning
    }

    /// The Guardian refused the returning upstream's inventory.
    pub fn report_refusal(&self, reason: String) {
        self.refusal.send_replace(Some(reason));
    }

    /// Why the Guardian refused the returning upstream, once it has.
    pub async fn refusal(&self) -> String {
        let mut refusal = self.refusal.subscribe();
        let reason = match refusal.wait_for(Option::is_some).await {
            Ok(reason) => reason.clone(),
            Err(_) => None,
        };
        match reason {
            Some(reason) => reason,
            // The sender lives as long as `self`: nothing will ever come.
            None => std::future::pending().await,
        }
    }

    /// Hands over the upstream's inventory, read where a plain route would
    /// send its `agbom/snapshot`.
    pub fn report_inventory(&self, inventory: Inventory) {
        self.inventory.send_replace(Some(Arc::new(inventory)));
    }

    /// The upstream's inventory, once its relay session has read it.
    pub async fn reported_inventory(&self) -> Arc<Inventory> {
        let mut reported = self.inventory.subscribe();
        loop {
            if let Some(inventory) = reported.borrow_and_update().clone() {
                return inventory;
            }
            // The sender lives as long as `self`: `changed` fails only
            // if it were dropped, and then nothing will ever come.
            if reported.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Notes that the agent knows the tool `original` as `exposed`.
    pub fn note(&self, original: &str, exposed: &str) {
        if self.called_as(original).as_deref() == Some(exposed) {
            return;
        }
        self.called_as
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(original.to_owned(), exposed.into());
    }

    /// The name the agent knows the tool `original` by.
    pub fn called_as(&self, original: &str) -> Option<Arc<str>> {
        self.called_as
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(original)
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_facts_are_left_out() {
        let context = GatewayContext {
            route: "fs".into(),
            transport: "stdio".into(),
            ..GatewayContext::default()
        };
        assert_eq!(
            context.to_value(),
            json!({"route": "fs", "transport": "stdio"})
        );
        let tool = Arc::new(json!({"name": "rm", "annotations": {"destructiveHint": true}}));
        let context = GatewayContext {
            client_address: Some("127.0.0.1:5000".into()),
            tool: Some(tool.clone()),
            ..context
        };
        let value = context.to_value();
        assert_eq!(value["tool"], *tool);
        assert_eq!(value["client_address"], "127.0.0.1:5000");
    }

    #[test]
    fn a_virtual_servers_names_are_both_there() {
        let route = VirtualRoute::new("all");
        route.note("echo", "everything__echo");
        let context = GatewayContext {
            route: "everything".into(),
            transport: "http".into(),
            aggregate: Some(route.aggregate.clone()),
            called_as: route.called_as("echo").map(|name| name.to_string()),
            ..GatewayContext::default()
        };
        let value = context.to_value();
        assert_eq!(value["aggregate"], "all");
        assert_eq!(value["called_as"], "everything__echo");
        assert_eq!(route.called_as("other"), None);
    }

    #[tokio::test]
    async fn an_inventory_reported_is_there_for_whoever_waits() {
        let route = Arc::new(VirtualRoute::new("all"));
        let waiting = tokio::spawn({
            let route = route.clone();
            async move { route.reported_inventory().await }
        });
        route.report_inventory(Inventory::default());
        assert_eq!(*waiting.await.unwrap(), Inventory::default());
        assert_eq!(*route.reported_inventory().await, Inventory::default());
    }

    #[tokio::test]
    async fn a_returning_upstreams_refusal_is_there_for_whoever_waits() {
        let route = Arc::new(VirtualRoute::returning("all"));
        assert!(route.is_return() && !VirtualRoute::new("all").is_return());
        let waiting = tokio::spawn({
            let route = route.clone();
            async move { route.refusal().await }
        });
        route.report_refusal("banned".into());
        assert_eq!(waiting.await.unwrap(), "banned");
    }
}
