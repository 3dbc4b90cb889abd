//! The metadata headers a 2026-07-28 request body calls for: the values
//! the server compares the agent's headers with, and the ones the client
//! writes after the body may have been rewritten.

use serde_json::Value;

use super::params::{argument_text, ParamHeader};
use super::META_VERSION;

/// What a request's headers must say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expected {
    /// `params._meta["io.modelcontextprotocol/protocolVersion"]`.
    pub version: Option<String>,
    /// `method`.
    pub method: Option<String>,
    /// `Mcp-Name`'s value, for the methods that have one.
    pub name: Option<String>,
    /// `Mcp-Param-{name}` and its value, for a `tools/call`.
    pub params: Vec<(String, String)>,
}

impl Expected {
    /// The headers `body` calls for, with `tool` the annotations of the
    /// tool a `tools/call` names (when known).
    pub fn of(body: &Value, tool: Option<&[ParamHeader]>) -> Self {
        let method = body.get("method").and_then(Value::as_str);
        let params = body.get("params").unwrap_or(&Value::Null);
        let text = |value: Option<&Value>| value.and_then(Value::as_str).map(str::to_owned);
        let version = text(params.get("_meta").and_then(|meta| meta.get(META_VERSION)));
        let name = method.and_then(|method| name_field(method).and_then(|f| text(params.get(f))));
        let arguments = params.get("arguments").unwrap_or(&Value::Null);
        let mirrored = match (method, tool) {
            (Some("tools/call"), Some(tool)) => tool
                .iter()
                .filter_map(|header| {
                    argument_text(arguments, &header.path).map(|text| (header.name.clone(), text))
                })
                .collect(),
            _ => Vec::new(),
        };
        Self {
            version,
            method: method.map(str::to_owned),
            name,
            params: mirrored,
        }
    }
}

/// The `params` field `Mcp-Name` mirrors for `method`, if any.
pub fn name_field(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ if method.starts_with("tasks/") => Some("taskId"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tools_call_mirrors_name_version_and_annotated_arguments() {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "sql", "arguments": {"region": "eu", "query": "select 1"},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}});
        let tool = [ParamHeader {
            name: "Region".into(),
            path: vec!["region".into()],
        }];
        let expected = Expected::of(&body, Some(&tool));
        assert_eq!(expected.version.as_deref(), Some("2026-07-28"));
        assert_eq!(expected.method.as_deref(), Some("tools/call"));
        assert_eq!(expected.name.as_deref(), Some("sql"));
        assert_eq!(expected.params, [("Region".to_owned(), "eu".to_owned())]);
        assert!(Expected::of(&body, None).params.is_empty());
    }

    #[test]
    fn names_come_from_the_method_s_field() {
        let read = json!({"method": "resources/read", "params": {"uri": "file:///a"}});
        assert_eq!(Expected::of(&read, None).name.as_deref(), Some("file:///a"));
        let task = json!({"method": "tasks/get", "params": {"taskId": "t-1"}});
        assert_eq!(Expected::of(&task, None).name.as_deref(), Some("t-1"));
        let list = json!({"method": "tools/list", "params": {"name": "x"}});
        assert_eq!(Expected::of(&list, None).name, None);
    }
}
