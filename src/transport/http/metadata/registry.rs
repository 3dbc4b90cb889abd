//! What each route's tools mirror into headers, learned from the
//! `tools/list` results the proxy relays (any session, either era) or
//! reads itself. The agent-facing server checks `Mcp-Param-*` against it
//! and the upstream client writes `Mcp-Param-*` from it; neither owns the
//! sessions that see the lists, so the table is process-wide, keyed by
//! route.
//!
//! A tool whose annotations are invalid is logged and left out: its calls
//! are treated as calls to a tool the proxy knows nothing about.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, RwLock};

use serde_json::Value;

use super::params::{param_headers, ParamHeader};

/// A tool's header annotations, shared.
pub type ToolHeaders = Arc<[ParamHeader]>;

static ROUTES: LazyLock<RwLock<HashMap<String, HashMap<String, ToolHeaders>>>> =
    LazyLock::new(|| RwLock::new(HashMap::new()));

/// Records the tools of one `tools/list` result page on `route`.
pub fn learn(route: &str, tools: &[Value]) {
    let mut learned = Vec::with_capacity(tools.len());
    for tool in tools {
        let Some(name) = tool.get("name").and_then(Value::as_str) else {
            continue;
        };
        let schema = tool.get("inputSchema").unwrap_or(&Value::Null);
        match param_headers(schema) {
            Ok(headers) => learned.push((name.to_owned(), ToolHeaders::from(headers))),
            Err(err) => {
                tracing::warn!(route, tool = name, %err, "ignoring the tool's x-mcp-header annotations");
                learned.push((name.to_owned(), ToolHeaders::from(Vec::new())));
            }
        }
    }
    let mut routes = ROUTES.write().unwrap_or_else(|e| e.into_inner());
    routes.entry(route.to_owned()).or_default().extend(learned);
}

/// What `tool` on `route` mirrors; `None` while the tool is unknown.
pub fn lookup(route: &str, tool: &str) -> Option<ToolHeaders> {
    let routes = ROUTES.read().unwrap_or_else(|e| e.into_inner());
    routes.get(route)?.get(tool).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tools_are_learned_per_route() {
        let route = "registry-test-route";
        assert!(lookup(route, "sql").is_none());
        learn(
            route,
            &[
                json!({"name": "sql", "inputSchema": {"type": "object", "properties": {
                    "region": {"type": "string", "x-mcp-header": "Region"}}}}),
                json!({"name": "bad", "inputSchema": {"properties": {
                    "n": {"type": "number", "x-mcp-header": "N"}}}}),
                json!({"inputSchema": {}}),
            ],
        );
        let sql = lookup(route, "sql").unwrap();
        assert_eq!(sql[0].name, "Region");
        assert!(lookup(route, "bad").unwrap().is_empty());
        assert!(lookup("another-route", "sql").is_none());
    }
}
