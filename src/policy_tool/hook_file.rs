//! A hook written down: what `policy eval` reads and each fixture case holds.
//!
//! The file is the ACS request a remote Guardian would receive (`jsonrpc`
//! and `id` may be left out; `request_id`, `timestamp` and the session id
//! are made up when absent), plus an optional `context` object for
//! `input.context` and an optional `tool` naming the tool when the payload
//! does not:
//!
//! ```json
//! {"method": "steps/toolCallRequest",
//!  "params": {"metadata": {"agent_id": "a", "environment": "production",
//!                          "user_context": {"user_id": "alice", "roles": ["dev"]}},
//!             "payload": {"tool": {"name": "write_file"}, "arguments": {}}},
//!  "context": {"route": "fs", "transport": "stdio",
//!              "tool": {"name": "write_file", "annotations": {"destructiveHint": true}}}}
//! ```

use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;
use uuid::Uuid;

use crate::hooks::{GatewayContext, HookRequest, Identity, IdentityDescriptor, Metadata};

/// A parsed hook file, ready to evaluate.
#[derive(Debug, Clone)]
pub struct HookFile {
    /// The hook.
    pub hook: HookRequest,
    /// Its envelope metadata.
    pub metadata: Metadata,
    /// `input.context`.
    pub context: GatewayContext,
}

#[derive(Deserialize)]
struct Written {
    method: String,
    #[serde(default)]
    params: Params,
    #[serde(default)]
    context: Option<WrittenContext>,
    #[serde(default)]
    tool: Option<String>,
}

#[derive(Deserialize, Default)]
struct Params {
    #[serde(default)]
    request_id: Option<String>,
    #[serde(default)]
    timestamp: Option<String>,
    #[serde(default)]
    metadata: WrittenMetadata,
    #[serde(default)]
    tenant_id: Option<String>,
    #[serde(default)]
    payload: Value,
}

#[derive(Deserialize, Default)]
struct WrittenMetadata {
    #[serde(default)]
    agent_id: Option<String>,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    environment: Option<String>,
    #[serde(default)]
    user_context: Option<UserContext>,
}

#[derive(Deserialize)]
struct UserContext {
    user_id: String,
    #[serde(default)]
    roles: Vec<String>,
}

#[derive(Deserialize, Default)]
struct WrittenContext {
    #[serde(default)]
    route: Option<String>,
    #[serde(default)]
    transport: Option<String>,
    #[serde(default)]
    client_address: Option<String>,
    #[serde(default)]
    tool: Option<Value>,
    #[serde(default)]
    aggregate: Option<String>,
    #[serde(default)]
    called_as: Option<String>,
    #[serde(default)]
    limits: Option<Value>,
}

impl HookFile {
    /// Reads a hook from its JSON form; the error says which member is wrong.
    pub fn from_value(value: &Value) -> Result<HookFile, String> {
        let written = Written::deserialize(value).map_err(|err| err.to_string())?;
        let params = written.params;
        let tool = written
            .tool
            .or_else(|| tool_name(&written.method, &params.payload));
        let mut hook = HookRequest::new(written.method, params.payload, tool.map(Arc::from));
        if let Some(id) = params.request_id {
            hook.request_id = uuid(&id, "params.request_id")?;
        }
        if let Some(timestamp) = params.timestamp {
            hook.timestamp = timestamp.into();
        }
        let written_metadata = params.metadata;
        let user = written_metadata.user_context.map(|user| {
            Arc::new(Identity {
                user_id: user.user_id,
                roles: user.roles,
                tenant: params.tenant_id,
                descriptor: IdentityDescriptor::Configured,
            })
        });
        let metadata = Metadata {
            agent_id: written_metadata
                .agent_id
                .unwrap_or_else(|| "policy-eval".to_owned()),
            session_id: match written_metadata.session_id {
                Some(id) => uuid(&id, "params.metadata.session_id")?,
                None => Uuid::new_v4(),
            },
            environment: written_metadata.environment,
            user,
        };
        let context = written.context.unwrap_or_default();
        let context = GatewayContext {
            route: context.route.unwrap_or_else(|| "upstream".to_owned()),
            transport: context.transport.unwrap_or_else(|| "stdio".to_owned()),
            client_address: context.client_address,
            tool: context.tool.map(Arc::new),
            aggregate: context.aggregate,
            called_as: context.called_as,
            limits: context.limits,
        };
        Ok(HookFile {
            hook,
            metadata,
            context,
        })
    }
}

fn uuid(text: &str, field: &str) -> Result<Uuid, String> {
    Uuid::parse_str(text).map_err(|err| format!("{field}: {err}"))
}

/// The tool a hook concerns, as the relay names it: `tool.name` of a tool
/// step, `params.name` of a wrapped `tools/call` request.
fn tool_name(method: &str, payload: &Value) -> Option<String> {
    let pointer = match method {
        crate::hooks::TOOL_CALL_REQUEST | crate::hooks::TOOL_CALL_RESULT => "/tool/name",
        "protocols/MCP/tools/call" => "/params/name",
        _ => return None,
    };
    payload
        .pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_metadata_user_and_context() {
        let file = HookFile::from_value(&json!({
            "jsonrpc": "2.0", "id": 7,
            "method": "steps/toolCallRequest",
            "params": {
                "metadata": {"environment": "production",
                             "user_context": {"user_id": "alice", "roles": ["dev"]}},
                "tenant_id": "acme",
                "payload": {"tool": {"name": "write_file"}, "arguments": {}}
            },
            "context": {"route": "fs", "tool": {"annotations": {"destructiveHint": true}}}
        }))
        .unwrap();
        assert_eq!(file.hook.tool.as_deref(), Some("write_file"));
        let user = file.metadata.user.as_ref().unwrap();
        assert_eq!(user.roles, ["dev"]);
        assert_eq!(file.metadata.tenant(), Some("acme"));
        assert_eq!(file.context.route, "fs");
        assert_eq!(file.context.transport, "stdio");
        assert!(file.context.tool.is_some());
    }

    #[test]
    fn a_wrapped_tools_call_names_its_tool() {
        let file = HookFile::from_value(&json!({
            "method": "protocols/MCP/tools/call",
            "params": {"payload": {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                   "params": {"name": "echo"}}}
        }))
        .unwrap();
        assert_eq!(file.hook.tool.as_deref(), Some("echo"));
        assert!(file.metadata.user.is_none());
    }

    #[test]
    fn a_missing_method_is_an_error() {
        let err = HookFile::from_value(&json!({"params": {}})).unwrap_err();
        assert!(err.contains("method"), "{err}");
    }
}
