//! RFC 6901 JSON pointers: parsing into decoded reference tokens, encoding
//! tokens back, array indices, and evaluation to the value a pointer names.
//!
//! Errors are [`ModifyError`]s naming the pointer as a redaction path,
//! because redactions are what this module was written for.

use serde_json::Value;

use super::error::kind_of;
use super::ModifyError;

/// Splits a pointer into decoded reference tokens; `""` is the empty list.
pub(crate) fn parse_pointer(path: &str) -> Result<Vec<String>, ModifyError> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    let body = path
        .strip_prefix('/')
        .ok_or_else(|| ModifyError::PointerMissingSlash {
            path: path.to_owned(),
        })?;
    body.split('/')
        .map(|raw| {
            decode_token(raw).ok_or_else(|| ModifyError::PointerBadEscape {
                path: path.to_owned(),
            })
        })
        .collect()
}

/// Decodes `~1` and `~0` in one left-to-right pass, so `~01` is `~1` and
/// not `/` (RFC 6901 §4).
fn decode_token(raw: &str) -> Option<String> {
    let mut decoded = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '~' {
            decoded.push(c);
            continue;
        }
        match chars.next() {
            Some('0') => decoded.push('~'),
            Some('1') => decoded.push('/'),
            _ => return None,
        }
    }
    Some(decoded)
}

/// Joins decoded tokens into a pointer, escaping each one; no tokens give
/// `""`, the whole document.
pub(crate) fn encode_pointer<'t>(tokens: impl IntoIterator<Item = &'t str>) -> String {
    tokens
        .into_iter()
        // `~` first, or the `~` of a fresh `~1` would be escaped again.
        .map(|token| format!("/{}", token.replace('~', "~0").replace('/', "~1")))
        .collect()
}

/// RFC 6901 `array-index`: `0` or digits without a leading zero. A number
/// too large for `usize` becomes `usize::MAX`, which no array reaches, so it
/// is reported as out of range rather than as malformed.
pub(crate) fn parse_index(token: &str) -> Option<usize> {
    let digits = !token.is_empty() && token.bytes().all(|byte| byte.is_ascii_digit());
    let canonical = digits && (token == "0" || !token.starts_with('0'));
    canonical.then(|| token.parse().unwrap_or(usize::MAX))
}

/// The existing value `path` names inside `doc`, for replacing in place.
/// Nothing is created on the way: a pointer to an absent member fails.
pub(crate) fn resolve_mut<'a>(
    doc: &'a mut Value,
    path: &str,
) -> Result<&'a mut Value, ModifyError> {
    parse_pointer(path)?
        .iter()
        .try_fold(doc, |node, token| child_mut(node, token, path))
}

/// One step of RFC 6901 evaluation; absent members fail rather than being
/// created, because a redaction of nothing is un-appliable (DIGEST §2.3).
fn child_mut<'a>(
    node: &'a mut Value,
    token: &str,
    path: &str,
) -> Result<&'a mut Value, ModifyError> {
    match node {
        Value::Object(members) => members
            .get_mut(token)
            .ok_or_else(|| ModifyError::AbsentMember {
                path: path.to_owned(),
                token: token.to_owned(),
            }),
        Value::Array(items) => {
            let len = items.len();
            let index = array_index(token, path)?;
            items
                .get_mut(index)
                .ok_or_else(|| ModifyError::IndexOutOfRange {
                    path: path.to_owned(),
                    token: token.to_owned(),
                    len,
                })
        }
        scalar => Err(ModifyError::NotAContainer {
            path: path.to_owned(),
            token: token.to_owned(),
            kind: kind_of(scalar),
        }),
    }
}

fn array_index(token: &str, path: &str) -> Result<usize, ModifyError> {
    if token == "-" {
        return Err(ModifyError::EndOfArrayIndex {
            path: path.to_owned(),
        });
    }
    parse_index(token).ok_or_else(|| ModifyError::BadArrayIndex {
        path: path.to_owned(),
        token: token.to_owned(),
    })
}

// Driven through `validate` and `apply`, as the Guardian's pointers are.
#[cfg(test)]
mod tests {
    use super::super::test_support::{applied, doc, redact_only, tool_call_message};
    use super::super::{apply, validate, ModifyError, Target};

