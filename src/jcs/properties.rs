//! Property tests: the canonical form of generated documents equals an
//! independent RFC 8785 serialization (ECMAScript number spelling from
//! `ryu-js`, keys ordered by UTF-16 code units, the RFC's string escapes),
//! whatever spelling the input used for its numbers, and canonicalizing a
//! canonical form changes nothing.
use proptest::prelude::*;
use serde_json::Value;

use super::canonical_bytes;

/// RFC 8785 written out independently of the canonicalizer under test.
fn expected(value: &Value) -> String {
    let mut out = String::new();
    write_expected(value, &mut out);
    out
}

fn write_expected(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&ecmascript_number(n.to_string().parse().unwrap())),
        Value::String(text) => write_string(text, out),
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_expected(item, out);
            }
            out.push(']');
        }
        Value::Object(members) => {
            let mut sorted: Vec<(&String, &Value)> = members.iter().collect();
            sorted.sort_by_key(|(key, _)| key.encode_utf16().collect::<Vec<u16>>());
            out.push('{');
            for (index, (key, item)) in sorted.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_string(key, out);
                out.push(':');
                write_expected(item, out);
            }
            out.push('}');
        }
    }
}

/// ECMAScript `Number.prototype.toString`, which RFC 8785 §3.2.2.3 adopts
/// (negative zero is `0`).
fn ecmascript_number(number: f64) -> String {
    if number == 0.0 {
        return "0".into();
    }
    ryu_js::Buffer::new().format_finite(number).to_owned()
}

/// RFC 8785 §3.2.2.2: the two-character escapes, `\u00xx` (lowercase) for
/// other controls, everything else as itself.
fn write_string(text: &str, out: &mut String) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if c < ' ' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn canonical(value: &Value) -> String {
    String::from_utf8(canonical_bytes(value).unwrap()).unwrap()
}

/// A finite double in one of several spellings, as a JSON number.
fn number() -> impl Strategy<Value = Value> {
    let double = prop_oneof![
        any::<f64>().prop_filter("finite", |f| f.is_finite()),
        any::<i64>().prop_map(|n| n as f64),
        (-30i32..30, 1u32..10_000).prop_map(|(exp, m)| f64::from(m) * 10f64.powi(exp)),
        prop::sample::select(vec![
            0.0,
            -0.0,
            5e-324,
            1e21,
            1e-7,
            1e-6,
            9007199254740993.0
        ]),
    ];
    (double, 0u8..4).prop_map(|(f, spelling)| {
        let text = match spelling {
            0 => format!("{f}"),
            1 => format!("{f:e}"),
            2 => format!("{f:.20e}"),
            _ => format!("{f:E}"),
        };
        serde_json::from_str(&text).unwrap()
    })
}

/// Keys and strings: arbitrary text plus the RFC's ordering examples
/// (astral characters sort by their surrogates, before U+FB33).
pub(crate) fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        prop::sample::select(vec![
            "\u{20ac}",
            "\r",
            "\u{fb33}",
            "\u{e000}",
            "1",
            "\u{1f600}",
            "\u{80}",
            "\u{f6}",
            "",
            "a\u{0}\u{1f}\u{7f}",
            "a\"\\"
        ])
        .prop_map(str::to_owned),
    ]
}

fn document() -> impl Strategy<Value = Value> {
    document_with(number())
}

/// Documents of nested arrays and objects whose numbers come from
/// `number` and whose keys and strings from [`text`].
pub(crate) fn document_with(
    number: impl Strategy<Value = Value> + 'static,
) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number,
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((text(), inner), 0..6)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

fn keys_in_utf16_order(value: &Value) -> bool {
    match value {
        Value::Object(members) => {
            let keys: Vec<Vec<u16>> = members.keys().map(|k| k.encode_utf16().collect()).collect();
            keys.windows(2).all(|pair| pair[0] < pair[1])
                && members.values().all(keys_in_utf16_order)
        }
        Value::Array(items) => items.iter().all(keys_in_utf16_order),
        _ => true,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn matches_an_independent_rfc8785_serialization(doc in document()) {
        prop_assert_eq!(canonical(&doc), expected(&doc));
    }

    #[test]
    fn canonicalization_is_idempotent(doc in document()) {
        let once = canonical(&doc);
        let reparsed: Value = serde_json::from_str(&once).unwrap();
        prop_assert!(keys_in_utf16_order(&reparsed));
        prop_assert_eq!(canonical(&reparsed), once);
    }

    #[test]
    fn every_spelling_of_a_number_canonicalizes_alike(n in number()) {
        let value: f64 = n.to_string().parse().unwrap();
        prop_assert_eq!(canonical(&n), ecmascript_number(value));
    }
}

/// RFC 8785 Appendix B: IEEE 754 bit patterns and their canonical text.
#[test]
fn rfc8785_appendix_b_numbers() {
    let cases: [(u64, &str); 23] = [
        (0x0000000000000000, "0"),
        (0x8000000000000000, "0"),
        (0x0000000000000001, "5e-324"),
        (0x8000000000000001, "-5e-324"),
        (0x7fefffffffffffff, "1.7976931348623157e+308"),
        (0xffefffffffffffff, "-1.7976931348623157e+308"),
        (0x4340000000000000, "9007199254740992"),
        (0xc340000000000000, "-9007199254740992"),
        (0x4430000000000000, "295147905179352830000"),
        (0x44b52d02c7e14af5, "9.999999999999997e+22"),
        (0x44b52d02c7e14af6, "1e+23"),
        (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
        (0x444b1ae4d6e2ef4e, "999999999999999700000"),
        (0x444b1ae4d6e2ef4f, "999999999999999900000"),
        (0x444b1ae4d6e2ef50, "1e+21"),
        (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
        (0x3eb0c6f7a0b5ed8d, "0.000001"),
        (0x41b3de4355555553, "333333333.3333332"),
        (0x41b3de4355555554, "333333333.33333325"),
        (0x41b3de4355555555, "333333333.3333333"),
        (0x41b3de4355555556, "333333333.3333334"),
        (0x41b3de4355555557, "333333333.33333343"),
        (0xbecbf647612f3696, "-0.0000033333333333333333"),
    ];
    for (bits, text) in cases {
        let number = f64::from_bits(bits);
        let value: Value = serde_json::from_str(&format!("{number:e}")).unwrap();
        assert_eq!(canonical(&value), text, "{bits:#018x}");
        assert_eq!(ecmascript_number(number), text, "oracle, {bits:#018x}");
    }
}
