//! The borrowed tree against serde_json's `Value`: same values, same
//! canonical bytes, same signed input; and the refusals only it makes.

use serde_json::{json, Value};

use super::*;
use crate::guardian::remote::json_view::JsonView;
use crate::guardian::remote::signing::{sign_response, verify_signed, SessionKey, SignedEnvelope};
use crate::guardian::remote::signing::{verify_response, SigningSecret};
use crate::jcs;

/// Texts that exercise escapes, Unicode, key order and number spellings.
const TRICKY: &[&str] = &[
    r#"{"b":[1,-2,3.50,1E+2,true,null,"\u00e9"],"a":{"z":{},"y":[]},"n":12345678901234567890123}"#,
    r#"{"esc":"\"\\\/\b\f\n\r\t\u0000\u001f\u007f","line":"\u2028\u2029","snow":"\u2603☃"}"#,
    r#"{"\ud83d\ude00":1,"\ue000":2,"a":3,"\u00e9":4,"Z":5,"":6}"#,
    r#"{"numbers":[1.0,-0,-0.0,0.1,1e21,1e-7,1E-7,5e-324,9007199254740993,-9007199254740993]}"#,
    r#"{"more":[100,1e2,123456789012345,1234567890123456,0.000001,1.5e300,-1.5e-300]}"#,
    r#"[[],{},"",0,[[[{"deep":[null]}]]]]"#,
    r#""just a string""#,
    "42",
    " \n {\"spaced\" : [ 1 , 2 ] } \t",
    r#"{"$serde_json::private::Number":"12.50"}"#,
];

fn parsed(text: &str) -> BorrowedJson<'_> {
    BorrowedJson::parse(text.as_bytes()).unwrap()
}

fn canonical(value: &BorrowedJson<'_>) -> Result<Vec<u8>, jcs::JcsError> {
    let mut bytes = Vec::new();
    write_canonical(&mut bytes, value)?;
    Ok(bytes)
}

#[test]
fn same_values_as_serde_json() {
    for text in TRICKY {
        let ours = parsed(text);
        let theirs: Value = serde_json::from_str(text).unwrap();
        assert_eq!(ours.to_value(), theirs, "{text}");
        assert!(ours.equals(&theirs), "{text}");
    }
}

#[test]
fn canonical_bytes_are_those_of_the_value() {
    for text in TRICKY {
        let theirs: Value = serde_json::from_str(text).unwrap();
        let expected = jcs::canonical_bytes(&theirs).unwrap();
        assert_eq!(canonical(&parsed(text)).unwrap(), expected, "{text}");
    }
}

#[test]
fn numbers_without_a_canonical_form_fail_as_in_a_value() {
    for text in [r#"{"huge":1e400}"#, "[-1e400]", r#"{"a":{"b":1E+999}}"#] {
        let theirs: Value = serde_json::from_str(text).unwrap();
        assert!(jcs::canonical_bytes(&theirs).is_err(), "{text}");
        assert!(canonical(&parsed(text)).is_err(), "{text}");
    }
}

