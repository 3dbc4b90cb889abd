//! Fixtures shared by the tests of several submodules: decisions as they
//! arrive on the wire and the documents they are applied to.

use serde_json::{json, Value};

use super::{apply, Target};
use crate::guardian::decision::Modifications;

/// Modifications as they arrive on the wire.
pub(super) fn mods(wire: Value) -> Modifications {
    serde_json::from_value(wire).expect("wire modifications")
}

pub(super) fn redact_only(path: &str) -> Modifications {
    mods(json!({ "redactions": [{ "path": path }] }))
}

pub(super) fn redaction_with_override(path: &str, key: &str) -> Modifications {
    mods(json!({ "redactions": [{ "path": path }], "parameter_overrides": { key: "new" } }))
}

pub(super) fn doc(text: &str) -> Value {
    serde_json::from_str(text).expect("test document")
}

pub(super) fn tool_call_message() -> Value {
    doc(
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"send","arguments":{"to":"a@b.c","body":"secret"}}}"#,
    )
}

/// `value` after applying `m`, serialised, so tests compare exact bytes.
pub(super) fn applied(mut value: Value, m: &Modifications, target: Target) -> String {
    apply(&mut value, m, target).expect("modification applies");
    serde_json::to_string(&value).expect("serialize")
}
