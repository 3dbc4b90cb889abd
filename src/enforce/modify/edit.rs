//! Making the changes of an already validated `modifications` object on a
//! document: content replacement, redactions and parameter overrides.
//! [`apply`](super::apply) calls in here on a copy, so an error part-way
//! through leaves the caller's document untouched.

use serde_json::{json, Map, Value};

use super::pointer::{encode_pointer, resolve_mut};
use super::{parse_arguments, ModifyError, Target};
use crate::guardian::decision::{Modifications, Redaction};

/// Applies `m`, which [`validate`](super::validate) accepted for `target`.
pub(super) fn apply_validated(
    doc: &mut Value,
    m: &Modifications,
    target: Target,
) -> Result<(), ModifyError> {
    if let Some(content) = &m.modified_content {
        return replace_content(doc, content, target);
    }
    // Redactions first, so they address the document the Guardian saw;
    // disjointness means overrides cannot change what they hit.
    for redaction in &m.redactions {
        redact(doc, redaction)?;
    }
    for (key, value) in &m.parameter_overrides {
        override_argument(doc, key, value, target)?;
    }
    Ok(())
}

fn replace_content(doc: &mut Value, content: &str, target: Target) -> Result<(), ModifyError> {
    let (member, value) = match target {
        Target::ToolCallRequest => ("arguments", wrap_arguments(parse_arguments(content)?)),
        Target::ToolCallResult => ("outputs", json!([{ "value": content }])),
        Target::WrappedMcpRequest | Target::WrappedMcpResponse => {
            return Err(ModifyError::ModifiedContentUnsupported { target })
        }
    };
    document_object(doc, target)?.insert(member.to_owned(), value);
    Ok(())
}

/// Gives each argument the payload's `{value}` shape.
fn wrap_arguments(arguments: Map<String, Value>) -> Value {
    let wrapped = arguments
        .into_iter()
        .map(|(name, value)| (name, json!({ "value": value })))
        .collect();
    Value::Object(wrapped)
}

fn redact(doc: &mut Value, redaction: &Redaction) -> Result<(), ModifyError> {
    *resolve_mut(doc, &redaction.path)? = Value::String(redaction.replacement.clone());
    Ok(())
}

fn override_argument(
    doc: &mut Value,
    key: &str,
    value: &Value,
    target: Target,
) -> Result<(), ModifyError> {
    match target {
        Target::ToolCallRequest => {
            let payload = document_object(doc, target)?;
            let arguments = member_object(payload, "arguments", key, "/arguments")?;
            let argument_pointer = encode_pointer(["arguments", key]);
            let argument = member_object(arguments, key, key, &argument_pointer)?;
            argument.insert("value".to_owned(), value.clone());
        }
        Target::WrappedMcpRequest => {
            let arguments = member_object(mcp_params(doc)?, "arguments", key, "/params/arguments")?;
            arguments.insert(key.to_owned(), value.clone());
        }
        Target::ToolCallResult | Target::WrappedMcpResponse => {
            return Err(ModifyError::OverridesUnsupported { target })
        }
    }
    Ok(())
}

/// The document's top-level object, which every change lands inside; a
/// document that is not one cannot be what `target` describes.
fn document_object(
    doc: &mut Value,
    target: Target,
) -> Result<&mut Map<String, Value>, ModifyError> {
    doc.as_object_mut()
        .ok_or(ModifyError::DocumentNotObject { target })
}

/// The `params` object of an MCP request. It is not created: a request
/// without params is not one whose arguments a Guardian could have seen.
pub(super) fn mcp_params(message: &mut Value) -> Result<&mut Map<String, Value>, ModifyError> {
    document_object(message, Target::WrappedMcpRequest)?
        .get_mut("params")
        .and_then(Value::as_object_mut)
        .ok_or(ModifyError::ParamsNotObject)
}