#[test]
fn unescaped_strings_and_keys_are_borrowed() {
    let value = parsed(r#"{"plain":"text","esc\u0061ped":"a\nb"}"#);
    let BorrowedJson::Object(object) = &value else {
        panic!("not an object");
    };
    let [(plain, text), (escaped, newline)] = object.members() else {
        panic!("two members expected");
    };
    assert!(matches!(plain, Cow::Borrowed("plain")));
    assert!(matches!(text, BorrowedJson::String(Cow::Borrowed("text"))));
    assert!(matches!(escaped, Cow::Owned(key) if key == "escaped"));
    assert_eq!(newline.as_str(), Some("a\nb"));
}

#[test]
fn duplicate_keys_are_refused_anywhere_even_when_escaped() {
    for text in [
        r#"{"name":"a","name":"b"}"#,
        r#"{"result":{"decision":"deny","decision":"allow"}}"#,
        r#"{"params":{"name":"echo","n\u0061me":"get-env"}}"#,
        r#"[{"x":1},{"y":{"k":1,"k":1}}]"#,
        r#"{"\ud83d\ude00":1,"😀":2}"#,
    ] {
        let err = BorrowedJson::parse(text.as_bytes()).unwrap_err();
        assert!(err.to_string().contains("duplicate key"), "{text}: {err}");
    }
    let many: Vec<String> = (0..40).map(|n| format!("\"k{n}\":{n}")).collect();
    let repeated = format!("{{{},\"k7\":0}}", many.join(","));
    assert!(BorrowedJson::parse(repeated.as_bytes()).is_err());
    assert!(BorrowedJson::parse(format!("{{{}}}", many.join(",")).as_bytes()).is_ok());
    assert!(BorrowedJson::parse(br#"{"a":{"k":1},"b":{"k":1}}"#).is_ok());
}

#[test]
fn members_are_found_by_their_unescaped_key() {
    let value = parsed(r#"{"\u0069d":5,"n":null}"#);
    assert_eq!(value.member("id").and_then(JsonView::as_u64), Some(5));
    assert!(value.member("n").is_some_and(JsonView::is_null));
    assert!(value.member("absent").is_none());
    assert!(parsed("[1]").member("id").is_none());
}

#[test]
fn what_serde_json_refuses_is_refused() {
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    for text in ["{oops", "[1,]", "{} {}", "01", "\"\\x\"", deep.as_str(), ""] {
        assert!(serde_json::from_str::<Value>(text).is_err(), "{text}");
        assert!(BorrowedJson::parse(text.as_bytes()).is_err(), "{text}");
    }
}

#[test]
fn equality_with_a_value_follows_json() {
    assert!(parsed("1").equals(&json!(1)));
    assert!(!parsed("1").equals(&json!("1")));
    assert!(!parsed("1.0").equals(&json!(1)));
    assert!(parsed(r#"{"b":[1],"a":null}"#).equals(&json!({"a": null, "b": [1]})));
    assert!(!parsed(r#"{"a":1}"#).equals(&json!({"a": 1, "b": 2})));
    assert!(!parsed(r#"{"a":1,"c":2}"#).equals(&json!({"a": 1, "b": 2})));
}

fn key() -> SessionKey {
    let secret = SigningSecret::from_bytes([42u8; 32]).unwrap();
    SessionKey::derive(&secret, "00000000-0000-4000-8000-000000000001")
}

/// A signed reply with members out of order and spelled unlike JCS.
fn signed_reply_text() -> String {
    let mut reply = json!({
        "result": {
            "reasoning": "caf\u{e9} \"quoted\"",
            "decision": "deny",
            "type": "final",
            "extra": {"z": [1.0, -0], "a": "\u{1F600}"}
        },
        "id": 7,
        "jsonrpc": "2.0"
    });
    sign_response(&mut reply, &key(), "k1").unwrap();
    serde_json::to_string(&reply).unwrap()
}

#[test]
fn signed_input_is_that_of_the_value() {
    let text = signed_reply_text();
    let theirs: Value = serde_json::from_str(&text).unwrap();
    for member in ["result", "error", "id"] {
        let mut ours = Vec::new();
        parsed(&text).write_signed_input(&mut ours, member).unwrap();
        let mut expected = Vec::new();
        theirs.write_signed_input(&mut expected, member).unwrap();
        assert_eq!(ours, expected, "{member}");
    }
}

#[test]
fn a_signed_reply_verifies_in_either_tree() {
    let text = signed_reply_text();
    verify_signed(&parsed(&text), &key()).unwrap();
    verify_response(&serde_json::from_str(&text).unwrap(), &key()).unwrap();
    let tampered = text.replace("\"deny\"", "\"allow\"");
    assert!(verify_signed(&parsed(&tampered), &key()).is_err());
}

/// The JSON text of `value`, its non-ASCII characters spelled as `\u`
/// escapes (so keys and strings are parsed into owned text) or as
/// themselves (so they are borrowed).
fn spelled(value: &Value, escaped: bool) -> String {
    let text = value.to_string();
    if !escaped {
        return text;
    }
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            for unit in c.encode_utf16(&mut [0; 2]) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    /// Numbers in several spellings, some beyond the range of a double.
    fn number() -> impl Strategy<Value = Value> {
        let text = prop_oneof![
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| format!("{f:e}")),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<u128>().prop_map(|n| n.to_string()),
            prop::sample::select(vec![
                "-0", "1.0", "1e400", "-1E-400", "0.1", "1e21", "5e-324"
            ])
            .prop_map(str::to_owned),
        ];
        text.prop_map(|text| serde_json::from_str(&text).unwrap())
    }

    fn document() -> impl Strategy<Value = Value> {
        jcs::properties::document_with(number())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn any_document_reads_and_canonicalizes_as_its_value(
            doc in document(),
            escaped in any::<bool>(),
        ) {
            let text = spelled(&doc, escaped);
            let value: Value = serde_json::from_str(&text).unwrap();
            let tree = BorrowedJson::parse(text.as_bytes()).unwrap();
            prop_assert!(tree.equals(&value));
            prop_assert_eq!(tree.to_value(), value.clone());
            prop_assert_eq!(canonical(&tree).ok(), jcs::canonical_bytes(&value).ok());
        }
    }
}
