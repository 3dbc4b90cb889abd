//! The `input` document a Rego policy sees for one hook.
//!
//! `input.method` and `input.params` are the hook exactly as a remote
//! Guardian receives it (the JSON-RPC envelope without `jsonrpc` and
//! `id`), so a policy can move between the embedded engine and a Rego
//! based remote Guardian unchanged. `input.context` carries the gateway's
//! own facts (route, transport, the tool's definition), which are not on
//! the ACS wire.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::error::RegoError;
use crate::hooks::{GatewayContext, HookRequest, Metadata};

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

/// The `input` document in regorus's value model.
pub(super) fn build(
    hook: &HookRequest,
    metadata: &Metadata,
    context: Option<&GatewayContext>,
) -> Result<regorus::Value, RegoError> {
    let input = document(hook, metadata, context);
    regorus::Value::deserialize(&input).map_err(|err| RegoError::Input(err.to_string()))
}
