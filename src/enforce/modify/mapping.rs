//! Carrying a `steps/*` decision onto the MCP message that is actually
//! forwarded: the Guardian saw a `steps/toolCallRequest` or
//! `steps/toolCallResult` payload, but the proxy forwards the `tools/call`
//! request or its response, so the decision's pointers must be translated.

use serde_json::{Map, Value};

use super::edit::mcp_params;
use super::pointer::{encode_pointer, parse_index, parse_pointer};
use super::{apply, parse_arguments, validate, ModifyError, Target};
use crate::guardian::decision::{Modifications, Redaction};

/// A `steps/toolCallRequest` decision expressed on the `tools/call` MCP
/// request that will be forwarded. It exists because `modified_content`
/// (replace all arguments) has no spelling as wire [`Modifications`] on an
/// MCP request, where §6.3 `modified_content` is refused.
#[derive(Debug, Clone, PartialEq)]
pub enum McpRequestRewrite {
    /// Redactions and overrides in MCP-message coordinates.
    Patch(Modifications),
    /// The new `params.arguments`, replacing the old one entirely.
    ReplaceArguments(Map<String, Value>),
}

impl McpRequestRewrite {
    /// Applies the rewrite to the MCP request, all-or-nothing.
    pub fn apply(&self, message: &mut Value) -> Result<(), ModifyError> {
        match self {
            McpRequestRewrite::Patch(m) => apply(message, m, Target::WrappedMcpRequest),
            McpRequestRewrite::ReplaceArguments(arguments) => {
                mcp_params(message)?
                    .insert("arguments".to_owned(), Value::Object(arguments.clone()));
                Ok(())
            }
        }
    }
}

/// Carries a `steps/toolCallRequest` decision onto the `tools/call` request
/// it was built from.
///
/// `m` is validated as a tool call request decision first. A redaction of
/// `/arguments/<k>/value<rest>` becomes `/params/arguments/<k><rest>`;
/// overrides keep their argument names; `modified_content` becomes a
/// replacement of `/params/arguments`. Any other redaction (e.g.
/// `/tool/name`) fails: renaming the tool or rewriting the provenance
/// wrapper has no counterpart in the MCP message.
pub fn tool_request_to_mcp(m: &Modifications) -> Result<McpRequestRewrite, ModifyError> {
    validate(m, Target::ToolCallRequest)?;
    if let Some(content) = &m.modified_content {
        return parse_arguments(content).map(McpRequestRewrite::ReplaceArguments);
    }
    let redactions = m
        .redactions
        .iter()
        .map(request_redaction_to_mcp)
        .collect::<Result<Vec<_>, _>>()?;
    // The mapping keeps argument names and the token structure below
    // `value`, so disjointness in the payload carries over unchanged.
    Ok(McpRequestRewrite::Patch(Modifications {
        modified_content: None,
        redactions,
        parameter_overrides: m.parameter_overrides.clone(),
    }))
}

/// Where each `outputs[i]` of a `steps/toolCallResult` payload came from:
/// entry `i` is the RFC 6901 pointer into the MCP response message whose
/// value was copied into `outputs[i].value` (e.g. `/result/content/0/text`,
/// `/result/structuredContent`). The hook builder fills it so enforcement
/// can carry redactions back onto the response it forwards.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OutputMap(pub Vec<String>);

/// Carries a `steps/toolCallResult` decision onto the MCP response the
/// outputs were built from.
///
/// `m` is validated as a tool call result decision first. A redaction of
/// `/outputs/<i>/value<rest>` becomes `<outputs.0[i]><rest>`; an index the
/// map does not know, or any other path, fails. `modified_content` fails
/// with [`ModifyError::ModifiedContentUnsupported`]: rebuilding an MCP
/// result from one string would have to guess which of `content`,
/// `structuredContent` and `_meta` to drop. The mapped object is validated
/// again as a wrapped response, which catches a map whose entries overlap.
pub fn tool_result_to_mcp(
    m: &Modifications,
    outputs: &OutputMap,
) -> Result<Modifications, ModifyError> {
    validate(m, Target::ToolCallResult)?;
    if m.modified_content.is_some() {
        return Err(ModifyError::ModifiedContentUnsupported {
            target: Target::WrappedMcpResponse,
        });
    }
    let redactions = m
        .redactions
        .iter()
        .map(|redaction| result_redaction_to_mcp(redaction, outputs))
        .collect::<Result<Vec<_>, _>>()?;
    let mapped = Modifications {
        redactions,
        ..Modifications::default()
    };
    validate(&mapped, Target::WrappedMcpResponse)?;
    Ok(mapped)
}

