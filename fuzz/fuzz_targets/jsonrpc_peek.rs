//! The JSON-RPC peek against the JSON grammar and a full serde_json parse:
//! a frame the peek accepts is valid JSON whose members say what the peek
//! says; a frame that
//! is not JSON is a parse error (-32700), never an invalid request; and the
//! error reply built for any refusal is itself valid JSON. The peek of a
//! named request (a virtual server's routed calls) reads what the ordinary
//! peek reads, and the walk that locates top-level members finds in valid
//! JSON the members a full parse finds.
#![no_main]

use acs_proxy::jsonrpc::{
    codes, error_response, locate_members, peek_frame, peek_named_request, Frame, Message,
    MessageKind, PeekError, DEFAULT_MAX_JSON_DEPTH,
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
    if let Some(value) = &full {
        check_members(data, value);
    }
    let ordinary = peek_frame(Bytes::copy_from_slice(data));
    if let Some(named) = peek_named_request(Bytes::copy_from_slice(data), DEFAULT_MAX_JSON_DEPTH) {
        match &ordinary {
            Ok(Frame::Single(message)) => assert_eq!(&named.message, message),
            other => panic!("a named request the ordinary peek read as {other:?}"),
        }
        let name = full.as_ref().and_then(|value| value["params"]["name"].as_str());
        if let Some(name) = name {
            assert_eq!(named.name(), name);
        }
        assert_eq!(data[named.name_at.clone()].first(), Some(&b'"'));
    }
    match ordinary {
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

/// Where the walk finds `id` and `result` in a valid JSON object, the
/// full parse finds the same values there.
fn check_members(data: &[u8], value: &Value) {
    let Some([id, result]) = locate_members(data, ["id", "result"]) else {
        return;
    };
    let object = value.as_object().expect("only an object has members");
    for (name, place) in [("id", id), ("result", result)] {
        match place {
            Some(place) => {
                let found: Value =
                    serde_json::from_slice(&data[place]).expect("a located value is JSON");
                assert_eq!(Some(&found), object.get(name));
            }
            None => assert!(!object.contains_key(name)),
        }
    }
}

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
