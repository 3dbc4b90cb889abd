//! [`ModifyError`]: every way a `modifications` object can be refused or
//! fail to apply, shared by validation, application and the MCP mapping so
//! the caller has one type to turn into a DENY.

use serde_json::Value;
use thiserror::Error;

use super::target::Target;

/// Why a `modifications` object was rejected or could not be applied. Every
/// variant means the caller must not forward the step as modified (§6.3,
/// §6.5): it denies and records an audit event.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ModifyError {
    /// `{}` (or only empty members): §6.3 requires at least one change.
    #[error("modifications is empty: one of modified_content, redactions or parameter_overrides is required")]
    Empty,
    /// `modified_content` came with redactions or overrides (§6.3).
    #[error("modified_content must be the only member of modifications, but redactions or parameter_overrides are present too")]
    ModifiedContentNotAlone,
    /// `modified_content` on a target that cannot take it (wrapped MCP).
    #[error("modified_content cannot be applied to a {target}")]
    ModifiedContentUnsupported {
        /// Where the decision applies.
        target: Target,
    },
    /// `modified_content` for a tool call request is not a JSON object.
    #[error("modified_content for a steps/toolCallRequest must be a JSON object of argument name to value: {reason}")]
    ModifiedContentNotArguments {
        /// The parse error, or the JSON type that was found instead.
        reason: String,
    },
    /// `parameter_overrides` on a target that has no arguments to override.
    #[error("parameter_overrides cannot be applied to a {target}")]
    OverridesUnsupported {
        /// Where the decision applies.
        target: Target,
    },
    /// A non-empty pointer that does not start with `/` (RFC 6901 §3).
    #[error(
        "redaction path `{path}` is not a JSON pointer: a non-empty pointer must start with `/`"
    )]
    PointerMissingSlash {
        /// The offending path.
        path: String,
    },
    /// A `~` not followed by `0` or `1` (RFC 6901 §3).
    #[error("redaction path `{path}` is not a JSON pointer: `~` must be followed by `0` or `1`")]
    PointerBadEscape {
        /// The offending path.
        path: String,
    },
    /// Path `""`: replacing the whole document with a string is not a redaction.
    #[error(
        "redaction path \"\" addresses the whole document; a redaction must name a value inside it"
    )]
    RedactsWholeDocument,
    /// Two redactions hit the same value or one lies inside the other.
    #[error("redaction paths `{first}` and `{second}` are identical or nested, so the result would depend on their order")]
    OverlappingRedactions {
        /// The earlier redaction's path.
        first: String,
        /// The later redaction's path.
        second: String,
    },
    /// A redaction equal to, ancestor of, or descendant of an override's target (§6.3).
    #[error("redaction path `{path}` overlaps `{overridden}`, the target of parameter override `{key}`; §6.3 requires disjoint targets")]
    RedactionOverlapsOverride {
        /// The redaction's path.
        path: String,
        /// The override's argument name.
        key: String,
        /// The pointer the override sets.
        overridden: String,
    },
    /// An object on the path has no such member.
    #[error("redaction path `{path}`: member `{token}` does not exist")]
    AbsentMember {
        /// The redaction's path.
        path: String,
        /// The missing member name (decoded).
        token: String,
    },
    /// `-` names the slot after the last element, which holds nothing to replace.
    #[error("redaction path `{path}`: `-` names the position after the last array element, which holds no value")]
    EndOfArrayIndex {
        /// The redaction's path.
        path: String,
    },
    /// An array was indexed by something other than digits without leading zeros.
    #[error("redaction path `{path}`: `{token}` is not an array index (decimal digits without leading zeros)")]
    BadArrayIndex {
        /// The redaction's path.
        path: String,
        /// The offending token.
        token: String,
    },
    /// An array index at or past the end.
    #[error("redaction path `{path}`: index {token} is past the end of an array of length {len}")]
    IndexOutOfRange {
        /// The redaction's path.
        path: String,
        /// The index as written.
        token: String,
        /// The array's length.
        len: usize,
    },
    /// The path goes through a scalar.
    #[error("redaction path `{path}`: cannot look up `{token}` in a {kind}")]
    NotAContainer {
        /// The redaction's path.
        path: String,
        /// The token that could not be looked up (decoded).
        token: String,
        /// The JSON type found where an object or array was needed.
        kind: &'static str,
    },
    /// The document itself is not an object, so nothing can be set in it.
    #[error("the {target} is not a JSON object")]
    DocumentNotObject {
        /// What the document was supposed to be.
        target: Target,
    },
    /// A wrapped MCP request without a `params` object to put arguments in.
    #[error("the wrapped MCP request has no `params` object to hold arguments")]
    ParamsNotObject,
    /// An override's container exists but is not an object.
    #[error("parameter override `{key}`: `{pointer}` is not a JSON object")]
    OverrideParentNotObject {
        /// The override's argument name.
        key: String,
        /// The pointer of the value that should have been an object.
        pointer: String,
    },
    /// A `steps/*` redaction with no counterpart in the forwarded MCP message.
    #[error(
        "redaction path `{path}` cannot be carried onto the MCP message: only `{expected}` can"
    )]
    UnmappableRedaction {
        /// The redaction's path in the steps payload.
        path: String,
        /// The form of path that can be carried over.
        expected: &'static str,
    },
    /// A `/outputs/<i>` redaction whose `i` names no output built from the MCP result.
    #[error("redaction path `{path}`: `{index}` names none of the {len} outputs taken from the MCP result")]
    UnknownOutput {
        /// The redaction's path in the toolCallResult payload.
        path: String,
        /// The output index as written.
        index: String,
        /// How many outputs the [`OutputMap`](super::OutputMap) knows.
        len: usize,
    },
}

/// The JSON type of `value`, as named in error messages.
pub(super) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
