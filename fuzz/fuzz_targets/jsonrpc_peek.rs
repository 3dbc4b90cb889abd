//! The JSON-RPC peek against the JSON grammar and a full serde_json parse:
//! a frame the peek accepts is valid JSON whose members say what the peek
//! says; a frame that
//! is not JSON is a parse error (-32700), never an invalid request; and the
//! error reply built for any refusal is itself valid JSON.
#![no_main]

use acs_proxy::jsonrpc::{
    codes, error_response, peek_frame, Frame, Message, MessageKind, PeekError,
};
use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use serde::de::IgnoredAny;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    // RFC 8259's grammar: UTF-8, and escapes well formed. It allows an
    // unpaired surrogate escape (`"\\ud83d"`), which a Rust string cannot
    // hold, so serde_json's full parse is the stricter of the two.
    let grammatical = std::str::from_utf8(data).is_ok() && parse::<IgnoredAny>(data).is_some();
    let full = parse::<Value>(data);
    assert!(full.is_none() || grammatical);
    match peek_frame(Bytes::copy_from_slice(data)) {
        Ok(Frame::Single(message)) => {
            assert!(grammatical, "the peek accepted a frame that is not JSON");
            if let Some(value) = &full {
                check_message(&message, value);
            }
        }
        Ok(Frame::Batch(messages)) => {
            assert!(grammatical, "the peek accepted a batch that is not JSON");
            if let Some(value) = &full {
                let elements = value.as_array().expect("a batch is an array");
                assert_eq!(elements.len(), messages.len());
                for (message, element) in messages.iter().zip(elements) {
                    check_message(message, element);
                }
            }
        }
        // Where a member the peek decodes holds an unpaired surrogate,
        // refusing it as not JSON is as right as the grammar.
        Err(PeekError::Parse(_)) => {
            assert!(
                !grammatical || full.is_none(),
                "valid JSON reported as a parse error"
            );
        }
        // Nesting beyond the limit is refused by the scan that precedes any
        // parse, whether or not the rest would have parsed.
        Err(PeekError::Invalid { id, reason }) => {
            assert!(
                grammatical || reason.contains("nesting exceeds"),
                "invalid JSON reported as an invalid request"
            );
            let reply = error_response(id.as_ref(), codes::INVALID_REQUEST, "invalid", None);
            let reply: Value = serde_json::from_slice(&reply).expect("error reply is JSON");
            assert_eq!(reply["jsonrpc"], "2.0");
        }
    }
});

/// A full parse with no recursion limit: the proxy bounds nesting itself
/// (`[limits] max_json_depth`), so the oracle must not add its own.
fn parse<T: serde::de::DeserializeOwned>(data: &[u8]) -> Option<T> {
    let mut deserializer = serde_json::Deserializer::from_slice(data);
    deserializer.disable_recursion_limit();
    let value = T::deserialize(&mut deserializer).ok()?;
    deserializer.end().ok()?;
    Some(value)
}

/// What the peek found agrees with the parsed message, and its bytes are
/// exactly the message's own.
fn check_message(message: &Message, value: &Value) {
    let reparsed: Value = serde_json::from_slice(&message.bytes).expect("element bytes are JSON");
    assert_eq!(&reparsed, value);
    let object = value.as_object().expect("a message is an object");
    assert_eq!(object.get("jsonrpc").and_then(Value::as_str), Some("2.0"));
    assert_eq!(
        message.method.as_deref(),
        object.get("method").and_then(Value::as_str)
    );
    match &message.id {
        Some(id) => assert_eq!(Some(&id.to_value()), object.get("id")),
        None => assert!(!object.contains_key("id")),
    }
    match message.kind {
        MessageKind::Request => assert!(object.contains_key("method") && object.contains_key("id")),
        MessageKind::Notification => assert!(!object.contains_key("id")),
        MessageKind::Response => {
            assert!(!object.contains_key("method"));
            assert!(object.contains_key("result") != object.contains_key("error"));
        }
    }
    let reply = error_response(message.id.as_ref(), codes::INTERNAL_ERROR, "x", None);
    serde_json::from_slice::<Value>(&reply).expect("error reply is JSON");
}
