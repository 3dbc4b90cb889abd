//! RFC 6901 pointers and MODIFY application. Input: a JSON document, NUL,
//! a `modifications` object. For every target the decision either fails
//! and leaves the document exactly as it was, or yields valid JSON in
//! which every redacted path holds its replacement (checked with
//! serde_json's own RFC 6901 evaluation) and every override its value.
//! The `steps/*` → MCP mappings are held to the same all-or-nothing rule.
#![no_main]

use acs_proxy::enforce::modify::{self, OutputMap, Target};
use acs_proxy::guardian::decision::Modifications;
use acs_proxy_fuzz::fields;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

const TARGETS: [Target; 4] = [
    Target::ToolCallRequest,
    Target::ToolCallResult,
    Target::WrappedMcpRequest,
    Target::WrappedMcpResponse,
];

fuzz_target!(|data: &[u8]| {
    let [doc, mods] = fields::<2>(data);
    let Ok(original) = serde_json::from_slice::<Value>(doc) else {
        return;
    };
    let Ok(m) = serde_json::from_slice::<Modifications>(mods) else {
        return;
    };
    for target in TARGETS {
        let mut value = original.clone();
        match modify::apply(&mut value, &m, target) {
            Ok(()) => {
                assert!(modify::validate(&m, target).is_ok());
                check_applied(&original, &value, &m, target);
            }
            Err(_) => assert_same_bytes(&value, &original),
        }
    }
    if let Ok(rewrite) = modify::tool_request_to_mcp(&m) {
        let mut value = original.clone();
        if rewrite.apply(&mut value).is_err() {
            assert_same_bytes(&value, &original);
        }
        reparse(&value);
    }
    let outputs = OutputMap(vec![
        "/result/content/0/text".into(),
        "/result/structuredContent".into(),
    ]);
    if let Ok(mapped) = modify::tool_result_to_mcp(&m, &outputs) {
        let mut value = original.clone();
        match modify::apply(&mut value, &mapped, Target::WrappedMcpResponse) {
            Ok(()) => check_applied(&original, &value, &mapped, Target::WrappedMcpResponse),
            Err(_) => assert_same_bytes(&value, &original),
        }
    }
});

fn check_applied(original: &Value, value: &Value, m: &Modifications, target: Target) {
    reparse(value);
    if m.modified_content.is_some() {
        return;
    }
    for redaction in &m.redactions {
        assert!(
            original.pointer(&redaction.path).is_some(),
            "redacted {:?}, which the document does not have",
            redaction.path
        );
        // An override may land inside a redacted value only if they
        // overlap, which validation refuses.
        assert_eq!(
            value.pointer(&redaction.path),
            Some(&Value::String(redaction.replacement.clone())),
            "redaction {:?} did not land",
            redaction.path
        );
    }
    for (key, set) in &m.parameter_overrides {
        let escaped = key.replace('~', "~0").replace('/', "~1");
        let pointer = match target {
            Target::ToolCallRequest => format!("/arguments/{escaped}/value"),
            Target::WrappedMcpRequest => format!("/params/arguments/{escaped}"),
            _ => panic!("overrides applied on {target}"),
        };
        assert_eq!(
            value.pointer(&pointer),
            Some(set),
            "override {key:?} did not land"
        );
    }
}

/// The result serializes to JSON that parses back to the same value.
fn reparse(value: &Value) {
    let text = serde_json::to_string(value).expect("a modified document serializes");
    let back: Value = serde_json::from_str(&text).expect("a modified document is valid JSON");
    assert_eq!(&back, value);
}

/// Untouched means byte for byte, key order and number spelling included.
fn assert_same_bytes(value: &Value, original: &Value) {
    assert_eq!(
        serde_json::to_string(value).ok(),
        serde_json::to_string(original).ok(),
        "a failed MODIFY changed the document"
    );
}
