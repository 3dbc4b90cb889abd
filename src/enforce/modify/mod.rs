//! Validating and applying the `modifications` of a `modify` decision
//! (ACS §6.3) to the JSON document the decision was about.
//!
//! The spec fixes the shape of `modifications` and one normative rule —
//! `modified_content` alone, or `redactions` and/or `parameter_overrides`
//! whose targets are disjoint — but not what the pointers address. [`Target`]
//! pins that down per hook, following the Go reference (DIGEST §2.3, §6).
//!
//! Anything that breaks the rule or cannot be applied is a [`ModifyError`];
//! the caller turns it into a DENY (with `modify_unsupported` where §6.5
//! asks for it) and records an audit event. Nothing is ever half-applied:
//! [`apply`] works on a copy and only swaps it in when every change landed.
//!
//! Choices made where the spec is silent:
//! - pointers are compared by decoded RFC 6901 reference tokens, never by
//!   string prefix (`/a/b` is not an ancestor of `/a/bc`; `/a~1b` is one
//!   token, not two);
//! - two redactions with identical or nested paths are rejected as
//!   ambiguous, because the outcome would depend on their order;
//! - a redaction of the whole document (path `""`) is rejected: it would
//!   turn a payload or an MCP message into a bare string;
//! - a redaction must hit an existing member or array element; `-` and
//!   indices with leading zeros are not array indices;
//! - a parameter override may introduce an argument that was not sent.
//!
//! When a `steps/*` decision has to be carried onto the MCP message that is
//! actually forwarded, [`tool_request_to_mcp`] and [`tool_result_to_mcp`]
//! translate the pointers.
//!
//! One concept per submodule: `pointer` (RFC 6901), `rules` (the §6.3
//! checks behind [`validate`]), `edit` (the changes [`apply`] makes),
//! `mapping` (`steps/*` decisions onto MCP messages) and `error`.

mod edit;
mod error;
mod mapping;
pub(crate) mod pointer;
mod rules;
mod target;
#[cfg(test)]
mod test_support;

use serde_json::{Map, Value};

use crate::guardian::decision::Modifications;
use error::kind_of;

pub use error::ModifyError;
pub use mapping::{tool_request_to_mcp, tool_result_to_mcp, McpRequestRewrite, OutputMap};
pub use target::Target;

/// Checks a `modifications` object against §6.3 and against what `target`
/// can take, without touching any document.
///
/// Rejects: an empty object; `modified_content` beside other members or on
/// a target that cannot take it; overrides on a target without arguments;
/// redaction paths that are not RFC 6901 pointers or that address the whole
/// document; two redactions with identical or nested paths (ambiguous); and
/// a redaction equal to, an ancestor of, or a descendant of an override's
/// target pointer (see [`Target`]). Pointers are compared token by token.
pub fn validate(m: &Modifications, target: Target) -> Result<(), ModifyError> {
    rules::check_composition(m)?;
    rules::check_target_accepts(m, target)?;
    let redactions = rules::parse_redactions(&m.redactions)?;
    rules::check_redactions_disjoint(&redactions)?;
    rules::check_overrides_disjoint(&redactions, &m.parameter_overrides, target)
}

/// Validates `m`, then applies it to `doc` all-or-nothing: on any error
/// `doc` is left exactly as it was, so a failed MODIFY can never forward a
/// partly rewritten message.
///
/// A redaction replaces whatever value is at its path with its replacement
/// string; a path to an absent member is un-appliable and fails. Members
/// not addressed keep their position and bytes (serde_json `preserve_order`
/// and `arbitrary_precision`).
pub fn apply(doc: &mut Value, m: &Modifications, target: Target) -> Result<(), ModifyError> {
    validate(m, target)?;
    let mut draft = doc.clone();
    edit::apply_validated(&mut draft, m, target)?;
    *doc = draft;
    Ok(())
}

/// A `modified_content` for a tool call request: the new arguments, by name.
/// Shared by validation (refuse early), application and the MCP mapping, so
/// all three agree on what counts as arguments.
fn parse_arguments(content: &str) -> Result<Map<String, Value>, ModifyError> {
    let not_arguments = |reason: String| ModifyError::ModifiedContentNotArguments { reason };
    match serde_json::from_str::<Value>(content) {
        Ok(Value::Object(arguments)) => Ok(arguments),
        Ok(other) => Err(not_arguments(format!("found a JSON {}", kind_of(&other)))),
        Err(error) => Err(not_arguments(error.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::test_support::{doc, mods, tool_call_message};
    use super::*;

    #[test]
    fn failed_apply_leaves_document_untouched() {
        let original = tool_call_message();
        let mut value = original.clone();
        let m = mods(json!({
            "redactions": [{ "path": "/params/arguments/body" }, { "path": "/params/missing" }],
            "parameter_overrides": { "to": "x@y.z" }
        }));
        let err = apply(&mut value, &m, Target::WrappedMcpRequest).unwrap_err();
        assert_eq!(
            err,
            ModifyError::AbsentMember {
                path: "/params/missing".into(),
                token: "missing".into()
            }
        );
        assert_eq!(value, original);
        assert_eq!(
            serde_json::to_string(&value).unwrap(),
            serde_json::to_string(&original).unwrap()
        );
    }

    #[test]
    fn failed_override_leaves_document_untouched() {
        let original = doc(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":[1]}}"#,
        );
        let mut value = original.clone();
        let m = mods(
            json!({ "redactions": [{ "path": "/params/name" }], "parameter_overrides": { "a": 1 } }),
        );
        let err = apply(&mut value, &m, Target::WrappedMcpRequest).unwrap_err();
        assert_eq!(
            err,
            ModifyError::OverrideParentNotObject {
                key: "a".into(),
                pointer: "/params/arguments".into()
            }
        );
        assert_eq!(value, original);
    }
}
