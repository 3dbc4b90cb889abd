//! Header values for `Mcp-Name` and `Mcp-Param-{Name}`: plain when the
//! value is visible ASCII (spaces inside allowed) without surrounding
//! whitespace, else `=?base64?<standard base64 of its UTF-8>?=`, as is a
//! plain value that itself looks like that sentinel.

use base64::Engine;

const PREFIX: &str = "=?base64?";
const SUFFIX: &str = "?=";

/// Why a received header value cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Bytes no header value may carry (control characters, non-ASCII).
    #[error("the value has characters a header value may not carry")]
    InvalidCharacters,
    /// A sentinel whose payload is not base64 of UTF-8 text.
    #[error("the value is not valid =?base64?…?= text")]
    InvalidBase64,
}

/// The header text for `value`.
pub fn encode(value: &str) -> String {
    let plain = !value.is_empty()
        && value.bytes().all(|b| (0x20..=0x7e).contains(&b))
        && !value.starts_with(' ')
        && !value.ends_with(' ')
        && !looks_encoded(value);
    if plain {
        return value.to_owned();
    }
    let encoded = base64::engine::general_purpose::STANDARD.encode(value.as_bytes());
    format!("{PREFIX}{encoded}{SUFFIX}")
}

/// The value a received header carries, decoded when it is a sentinel.
pub fn decode(header: &[u8]) -> Result<String, DecodeError> {
    if !header
        .iter()
        .all(|b| (0x20..=0x7e).contains(b) || *b == b'\t')
    {
        return Err(DecodeError::InvalidCharacters);
    }
    // Checked above: visible ASCII is UTF-8.
    let text = String::from_utf8_lossy(header);
    let text = text.trim_matches([' ', '\t']);
    if !looks_encoded(text) {
        return Ok(text.to_owned());
    }
    let payload = &text[PREFIX.len()..text.len() - SUFFIX.len()];
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(payload)
        .map_err(|_| DecodeError::InvalidBase64)?;
    String::from_utf8(bytes).map_err(|_| DecodeError::InvalidBase64)
}

fn looks_encoded(value: &str) -> bool {
    value.len() >= PREFIX.len() + SUFFIX.len()
        && value.starts_with(PREFIX)
        && value.ends_with(SUFFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_sent_plain_or_as_base64() {
        assert_eq!(encode("get-sum"), "get-sum");
        assert_eq!(encode("two words"), "two words");
        assert_eq!(encode("Hello, 世界"), "=?base64?SGVsbG8sIOS4lueVjA==?=");
        assert_eq!(encode(" padded "), "=?base64?IHBhZGRlZCA=?=");
        assert_eq!(encode("line1\nline2"), "=?base64?bGluZTEKbGluZTI=?=");
        assert_eq!(
            encode("=?base64?literal?="),
            "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
        );
        assert_eq!(encode(""), "=?base64??=");
    }

    #[test]
    fn received_values_are_decoded() {
        assert_eq!(decode(b"us-west1").unwrap(), "us-west1");
        assert_eq!(
            decode(b"=?base64?SGVsbG8sIOS4lueVjA==?=").unwrap(),
            "Hello, 世界"
        );
        assert_eq!(decode(b"=?base64?IHBhZGRlZCA=?=").unwrap(), " padded ");
        assert_eq!(decode(b"=?base64??=").unwrap(), "");
        assert_eq!(decode(b"=?base64?!!!?="), Err(DecodeError::InvalidBase64));
        assert_eq!(decode(b"=?base64?/w==?="), Err(DecodeError::InvalidBase64));
        assert_eq!(decode(b"caf\xc3\xa9"), Err(DecodeError::InvalidCharacters));
        assert_eq!(decode(b"a\x01b"), Err(DecodeError::InvalidCharacters));
        for value in ["x", "Hello, 世界", " a ", "=?base64?x?=", "tab\there"] {
            assert_eq!(decode(encode(value).as_bytes()).unwrap(), value);
        }
    }
}