/// `/arguments/<k>/value<rest>` → `/params/arguments/<k><rest>`: the MCP
/// request carries each argument bare, without the `{value}` wrapper.
fn request_redaction_to_mcp(redaction: &Redaction) -> Result<Redaction, ModifyError> {
    let tokens = parse_pointer(&redaction.path)?;
    match tokens.as_slice() {
        [arguments, name, value, rest @ ..] if arguments == "arguments" && value == "value" => {
            let mapped = ["params", "arguments", name.as_str()]
                .into_iter()
                .chain(rest.iter().map(String::as_str));
            Ok(Redaction {
                path: encode_pointer(mapped),
                replacement: redaction.replacement.clone(),
            })
        }
        _ => Err(ModifyError::UnmappableRedaction {
            path: redaction.path.clone(),
            expected: "/arguments/<name>/value...",
        }),
    }
}

/// `/outputs/<i>/value<rest>` → `<outputs.0[i]><rest>`, through the map the
/// hook builder recorded while copying the outputs.
fn result_redaction_to_mcp(
    redaction: &Redaction,
    outputs: &OutputMap,
) -> Result<Redaction, ModifyError> {
    let tokens = parse_pointer(&redaction.path)?;
    match tokens.as_slice() {
        [outputs_token, index, value, rest @ ..]
            if outputs_token == "outputs" && value == "value" =>
        {
            let base = parse_index(index)
                .and_then(|i| outputs.0.get(i))
                .ok_or_else(|| ModifyError::UnknownOutput {
                    path: redaction.path.clone(),
                    index: index.clone(),
                    len: outputs.0.len(),
                })?;
            Ok(Redaction {
                path: format!("{base}{}", encode_pointer(rest.iter().map(String::as_str))),
                replacement: redaction.replacement.clone(),
            })
        }
        _ => Err(ModifyError::UnmappableRedaction {
            path: redaction.path.clone(),
            expected: "/outputs/<index>/value...",
        }),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::{
        doc, mods, redact_only, redaction_with_override, tool_call_message,
    };
    use super::*;

    fn tool_result_message() -> Value {
        doc(
            r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"token=abc"}],"structuredContent":{"token":"abc","ok":true}}}"#,
        )
    }

    // ---- steps/toolCallRequest → tools/call ----

    #[test]
    fn tool_request_redactions_map_to_params_arguments() {
        let m = mods(json!({ "redactions": [
            { "path": "/arguments/body/value" },
            { "path": "/arguments/a~1b/value/k~0/0", "replacement": "x" }
        ] }));
        let McpRequestRewrite::Patch(mapped) = tool_request_to_mcp(&m).unwrap() else {
            panic!("expected a patch");
        };
        let paths: Vec<_> = mapped
            .redactions
            .iter()
            .map(|r| (r.path.as_str(), r.replacement.as_str()))
            .collect();
        assert_eq!(
            paths,
            [
                ("/params/arguments/body", "[REDACTED]"),
                ("/params/arguments/a~1b/k~0/0", "x")
            ]
        );
    }

    #[test]
    fn tool_request_overrides_keep_argument_names() {
        let m = mods(
            json!({ "redactions": [{ "path": "/arguments/body/value" }], "parameter_overrides": { "to": "x@y.z" } }),
        );
        let rewrite = tool_request_to_mcp(&m).unwrap();
        let mut message = tool_call_message();
        rewrite.apply(&mut message).unwrap();
        assert_eq!(
            serde_json::to_string(&message).unwrap(),
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"send","arguments":{"to":"x@y.z","body":"[REDACTED]"}}}"#
        );
    }

    #[test]
    fn tool_request_modified_content_replaces_params_arguments() {
        let m =
            mods(json!({ "modified_content": r#"{"body":"hello","n":12345678901234567890123}"# }));
        let rewrite = tool_request_to_mcp(&m).unwrap();
        assert!(matches!(rewrite, McpRequestRewrite::ReplaceArguments(_)));
        let mut message = tool_call_message();
        rewrite.apply(&mut message).unwrap();
        assert_eq!(
            serde_json::to_string(&message).unwrap(),
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"send","arguments":{"body":"hello","n":12345678901234567890123}}}"#
        );
    }

    #[test]
    fn tool_request_rewrite_without_params_is_unappliable() {
        let rewrite = McpRequestRewrite::ReplaceArguments(Map::new());
        let mut message = doc(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#);
        assert_eq!(
            rewrite.apply(&mut message),
            Err(ModifyError::ParamsNotObject)
        );
    }

    #[test]
    fn tool_request_paths_outside_argument_values_are_unmappable() {
        for path in [
            "/tool/name",
            "/arguments/to",
            "/arguments/to/provenance",
            "/raw_command",
        ] {
            let err = tool_request_to_mcp(&redact_only(path)).unwrap_err();
            assert_eq!(
                err,
                ModifyError::UnmappableRedaction {
                    path: path.into(),
                    expected: "/arguments/<name>/value..."
                }
            );
        }
    }

    #[test]
    fn tool_request_mapping_validates_first() {
        let err = tool_request_to_mcp(&redaction_with_override("/arguments/to", "to")).unwrap_err();
        assert!(
            matches!(err, ModifyError::RedactionOverlapsOverride { .. }),
            "{err}"
        );
    }

    // ---- steps/toolCallResult → MCP response ----

    fn output_map() -> OutputMap {
        OutputMap(vec![
            "/result/content/0/text".into(),
            "/result/structuredContent".into(),
        ])
    }

    #[test]
    fn tool_result_redactions_map_through_output_map() {
        let m = mods(json!({ "redactions": [
            { "path": "/outputs/0/value" },
            { "path": "/outputs/1/value/token", "replacement": "***" }
        ] }));
        let mapped = tool_result_to_mcp(&m, &output_map()).unwrap();
        let paths: Vec<_> = mapped.redactions.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(
            paths,
            ["/result/content/0/text", "/result/structuredContent/token"]
        );

        let mut message = tool_result_message();
        apply(&mut message, &mapped, Target::WrappedMcpResponse).unwrap();
        assert_eq!(
            serde_json::to_string(&message).unwrap(),
            r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"[REDACTED]"}],"structuredContent":{"token":"***","ok":true}}}"#
        );
    }

    #[test]
    fn tool_result_unknown_output_is_rejected() {
        for index in ["2", "01", "-", "x"] {
            let path = format!("/outputs/{index}/value");
            let err = tool_result_to_mcp(&redact_only(&path), &output_map()).unwrap_err();
            assert_eq!(
                err,
                ModifyError::UnknownOutput {
                    path,
                    index: index.into(),
                    len: 2
                }
            );
        }
    }

    #[test]
    fn tool_result_paths_outside_output_values_are_unmappable() {
        for path in ["/exit_status", "/outputs/0", "/outputs/0/provenance"] {
            let err = tool_result_to_mcp(&redact_only(path), &output_map()).unwrap_err();
            assert_eq!(
                err,
                ModifyError::UnmappableRedaction {
                    path: path.into(),
                    expected: "/outputs/<index>/value..."
                }
            );
        }
    }

    #[test]
    fn tool_result_modified_content_is_unsupported() {
        let m = mods(json!({ "modified_content": "summary" }));
        let err = tool_result_to_mcp(&m, &output_map()).unwrap_err();
        assert_eq!(
            err,
            ModifyError::ModifiedContentUnsupported {
                target: Target::WrappedMcpResponse
            }
        );
    }

    #[test]
    fn tool_result_overlapping_output_map_is_rejected() {
        let nested = OutputMap(vec![
            "/result/content".into(),
            "/result/content/0/text".into(),
        ]);
        let m = mods(
            json!({ "redactions": [{ "path": "/outputs/0/value" }, { "path": "/outputs/1/value" }] }),
        );
        let err = tool_result_to_mcp(&m, &nested).unwrap_err();
        assert_eq!(
            err,
            ModifyError::OverlappingRedactions {
                first: "/result/content".into(),
                second: "/result/content/0/text".into(),
            }
        );
    }

    #[test]
    fn tool_result_mapping_validates_first() {
        let m = mods(json!({ "parameter_overrides": { "a": 1 } }));
        let err = tool_result_to_mcp(&m, &output_map()).unwrap_err();
        assert_eq!(
            err,
            ModifyError::OverridesUnsupported {
                target: Target::ToolCallResult
            }
        );
    }
}
