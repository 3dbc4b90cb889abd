//! One cheap pass over a frame before anything parses it: the bytes must be
//! UTF-8 and the nesting of arrays and objects must stay within a limit.
//!
//! The depth check runs before serde sees the frame, so a hostile message
//! nested thousands deep is refused in linear time with a clear error,
//! never reaches a recursive parser, a hook or the Guardian, and the parse
//! that follows may safely lift serde_json's own recursion limit.

/// Nesting allowed when nothing else is configured (`[limits] max_json_depth`).
pub const DEFAULT_MAX_JSON_DEPTH: usize = 128;

/// The highest `max_json_depth` a configuration may set: the message tree
/// is built, hashed and dropped recursively, and this depth stays well
/// inside a runtime worker's stack.
pub const MAX_JSON_DEPTH_CEILING: usize = 256;

/// Why a frame failed the scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ScanError {
    /// Bytes that are not UTF-8 (RFC 8259 §8.1 requires it).
    #[error("the message is not valid UTF-8 (first invalid byte at offset {offset})")]
    NotUtf8 {
        /// Where the first invalid sequence starts.
        offset: usize,
    },
    /// Arrays and objects nested deeper than the limit.
    #[error("JSON nesting exceeds the limit of {limit} levels ([limits] max_json_depth)")]
    TooDeep {
        /// The configured limit.
        limit: usize,
    },
}

/// Checks `bytes` is UTF-8 and nests at most `max_depth` arrays/objects.
///
/// Brackets inside strings do not count. The scan does not validate JSON
/// syntax; the peek that follows does.
pub fn scan(bytes: &[u8], max_depth: usize) -> Result<(), ScanError> {
    if let Err(err) = std::str::from_utf8(bytes) {
        return Err(ScanError::NotUtf8 {
            offset: err.valid_up_to(),
        });
    }
    let mut depth = 0usize;
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'"' => {
                at = string_end(bytes, at + 1).unwrap_or(bytes.len());
                continue;
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > max_depth {
                    return Err(ScanError::TooDeep { limit: max_depth });
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        at += 1;
    }
    Ok(())
}

/// Just past the closing quote of the string whose contents start at
/// `from`, found a word at a time; `None` when it is not closed.
pub(super) fn string_end(bytes: &[u8], mut from: usize) -> Option<usize> {
    loop {
        let rest = bytes.get(from..)?;
        let offset = memchr::memchr2(b'"', b'\\', rest)?;
        if rest[offset] == b'"' {
            return Some(from + offset + 1);
        }
        from += offset + 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(depth: usize) -> String {
        format!(
            "{}{}",
            "[".repeat(depth.saturating_sub(1)) + "{\"a\":",
            "1}".to_owned() + &"]".repeat(depth.saturating_sub(1))
        )
    }

    #[test]
    fn depth_counts_containers_outside_strings() {
        assert_eq!(scan(nested(3).as_bytes(), 3), Ok(()));
        assert_eq!(
            scan(nested(4).as_bytes(), 3),
            Err(ScanError::TooDeep { limit: 3 })
        );
        let brackets_in_strings = r#"{"a":"[[[[{{{{","b":"\"[[[[","c":"\\","d":"{"}"#;
        assert_eq!(scan(brackets_in_strings.as_bytes(), 1), Ok(()));
        let unclosed = r#"{"a":"[[[["#;
        assert_eq!(scan(unclosed.as_bytes(), 1), Ok(()));
        assert_eq!(scan(br#"{"a\"#, 1), Ok(()));
        assert_eq!(scan(br#"[[],[],[[]]]"#, 3), Ok(()));
        assert!(scan(br#"[[],[],[[[]]]]"#, 3).is_err());
    }

    #[test]
    fn invalid_utf8_is_located() {
        let bytes = b"{\"a\":\"\xff\"}";
        assert_eq!(scan(bytes, 8), Err(ScanError::NotUtf8 { offset: 6 }));
        assert_eq!(scan("{\"é\":1}".as_bytes(), 8), Ok(()));
    }

    #[test]
    fn a_very_deep_frame_is_refused_without_recursion() {
        let deep = "[".repeat(1_000_000);
        assert_eq!(
            scan(deep.as_bytes(), DEFAULT_MAX_JSON_DEPTH),
            Err(ScanError::TooDeep {
                limit: DEFAULT_MAX_JSON_DEPTH
            })
        );
    }
}