    #[test]
    fn pointer_escapes_decode_to_slash_and_tilde() {
        let value = doc(r#"{"a/b":{"c~d":1,"other":2}}"#);
        let out = applied(
            value,
            &redact_only("/a~1b/c~0d"),
            Target::WrappedMcpResponse,
        );
        assert_eq!(out, r#"{"a/b":{"c~d":"[REDACTED]","other":2}}"#);
    }

    #[test]
    fn pointer_decodes_tilde_zero_one_as_tilde_one() {
        let value = doc(r#"{"~1":1,"/":2}"#);
        let out = applied(value, &redact_only("/~01"), Target::WrappedMcpResponse);
        assert_eq!(out, r#"{"~1":"[REDACTED]","/":2}"#);
    }

    #[test]
    fn pointer_with_bad_escape_is_rejected() {
        for path in ["/a~2", "/a~", "/~x/b"] {
            let err = validate(&redact_only(path), Target::WrappedMcpResponse).unwrap_err();
            assert_eq!(err, ModifyError::PointerBadEscape { path: path.into() });
        }
    }

    #[test]
    fn pointer_without_leading_slash_is_rejected() {
        let err = validate(&redact_only("result/content"), Target::WrappedMcpResponse).unwrap_err();
        assert_eq!(
            err,
            ModifyError::PointerMissingSlash {
                path: "result/content".into()
            }
        );
    }

    #[test]
    fn array_index_addresses_element() {
        let out = applied(
            doc(r#"{"a":[1,2,3]}"#),
            &redact_only("/a/1"),
            Target::WrappedMcpResponse,
        );
        assert_eq!(out, r#"{"a":[1,"[REDACTED]",3]}"#);
        let out = applied(
            doc(r#"{"a":[1,2,3]}"#),
            &redact_only("/a/0"),
            Target::WrappedMcpResponse,
        );
        assert_eq!(out, r#"{"a":["[REDACTED]",2,3]}"#);
    }

    #[test]
    fn dash_index_is_rejected_for_replacement() {
        let mut value = doc(r#"{"a":[1]}"#);
        let err = apply(&mut value, &redact_only("/a/-"), Target::WrappedMcpResponse).unwrap_err();
        assert_eq!(
            err,
            ModifyError::EndOfArrayIndex {
                path: "/a/-".into()
            }
        );
    }

    #[test]
    fn leading_zero_and_non_digit_indices_are_rejected() {
        for token in ["01", "00", "+1", "1a", ""] {
            let path = format!("/a/{token}");
            let mut value = doc(r#"{"a":[1,2]}"#);
            let err =
                apply(&mut value, &redact_only(&path), Target::WrappedMcpResponse).unwrap_err();
            assert_eq!(
                err,
                ModifyError::BadArrayIndex {
                    path,
                    token: token.into()
                }
            );
        }
    }

    #[test]
    fn index_past_end_is_rejected() {
        for token in ["2", "99999999999999999999999"] {
            let path = format!("/a/{token}");
            let mut value = doc(r#"{"a":[1,2]}"#);
            let err =
                apply(&mut value, &redact_only(&path), Target::WrappedMcpResponse).unwrap_err();
            assert_eq!(
                err,
                ModifyError::IndexOutOfRange {
                    path,
                    token: token.into(),
                    len: 2
                }
            );
        }
    }

    #[test]
    fn digit_tokens_on_objects_are_plain_keys() {
        let out = applied(
            doc(r#"{"a":{"01":1,"-":2}}"#),
            &redact_only("/a/01"),
            Target::WrappedMcpResponse,
        );
        assert_eq!(out, r#"{"a":{"01":"[REDACTED]","-":2}}"#);
    }

    #[test]
    fn empty_token_names_the_empty_key() {
        let out = applied(
            doc(r#"{"":{"":1}}"#),
            &redact_only("//"),
            Target::WrappedMcpResponse,
        );
        assert_eq!(out, r#"{"":{"":"[REDACTED]"}}"#);
    }

    #[test]
    fn absent_member_is_unappliable() {
        let mut value = tool_call_message();
        let err = apply(
            &mut value,
            &redact_only("/params/arguments/cc"),
            Target::WrappedMcpRequest,
        )
        .unwrap_err();
        assert_eq!(
            err,
            ModifyError::AbsentMember {
                path: "/params/arguments/cc".into(),
                token: "cc".into()
            }
        );
    }

    #[test]
    fn path_through_a_scalar_is_unappliable() {
        let mut value = tool_call_message();
        let err = apply(
            &mut value,
            &redact_only("/params/name/x"),
            Target::WrappedMcpRequest,
        )
        .unwrap_err();
        assert_eq!(
            err,
            ModifyError::NotAContainer {
                path: "/params/name/x".into(),
                token: "x".into(),
                kind: "string"
            }
        );
    }
}
