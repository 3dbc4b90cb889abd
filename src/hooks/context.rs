//! Gateway facts a policy may use that are not on the ACS wire.
//!
//! A remote Guardian sees only the envelope; the embedded Rego engine also
//! knows which route and transport a session came through and how the
//! server described the tool being called. These facts are gathered only
//! for a Guardian that reads them ([`crate::guardian::Guardian::wants_context`]),
//! so the rules engine's hot path does not pay for them.

use std::sync::Arc;

use serde_json::{Map, Value};

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
        if let Some(limits) = &self.limits {
            map.insert("limits".into(), limits.clone());
        }
        Value::Object(map)
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
}
