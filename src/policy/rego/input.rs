//! The `input` document a Rego policy sees for one hook.
//!
//! `input.method` and `input.params` are the hook exactly as a remote
//! Guardian receives it (the JSON-RPC envelope without `jsonrpc` and
//! `id`), so a policy can move between the embedded engine and a Rego
//! based remote Guardian unchanged. `input.context` carries the gateway's
//! own facts (route, transport, the tool's definition), which are not on
//! the ACS wire.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::error::RegoError;
use crate::hooks::{GatewayContext, HookRequest, Metadata, ACS_VERSION};

/// The `input` document as JSON.
pub fn document(
    hook: &HookRequest,
    metadata: &Metadata,
    context: Option<&GatewayContext>,
) -> Value {
    let mut input = Map::with_capacity(3);
    input.insert("method".into(), Value::from(hook.method.as_str()));
    input.insert("params".into(), hook.params(metadata));
    input.insert(
        "context".into(),
        context.map_or_else(|| Value::Object(Map::new()), GatewayContext::to_value),
    );
    Value::Object(input)
}

/// The `input` document in regorus's value model, the same as
/// [`document`] gives, built without the JSON tree in between (which would
/// copy the payload once more).
pub(super) fn build(
    hook: &HookRequest,
    metadata: &Metadata,
    context: Option<&GatewayContext>,
) -> Result<regorus::Value, RegoError> {
    let mut params = BTreeMap::new();
    params.insert(key("acs_version"), ACS_VERSION.into());
    params.insert(key("request_id"), hook.request_id.to_string().into());
    params.insert(key("timestamp"), hook.timestamp.as_str().into());
    params.insert(key("metadata"), convert(&metadata.to_value()));
    params.insert(key("payload"), convert(&hook.payload));
    if let Some(tenant) = metadata.tenant() {
        params.insert(key("tenant_id"), tenant.into());
    }
    let context = context.map_or_else(|| Value::Object(Map::new()), GatewayContext::to_value);
    let mut input = BTreeMap::new();
    input.insert(key("method"), hook.method.as_str().into());
    input.insert(key("params"), params.into());
    input.insert(key("context"), convert(&context));
    Ok(input.into())
}

fn key(name: &str) -> regorus::Value {
    regorus::Value::from(name)
}

/// One JSON value in regorus's value model.
fn convert(value: &Value) -> regorus::Value {
    match value {
        Value::Null => regorus::Value::Null,
        Value::Bool(flag) => (*flag).into(),
        Value::Number(number) => {
            if let Some(unsigned) = number.as_u64() {
                unsigned.into()
            } else if let Some(signed) = number.as_i64() {
                signed.into()
            } else {
                number.as_f64().map_or(regorus::Value::Null, Into::into)
            }
        }
        Value::String(text) => text.as_str().into(),
        Value::Array(items) => items.iter().map(convert).collect::<Vec<_>>().into(),
        Value::Object(members) => members
            .iter()
            .map(|(name, member)| (key(name), convert(member)))
            .collect::<BTreeMap<_, _>>()
            .into(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde::Deserialize;
    use serde_json::json;

    use super::*;
    use crate::hooks::{Identity, IdentityDescriptor};

    #[test]
    fn built_directly_it_equals_the_json_document() {
        let hook = HookRequest::new(
            "steps/toolCallRequest",
            json!({"tool": {"name": "echo"}, "arguments": {"n": {"value": -3}, "x": 1.5,
                   "big": 18446744073709551615_u64, "list": [null, true, "s"]}}),
            Some("echo".into()),
        );
        let metadata = Metadata {
            agent_id: "agent".into(),
            session_id: uuid::Uuid::nil(),
            environment: Some("production".into()),
            user: Some(Arc::new(Identity {
                user_id: "alice".into(),
                roles: vec!["dev".into()],
                tenant: Some("acme".into()),
                descriptor: IdentityDescriptor::Configured,
            })),
        };
        let context = GatewayContext {
            route: "demo".into(),
            transport: "http".into(),
            client_address: Some("127.0.0.1:1".into()),
            tool: Some(Arc::new(json!({"annotations": {"readOnlyHint": true}}))),
            limits: Some(json!([{"name": "l", "remaining": 2}])),
            aggregate: Some("all".into()),
            called_as: Some("demo__echo".into()),
        };
        for context in [None, Some(&context)] {
            let via_json =
                regorus::Value::deserialize(&document(&hook, &metadata, context)).unwrap();
            assert_eq!(build(&hook, &metadata, context).unwrap(), via_json);
        }
    }
}
