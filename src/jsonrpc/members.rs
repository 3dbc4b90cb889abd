//! Finding a few top-level members of a JSON object without parsing the
//! rest: strings are skipped a word at a time and nested values by their
//! brackets, so a large `result` costs little more than a scan.
//!
//! The walk checks the object's own shape (keys, colons, commas, braces)
//! but not its values: it is for frames the proxy has already read as
//! JSON, such as those its own relay sessions write.

use std::ops::Range;

use super::scan::string_end;

/// Where the values of the members named `names` sit in the JSON object
/// `bytes` (each `None` when absent). `None` when `bytes` is not an object
/// of that shape, when a member's name is escaped (so it could spell one
/// of `names`), or when one of `names` appears twice.
pub fn locate_members<const N: usize>(
    bytes: &[u8],
    names: [&str; N],
) -> Option<[Option<Range<usize>>; N]> {
    let mut found = [const { None }; N];
    let mut at = skip_whitespace(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    at = skip_whitespace(bytes, at + 1);
    if bytes.get(at) == Some(&b'}') {
        return only_whitespace_after(bytes, at + 1).then_some(found);
    }
    loop {
        let (key, value) = member_at(bytes, at)?;
        if let Some(slot) = names.iter().position(|name| name.as_bytes() == key) {
            if found[slot].replace(value.clone()).is_some() {
                return None;
            }
        }
        at = skip_whitespace(bytes, value.end);
        match bytes.get(at) {
            Some(b',') => at = skip_whitespace(bytes, at + 1),
            Some(b'}') => return only_whitespace_after(bytes, at + 1).then_some(found),
            _ => return None,
        }
    }
}

/// Where the value of the member `name` sits in the JSON object `bytes`
/// starts with, walking its members only as far as that one: nothing
/// after it is looked at, so this is for text the proxy wrote itself (in
/// canonical JSON, `id` leads a JSON-RPC request). `None` when the walk
/// meets anything else first: not an object, an escaped name, its end.
pub fn leading_member(bytes: &[u8], name: &str) -> Option<Range<usize>> {
    let mut at = skip_whitespace(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    at = skip_whitespace(bytes, at + 1);
    loop {
        let (key, value) = member_at(bytes, at)?;
        if key == name.as_bytes() {
            return Some(value);
        }
        at = skip_whitespace(bytes, value.end);
        if bytes.get(at) != Some(&b',') {
            return None;
        }
        at = skip_whitespace(bytes, at + 1);
    }
}

/// The unescaped name and the value's place of the member (`"name": value`)
/// that starts at `at`; `None` for anything else, or an escaped name.
fn member_at(bytes: &[u8], at: usize) -> Option<(&[u8], Range<usize>)> {
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let key_end = string_end(bytes, at + 1)?;
    let key = bytes.get(at + 1..key_end - 1)?;
    if key.contains(&b'\\') {
        return None;
    }
    let colon = skip_whitespace(bytes, key_end);
    if bytes.get(colon) != Some(&b':') {
        return None;
    }
    let value_start = skip_whitespace(bytes, colon + 1);
    let value_end = value_end(bytes, value_start)?;
    Some((key, value_start..value_end))
}

/// Just past the value that starts at `at`.
fn value_end(bytes: &[u8], at: usize) -> Option<usize> {
    match bytes.get(at)? {
        b'"' => string_end(bytes, at + 1),
        b'{' | b'[' => container_end(bytes, at),
        _ => {
            let rest = bytes.get(at..)?;
            let length = rest
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']') || b.is_ascii_whitespace())
                .unwrap_or(rest.len());
            (length > 0).then_some(at + length)
        }
    }
}

/// Just past the bracket that closes the array or object opened at `at`.
fn container_end(bytes: &[u8], mut at: usize) -> Option<usize> {
    let mut depth = 0usize;
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'"' => {
                at = string_end(bytes, at + 1)?;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(at + 1);
                }
            }
            _ => {}
        }
        at += 1;
    }
    None
}

fn skip_whitespace(bytes: &[u8], at: usize) -> usize {
    let rest = bytes.get(at..).unwrap_or_default();
    at + rest
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(rest.len())
}

fn only_whitespace_after(bytes: &[u8], at: usize) -> bool {
    skip_whitespace(bytes, at) == bytes.len()
}

/// Where `part`, a string borrowed from `whole` (by a borrowing
/// deserializer), sits in it.
fn place(whole: &[u8], part: &str) -> Option<Range<usize>> {
    let start = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    let end = start + part.len();
    (whole.get(start..end)? == part.as_bytes()).then_some(start..end)
}

/// Where the JSON string whose contents `text` borrows from `whole` sits
/// in it, quotes included: its exact spelling, which had no escapes.
pub fn place_quoted(whole: &[u8], text: &str) -> Option<Range<usize>> {
    let inner = place(whole, text)?;
    let quoted = inner.start.checked_sub(1)?..inner.end + 1;
    let spelled = whole.get(quoted.clone())?;
    (spelled.starts_with(b"\"") && spelled.ends_with(b"\"")).then_some(quoted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_at<'a>(text: &'a str, range: &Option<Range<usize>>) -> Option<&'a str> {
        range.clone().map(|range| &text[range])
    }

    #[test]
    fn members_are_found_past_nested_values_and_strings() {
        let text = r#" { "result" : {"content":[{"type":"text","text":"a \"}\" ] ,"}],"id":"x"} ,
            "jsonrpc":"2.0", "id" : 42 } "#;
        let [id, method, result] =
            locate_members(text.as_bytes(), ["id", "method", "result"]).unwrap();
        assert_eq!(text_at(text, &id), Some("42"));
        assert_eq!(method, None);
        assert!(text_at(text, &result).unwrap().ends_with(r#""id":"x"}"#));
        let [id] = locate_members(br#"{"id":-1.5e3,"a":[]}"#, ["id"]).unwrap();
        assert_eq!(id, Some(6..12));
        assert_eq!(locate_members(b"{}", ["id"]), Some([None]));
    }

    #[test]
    fn a_leading_member_is_found_without_reading_past_it() {
        let text = r#" {"params":{"id":"inner"},"id" : "outer", "then": [unclosed"#;
        let at = leading_member(text.as_bytes(), "id").unwrap();
        assert_eq!(&text[at], r#""outer""#);
        for text in [
            r#"{"a":1}"#,
            r#"{"\u0069d":1}"#,
            r#"[{"id":1}]"#,
            r#"{"a":1 "id":2}"#,
        ] {
            assert_eq!(leading_member(text.as_bytes(), "id"), None, "{text}");
        }
    }

    #[test]
    fn what_the_walk_cannot_vouch_for_is_refused() {
        for text in [
            r#"{"id":1,"id":2}"#,
            r#"{"\u0069d":1}"#,
            r#"[{"id":1}]"#,
            r#"{"id":1"#,
            r#"{"id":1,}"#,
            r#"{"id":1} x"#,
            r#"{"id":}"#,
            r#"{"a":[1,2}"#,
            r#"{"a":"unclosed}"#,
            r#"{"id" 1}"#,
            "",
        ] {
            assert_eq!(locate_members(text.as_bytes(), ["id"]), None, "{text}");
        }
    }
}
