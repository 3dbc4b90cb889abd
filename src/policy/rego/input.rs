//! The `input` document a Rego policy sees for one hook.
//!
//! `input.method` and `input.params` are the hook exactly as a remote
//! Guardian receives it (the JSON-RPC envelope without `jsonrpc` and
//! `id`), so a policy can move between the embedded engine and a Rego
//! based remote Guardian unchanged. `input.context` carries the gateway's
//! own facts (route, transport, the tool's definition), which are not on
//! the ACS wire.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;

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
    params.insert(key("metadata"), metadata_value(metadata));
    params.insert(key("payload"), convert(hook.payload.tree()));
    if let Some(tenant) = metadata.tenant() {
        params.insert(key("tenant_id"), tenant.into());
    }
    let mut input = BTreeMap::new();
    input.insert(key("method"), hook.method.as_str().into());
    input.insert(key("params"), params.into());
    input.insert(
        key("context"),
        context.map_or_else(regorus::Value::new_object, context_value),
    );
    Ok(input.into())
}

thread_local! {
    /// The metadata of the last hook built on this thread, converted:
    /// consecutive hooks on a thread are mostly one session's, whose
    /// metadata does not change between them.
    static LAST_METADATA: RefCell<Option<(Metadata, regorus::Value)>> = const { RefCell::new(None) };

    /// The tool definition of the last hook built on this thread,
    /// converted: a definition is shared from the inventory and unchanged
    /// until the server lists a new one, so the same `Arc` means the same
    /// definition.
    static LAST_TOOL: RefCell<Option<(Arc<Value>, regorus::Value)>> = const { RefCell::new(None) };
}

/// `params.metadata`, converted once per session and thread.
fn metadata_value(metadata: &Metadata) -> regorus::Value {
    LAST_METADATA.with_borrow_mut(|last| match last {
        Some((seen, value)) if seen == metadata => value.clone(),
        _ => {
            let value = convert(&metadata.to_value());
            *last = Some((metadata.clone(), value.clone()));
            value
        }
    })
}

/// `input.context`, as [`GatewayContext::to_value`] gives it.
fn context_value(context: &GatewayContext) -> regorus::Value {
    let mut map = BTreeMap::new();
    map.insert(key("route"), context.route.as_str().into());
    map.insert(key("transport"), context.transport.as_str().into());
    let optional = [
        ("client_address", &context.client_address),
        ("aggregate", &context.aggregate),
        ("called_as", &context.called_as),
    ];
    for (name, value) in optional {
        if let Some(value) = value {
            map.insert(key(name), value.as_str().into());
        }
    }
    if let Some(tool) = &context.tool {
        map.insert(key("tool"), tool_value(tool));
    }
    if let Some(limits) = &context.limits {
        map.insert(key("limits"), convert(limits));
    }
    map.into()
}

/// `input.context.tool`, converted once per definition and thread.
fn tool_value(tool: &Arc<Value>) -> regorus::Value {
    LAST_TOOL.with_borrow_mut(|last| match last {
        Some((seen, value)) if Arc::ptr_eq(seen, tool) => value.clone(),
        _ => {
            let value = convert(tool);
            *last = Some((Arc::clone(tool), value.clone()));
            value
        }
    })
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
            assert_eq!(build(&hook, &metadata, context).unwrap(), via_json);
        }
        let other_session = Metadata {
            session_id: uuid::Uuid::from_u128(1),
            user: None,
            ..metadata.clone()
        };
        let other_tool = GatewayContext {
            tool: Some(Arc::new(json!({"annotations": {"destructiveHint": true}}))),
            ..context.clone()
        };
        for (metadata, context) in [(&other_session, &other_tool), (&metadata, &context)] {
            let via_json =
                regorus::Value::deserialize(&document(&hook, metadata, Some(context))).unwrap();
            assert_eq!(build(&hook, metadata, Some(context)).unwrap(), via_json);
        }
    }
}
