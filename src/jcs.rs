//! RFC 8785 JSON Canonicalization Scheme (JCS) and SHA-256 hex digests.
//!
//! ACS hashes and signs JSON by its canonical form, so two parties that
//! serialize the same value differently (key order, number spelling, escapes)
//! still agree on the bytes. Everything that hashes or signs JSON goes through
//! this one module so there is exactly one canonicalizer in the proxy.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Why a JSON value has no canonical form.
#[derive(Debug, thiserror::Error)]
pub enum JcsError {
    /// The value holds something RFC 8785 cannot express; with
    /// `arbitrary_precision` this is a number outside the IEEE 754 double
    /// range (e.g. `1e400`), which JCS has no spelling for.
    #[error("value has no RFC 8785 canonical form: {0}")]
    Canonicalize(#[from] serde_json::Error),
}

/// Returns the RFC 8785 canonical UTF-8 bytes of `value`.
///
/// Fallible because numbers are kept verbatim (`arbitrary_precision`) and
/// may not fit a double, which JCS requires.
pub fn canonical_bytes(value: &Value) -> Result<Vec<u8>, JcsError> {
    Ok(serde_json_canonicalizer::to_vec(value)?)
}

/// Returns the lowercase hex SHA-256 of `bytes`, the digest spelling ACS uses
/// for `request_hash`, `entry_hash` and content digests.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The SHA-256 hex digest of `value`'s canonical form. A value JCS cannot
/// express (a number beyond the double range) is digested in its compact
/// serialization instead, so hostile input still gets a stable digest
/// rather than an error on the hot path.
pub fn value_digest(value: &Value) -> String {
    match canonical_bytes(value) {
        Ok(bytes) => sha256_hex(&bytes),
        Err(_) => sha256_hex(value.to_string().as_bytes()),
    }
}

#[cfg(test)]
mod properties;

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical_string(json: &str) -> String {
        let value: Value = serde_json::from_str(json).unwrap();
        String::from_utf8(canonical_bytes(&value).unwrap()).unwrap()
    }

    #[test]
    fn rfc8785_section_3_2_2_numbers_and_escapes() {
        let input = r#"{
          "numbers": [333333333.33333329, 1E30, 4.50,
                      2e-3, 0.000000000000000000000000001],
          "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
          "literals": [null, true, false]
        }"#;
        let expected = r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#;
        assert_eq!(canonical_string(input), expected);
    }

    #[test]
    fn rfc8785_section_3_2_3_sorts_by_utf16_code_units() {
        // U+1F600 is the surrogate pair D83D DE00, which sorts before U+FB33
        // in UTF-16 although it is after it as a code point.
        let input = r#"{
          "\u20ac": "Euro Sign",
          "\r": "Carriage Return",
          "\ufb33": "Hebrew Letter Dalet With Dagesh",
          "1": "One",
          "\ud83d\ude00": "Emoji: Grinning Face",
          "\u0080": "Control",
          "\u00f6": "Latin Small Letter O With Diaeresis"
        }"#;
        let expected = "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{80}\":\"Control\",\
            \"\u{f6}\":\"Latin Small Letter O With Diaeresis\",\"\u{20ac}\":\"Euro Sign\",\
            \"\u{1f600}\":\"Emoji: Grinning Face\",\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}";
        assert_eq!(canonical_string(input), expected);
    }

    #[test]
    fn canonicalization_is_idempotent() {
        let inputs = [
            r#"{"b":[1.0,2e2,-0,{"z":null,"a":"\u0000"}],"a":{"y":1E-7,"x":true}}"#,
            r#"[9007199254740993, 1e21, 1e-6, 123456789012345678901234567890]"#,
            r#""\ud83d\ude00\u2028 é""#,
        ];
        for input in inputs {
            let once = canonical_string(input);
            assert_eq!(canonical_string(&once), once, "input {input}");
        }
    }

    #[test]
    fn out_of_range_number_has_no_canonical_form() {
        let value: Value = serde_json::from_str("[1e400]").unwrap();
        assert!(canonical_bytes(&value).is_err());
    }

    #[test]
    fn sha256_hex_is_lowercase_hex() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
