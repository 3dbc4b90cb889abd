//! RFC 6901 JSON Pointer helpers: validation, building, containment.
//!
//! `serde_json::Value::pointer` does the lookups; what it lacks is a check
//! that a configured pointer is well-formed and a way to write the pointer
//! of a leaf we walked to.

use super::error::RuleProblem;

/// Checks that `pointer` is `""` or `/`-led with only `~0` / `~1` escapes.
///
/// A malformed pointer would otherwise never match and the rule would be
/// silently dead, so it is a compile error.
pub(crate) fn validate(pointer: &str, field: &'static str) -> Result<(), RuleProblem> {
    let invalid = |why| RuleProblem::InvalidPointer {
        field,
        pointer: pointer.to_owned(),
        why,
    };
    if !(pointer.is_empty() || pointer.starts_with('/')) {
        return Err(invalid("must be empty or start with '/'"));
    }
    let mut chars = pointer.chars();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
            return Err(invalid("'~' must be followed by '0' or '1'"));
        }
    }
    Ok(())
}

/// Appends one reference token, escaping `~` before `/` as RFC 6901
/// requires (the reverse order would turn `/` into `~01`).
pub(crate) fn push_token(pointer: &mut String, token: &str) {
    pointer.push('/');
    for c in token.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            other => pointer.push(other),
        }
    }
}

/// Appends an array index token.
pub(crate) fn push_index(pointer: &mut String, index: usize) {
    use std::fmt::Write;
    // Writing into a String cannot fail.
    let _ = write!(pointer, "/{index}");
}

/// Whether `path` is `ancestor` itself or lies beneath it.
///
/// Compares whole tokens so `/a/b` is not inside `/a/bc`.
pub(crate) fn is_within(path: &str, ancestor: &str) -> bool {
    match path.strip_prefix(ancestor) {
        Some(rest) => rest.is_empty() || rest.starts_with('/'),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_rfc6901_pointers() {
        for ok in ["", "/", "/a", "/a/0", "/a~0b/c~1d", "/~1"] {
            assert!(validate(ok, "match.pointer").is_ok(), "{ok}");
        }
    }

    #[test]
    fn rejects_relative_and_bad_escapes() {
        for bad in ["a", "a/b", "/a~", "/a~2", "#/a"] {
            assert!(validate(bad, "match.pointer").is_err(), "{bad}");
        }
    }

    #[test]
    fn tokens_escape_tilde_then_slash() {
        let mut p = String::new();
        push_token(&mut p, "a/b");
        push_token(&mut p, "~1");
        push_index(&mut p, 3);
        assert_eq!(p, "/a~1b/~01/3");
    }

    #[test]
    fn containment_is_token_wise() {
        assert!(is_within("/a/b", "/a"));
        assert!(is_within("/a", "/a"));
        assert!(is_within("/a", ""));
        assert!(!is_within("/ab", "/a"));
        assert!(!is_within("/a", "/a/b"));
    }
}