/// The object member `name`, created empty when absent: an override may
/// introduce an argument the agent did not send. `Map::insert` keeps an
/// existing member's position, so overriding never reorders keys.
fn member_object<'a>(
    parent: &'a mut Map<String, Value>,
    name: &str,
    key: &str,
    pointer: &str,
) -> Result<&'a mut Map<String, Value>, ModifyError> {
    parent
        .entry(name)
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| ModifyError::OverrideParentNotObject {
            key: key.to_owned(),
            pointer: pointer.to_owned(),
        })
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::super::test_support::{applied, doc, mods, redact_only, tool_call_message};
    use super::super::{apply, ModifyError, Target};
    use crate::guardian::decision::Modifications;

    fn tool_request_payload() -> Value {
        doc(
            r#"{"tool":{"name":"send"},"arguments":{"to":{"value":"a@b.c","provenance":{"origin":"user_input"}},"body":{"value":"secret"}}}"#,
        )
    }

    fn tool_result_payload() -> Value {
        doc(
            r#"{"tool":{"name":"send"},"exit_status":"success","outputs":[{"value":"sent"},{"value":{"id":1}}]}"#,
        )
    }

    #[test]
    fn redaction_replaces_any_type_with_the_replacement_string() {
        let value = doc(r#"{"n":1,"o":{"k":[1]},"z":null,"b":true}"#);
        let m = mods(json!({ "redactions": [
            { "path": "/n" }, { "path": "/o" }, { "path": "/z", "replacement": "***" }, { "path": "/b" }
        ] }));
        let out = applied(value, &m, Target::WrappedMcpResponse);
        assert_eq!(
            out,
            r#"{"n":"[REDACTED]","o":"[REDACTED]","z":"***","b":"[REDACTED]"}"#
        );
    }

    #[test]
    fn untouched_members_keep_order_and_bytes() {
        let text = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"send","arguments":{"to":"a@b.c","body":"secret","n":12345678901234567890123},"x-unknown":{"z":1,"a":[1.50,-0.0,1e-7]}},"zeta":true}"#;
        let m = mods(json!({
            "redactions": [{ "path": "/params/arguments/body" }],
            "parameter_overrides": { "to": "x@y.z" }
        }));
        let out = applied(doc(text), &m, Target::WrappedMcpRequest);
        let expected = text
            .replace(r#""secret""#, r#""[REDACTED]""#)
            .replace("a@b.c", "x@y.z");
        assert_eq!(out, expected);
    }

    #[test]
    fn exponent_spelling_is_normalised_by_serde_json() {
        // A limit of re-serialising, pinned so a serde_json change is noticed:
        // digits survive but an exponent is written as `e+N`. Same number,
        // different bytes, so only rewritten messages are affected.
        let value = doc(r#"{"a":2E10,"b":"x"}"#);
        let out = applied(value, &redact_only("/b"), Target::WrappedMcpResponse);
        assert_eq!(out, r#"{"a":2e+10,"b":"[REDACTED]"}"#);
    }

    #[test]
    fn override_values_keep_number_digits() {
        let m: Modifications = serde_json::from_str(
            r#"{"parameter_overrides":{"limit":12345678901234567890123,"ratio":0.10}}"#,
        )
        .unwrap();
        let out = applied(tool_call_message(), &m, Target::WrappedMcpRequest);
        assert!(
            out.contains(r#""limit":12345678901234567890123,"ratio":0.10}"#),
            "{out}"
        );
    }

    #[test]
    fn wrapped_override_replaces_existing_argument_in_place() {
        let m = mods(json!({ "parameter_overrides": { "to": { "list": ["x"] } } }));
        let out = applied(tool_call_message(), &m, Target::WrappedMcpRequest);
        assert!(
            out.ends_with(r#""arguments":{"to":{"list":["x"]},"body":"secret"}}}"#),
            "{out}"
        );
    }

    #[test]
    fn wrapped_override_adds_missing_argument() {
        let m = mods(json!({ "parameter_overrides": { "cc": "audit@corp" } }));
        let out = applied(tool_call_message(), &m, Target::WrappedMcpRequest);
        assert!(
            out.ends_with(r#""arguments":{"to":"a@b.c","body":"secret","cc":"audit@corp"}}}"#),
            "{out}"
        );
    }

    #[test]
    fn wrapped_override_creates_arguments_object() {
        let value = doc(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#);
        let m = mods(json!({ "parameter_overrides": { "a": 1 } }));
        let out = applied(value, &m, Target::WrappedMcpRequest);
        assert_eq!(
            out,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":1}}}"#
        );
    }

    #[test]
    fn wrapped_override_without_params_is_unappliable() {
        let mut value = doc(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
        let m = mods(json!({ "parameter_overrides": { "a": 1 } }));
        assert_eq!(
            apply(&mut value, &m, Target::WrappedMcpRequest),
            Err(ModifyError::ParamsNotObject)
        );
    }

    #[test]
    fn payload_override_sets_value_and_keeps_provenance() {
        let m = mods(json!({ "parameter_overrides": { "to": "x@y.z", "cc": true } }));
        let out = applied(tool_request_payload(), &m, Target::ToolCallRequest);
        assert_eq!(
            out,
            r#"{"tool":{"name":"send"},"arguments":{"to":{"value":"x@y.z","provenance":{"origin":"user_input"}},"body":{"value":"secret"},"cc":{"value":true}}}"#
        );
    }

    #[test]
    fn payload_override_on_malformed_argument_is_unappliable() {
        let mut value = doc(r#"{"tool":{"name":"t"},"arguments":{"a/b":"bare"}}"#);
        let m = mods(json!({ "parameter_overrides": { "a/b": 1 } }));
        let err = apply(&mut value, &m, Target::ToolCallRequest).unwrap_err();
        assert_eq!(
            err,
            ModifyError::OverrideParentNotObject {
                key: "a/b".into(),
                pointer: "/arguments/a~1b".into()
            }
        );
    }

    #[test]
    fn payload_redaction_and_override_apply_together() {
        let m = mods(json!({
            "redactions": [{ "path": "/arguments/body/value", "replacement": "-" }],
            "parameter_overrides": { "to": "x@y.z" }
        }));
        let out = applied(tool_request_payload(), &m, Target::ToolCallRequest);
        assert_eq!(
            out,
            r#"{"tool":{"name":"send"},"arguments":{"to":{"value":"x@y.z","provenance":{"origin":"user_input"}},"body":{"value":"-"}}}"#
        );
    }

    #[test]
    fn modified_content_replaces_tool_request_arguments() {
        let m = mods(json!({ "modified_content": r#"{"to":"x@y.z","n":1.50}"# }));
        let out = applied(tool_request_payload(), &m, Target::ToolCallRequest);
        assert_eq!(
            out,
            r#"{"tool":{"name":"send"},"arguments":{"to":{"value":"x@y.z"},"n":{"value":1.50}}}"#
        );
    }

    #[test]
    fn modified_content_becomes_the_single_tool_output() {
        let m = mods(json!({ "modified_content": "summary only" }));
        let out = applied(tool_result_payload(), &m, Target::ToolCallResult);
        assert_eq!(
            out,
            r#"{"tool":{"name":"send"},"exit_status":"success","outputs":[{"value":"summary only"}]}"#
        );
    }

    #[test]
    fn modified_content_on_non_object_payload_is_unappliable() {
        let mut value = json!([1]);
        let m = mods(json!({ "modified_content": "x" }));
        let target = Target::ToolCallResult;
        assert_eq!(
            apply(&mut value, &m, target),
            Err(ModifyError::DocumentNotObject { target })
        );
    }

    #[test]
    fn default_replacement_comes_from_the_wire_type() {
        let out = applied(
            tool_result_payload(),
            &redact_only("/outputs/0/value"),
            Target::ToolCallResult,
        );
        assert!(
            out.contains(r#""outputs":[{"value":"[REDACTED]"},{"value":{"id":1}}]"#),
            "{out}"
        );
    }
}
