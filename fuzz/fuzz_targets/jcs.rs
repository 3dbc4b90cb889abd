//! RFC 8785 canonicalization: for any JSON text, the canonical form (when
//! there is one) is valid JSON for the same document (numbers compared as
//! doubles), keys sorted by UTF-16 code units at every level, no
//! insignificant whitespace, and canonicalizing it again changes nothing.
//! A document with no canonical form holds a number beyond the double
//! range, and still gets a digest.
#![no_main]

use acs_proxy::jcs::{canonical_bytes, value_digest};
use acs_proxy_fuzz::{has_unrepresentable_number, same_json};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let digest = value_digest(&value);
    assert_eq!(digest.len(), 64);
    let canonical = match canonical_bytes(&value) {
        Ok(canonical) => canonical,
        Err(_) => {
            assert!(
                has_unrepresentable_number(&value),
                "refused a document whose numbers are all doubles"
            );
            return;
        }
    };
    let text = std::str::from_utf8(&canonical).expect("canonical form is UTF-8");
    let reparsed: Value = serde_json::from_str(text).expect("canonical form is JSON");
    assert!(
        same_json(&value, &reparsed),
        "canonical form is another document"
    );
    check_sorted(&reparsed);
    let again = canonical_bytes(&reparsed).expect("canonical form canonicalizes");
    assert_eq!(canonical, again, "canonicalization is not idempotent");
    // Keys already sorted and numbers already canonical: a compact
    // serialization must give the same bytes (no whitespace, same escapes).
    let compact = serde_json::to_string(&reparsed).expect("serializes");
    assert_eq!(
        compact.as_bytes(),
        &canonical[..],
        "canonical form is not compact"
    );
});

fn check_sorted(value: &Value) {
    match value {
        Value::Object(members) => {
            let keys: Vec<Vec<u16>> = members.keys().map(|k| k.encode_utf16().collect()).collect();
            assert!(
                keys.windows(2).all(|w| w[0] < w[1]),
                "keys out of UTF-16 order"
            );
            members.values().for_each(check_sorted);
        }
        Value::Array(items) => items.iter().for_each(check_sorted),
        _ => {}
    }
}
