//! Property tests: the disjointness checks report two targets as
//! overlapping exactly when one pointer is a prefix, by whole reference
//! tokens, of the other. The oracle compares the pointers' spellings
//! instead of decoded tokens: RFC 6901 gives every token one encoding, so
//! `q` lies within `p` iff `q == p` or `q` starts with `p` followed by `/`.
use proptest::prelude::*;
use serde_json::json;

use super::super::test_support::mods;
use super::super::{validate, ModifyError, Target};

/// Tokens chosen to collide: shared string prefixes, escapes, digits and
/// the empty token.
fn token() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "a",
        "ab",
        "b",
        "a/b",
        "~",
        "~1",
        "0",
        "00",
        "",
        "params",
        "arguments",
        "to",
        "value",
    ])
    .prop_map(str::to_owned)
}

fn tokens() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(token(), 1..=4)
}

fn encode(tokens: &[String]) -> String {
    tokens
        .iter()
        .map(|t| format!("/{}", t.replace('~', "~0").replace('/', "~1")))
        .collect()
}

fn within(inner: &str, outer: &str) -> bool {
    inner == outer || inner.starts_with(&format!("{outer}/"))
}

fn overlap_oracle(p: &str, q: &str) -> bool {
    within(p, q) || within(q, p)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn two_redactions_overlap_iff_one_is_a_token_prefix(first in tokens(), second in tokens()) {
        let (p, q) = (encode(&first), encode(&second));
        let m = mods(json!({ "redactions": [{ "path": p }, { "path": q }] }));
        let overlapping = matches!(
            validate(&m, Target::WrappedMcpResponse),
            Err(ModifyError::OverlappingRedactions { .. })
        );
        prop_assert_eq!(overlapping, overlap_oracle(&p, &q), "{} vs {}", p, q);
    }

    #[test]
    fn redaction_overlaps_override_iff_one_is_a_token_prefix(path in tokens(), key in token()) {
        let p = encode(&path);
        for (target, overridden) in [
            (Target::WrappedMcpRequest, encode(&["params".into(), "arguments".into(), key.clone()])),
            (Target::ToolCallRequest, encode(&["arguments".into(), key.clone(), "value".into()])),
        ] {
            let m = mods(json!({ "redactions": [{ "path": p }], "parameter_overrides": { key.clone(): 1 } }));
            let result = validate(&m, target);
            let overlapping = matches!(result, Err(ModifyError::RedactionOverlapsOverride { .. }));
            prop_assert_eq!(overlapping, overlap_oracle(&p, &overridden), "{} vs {}", p, overridden);
            if !overlapping {
                prop_assert_eq!(result, Ok(()));
            }
        }
    }
}
