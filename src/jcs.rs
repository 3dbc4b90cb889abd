//! RFC 8785 JSON Canonicalization Scheme (JCS) and SHA-256 hex digests.
//!
//! ACS hashes and signs JSON by its canonical form, so two parties that
//! serialize the same value differently (key order, number spelling, escapes)
//! still agree on the bytes. Everything that hashes or signs JSON goes through
//! this one module so there is exactly one canonicalizer in the proxy.
//!
//! The canonical form is streamed into a [`Sink`]: a byte buffer, or a
//! SHA-256 state directly, so a digest costs no intermediate tree, no
//! per-member buffers and no output `Vec`. Hashing is on the hot path (every
//! hook's `request_hash`, every audit entry's `entry_hash`), which is why
//! this is hand-written instead of going through a generic serializer.

use serde_json::{Map, Number, Value};
use sha2::{Digest, Sha256};

/// Why a JSON value has no canonical form.
#[derive(Debug, thiserror::Error)]
pub enum JcsError {
    /// With `arbitrary_precision` numbers are kept verbatim and may lie
    /// outside the IEEE 754 double range (e.g. `1e400`), which JCS has no
    /// spelling for.
    #[error("value has no RFC 8785 canonical form: number {0} is not a finite double")]
    NumberOutOfRange(String),
}

/// Where canonical bytes go.
pub trait Sink {
    /// Appends `bytes`.
    fn put(&mut self, bytes: &[u8]);

    /// Appends `bytes` between double quotes: a string with nothing to
    /// escape, the most common piece of canonical JSON. A sink may do it
    /// in one step instead of three.
    fn put_quoted(&mut self, bytes: &[u8]) {
        self.put(b"\"");
        self.put(bytes);
        self.put(b"\"");
    }
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }

    fn put_quoted(&mut self, bytes: &[u8]) {
        self.reserve(bytes.len() + 2);
        self.push(b'"');
        self.extend_from_slice(bytes);
        self.push(b'"');
    }
}

/// A SHA-256 state fed through a small stack buffer: canonical JSON is
/// written in many tiny pieces (quotes, colons, commas), and batching them
/// keeps the hasher's per-call overhead off every piece.
#[derive(Clone)]
pub struct HashSink {
    hasher: Sha256,
    buffer: [u8; 256],
    filled: usize,
}

impl Default for HashSink {
    fn default() -> Self {
        Self {
            hasher: Sha256::new(),
            buffer: [0; 256],
            filled: 0,
        }
    }
}

impl HashSink {
    /// The digest of everything put so far.
    pub fn finalize(mut self) -> [u8; 32] {
        self.hasher.update(&self.buffer[..self.filled]);
        self.hasher.finalize().into()
    }

    /// The lowercase hex digest of everything put so far.
    pub fn finalize_hex(self) -> String {
        hex_lower(&self.finalize())
    }

    /// [`Self::finalize_hex`], kept inline.
    pub fn finalize_digest(self) -> HexDigest {
        HexDigest::of(&self.finalize())
    }

    /// Feeds what is buffered to the hasher, so whole blocks are
    /// compressed now: a sink cloned afterwards (a shared prefix) does not
    /// compress them again.
    pub fn absorb(&mut self) {
        self.hasher.update(&self.buffer[..self.filled]);
        self.filled = 0;
    }
}

impl Sink for HashSink {
    fn put_quoted(&mut self, bytes: &[u8]) {
        let end = self.filled + bytes.len() + 2;
        if end > self.buffer.len() {
            self.put(b"\"");
            self.put(bytes);
            self.put(b"\"");
            return;
        }
        self.buffer[self.filled] = b'"';
        self.buffer[self.filled + 1..end - 1].copy_from_slice(bytes);
        self.buffer[end - 1] = b'"';
        self.filled = end;
    }

    fn put(&mut self, bytes: &[u8]) {
        if self.filled + bytes.len() <= self.buffer.len() {
            self.buffer[self.filled..self.filled + bytes.len()].copy_from_slice(bytes);
            self.filled += bytes.len();
            return;
        }
        self.hasher.update(&self.buffer[..self.filled]);
        self.filled = 0;
        if bytes.len() >= self.buffer.len() {
            self.hasher.update(bytes);
        } else {
            self.buffer[..bytes.len()].copy_from_slice(bytes);
            self.filled = bytes.len();
        }
    }
}

/// Returns the RFC 8785 canonical UTF-8 bytes of `value`.
///
/// Fallible because numbers are kept verbatim (`arbitrary_precision`) and
/// may not fit a double, which JCS requires.
pub fn canonical_bytes(value: &Value) -> Result<Vec<u8>, JcsError> {
    let mut bytes = Vec::with_capacity(256);
    write_value(&mut bytes, value)?;
    Ok(bytes)
}

/// Returns the lowercase hex SHA-256 of `bytes`, the digest spelling ACS uses
/// for `request_hash`, `entry_hash` and content digests.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex_lower(&Sha256::digest(bytes))
}

/// Lowercase hex of `bytes`: every hook's `request_hash` is spelled so.
/// The digits are written as bytes and made a `String` once; `hex::encode`
/// pushes them as `char`s, re-checking capacity and UTF-8 width for every
/// digit, which showed in profiles.
pub fn hex_lower(bytes: &[u8]) -> String {
    let mut out = vec![0u8; bytes.len() * 2];
    // The buffer is sized for the digits, the only way this can fail.
    let _ = hex::encode_to_slice(bytes, &mut out);
    // Every byte is an ASCII digit or letter, so this cannot fail.
    String::from_utf8(out).unwrap_or_default()
}

/// A SHA-256 digest in lowercase hex, kept inline: every audit entry
/// yields one that its chain keeps for the next entry, and a `String`
/// each (and its copy for the chain) was two allocations per entry.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct HexDigest([u8; 64]);

impl HexDigest {
    /// The hex spelling of `digest`.
    pub fn of(digest: &[u8; 32]) -> Self {
        let mut out = [0u8; 64];
        // 32 bytes fill the 64 digits exactly, the only way this can fail.
        let _ = hex::encode_to_slice(digest, &mut out);
        Self(out)
    }

    /// `text` as a digest, when it is 64 lowercase hex digits.
    pub fn parse(text: &str) -> Option<Self> {
        let bytes: [u8; 64] = text.as_bytes().try_into().ok()?;
        bytes
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
            .then_some(Self(bytes))
    }

    /// The digest's text.
    pub fn as_str(&self) -> &str {
        // Every byte is an ASCII digit or letter, so this cannot fail.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl std::fmt::Debug for HexDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The SHA-256 hex digest of `value`'s canonical form. A value JCS cannot
/// express (a number beyond the double range) is digested in its compact
/// serialization instead, so hostile input still gets a stable digest
/// rather than an error on the hot path.
pub fn value_digest(value: &Value) -> String {
    value_hex_digest(value).as_str().to_owned()
}

/// [`value_digest`], kept inline.
pub fn value_hex_digest(value: &Value) -> HexDigest {
    let mut sink = HashSink::default();
    match write_value(&mut sink, value) {
        Ok(()) => sink.finalize_digest(),
        Err(_) => HexDigest::of(&Sha256::digest(value.to_string().as_bytes()).into()),
    }
}

/// Checks that `value` has a canonical form (every number a finite
/// double) without writing it, so a value can be accepted now and
/// canonicalized later without that failing.
pub fn check_value(value: &Value) -> Result<(), JcsError> {
    match value {
        Value::Number(number) => write_number(&mut Discard, number),
        Value::Array(items) => items.iter().try_for_each(check_value),
        Value::Object(members) => members.values().try_for_each(check_value),
        Value::Null | Value::Bool(_) | Value::String(_) => Ok(()),
    }
}

/// A sink that keeps nothing, for [`check_value`].
struct Discard;

impl Sink for Discard {
    fn put(&mut self, _: &[u8]) {}
}

/// Streams the canonical form of `value` into `sink`.
pub fn write_value<S: Sink>(sink: &mut S, value: &Value) -> Result<(), JcsError> {
    match value {
        Value::Null => sink.put(b"null"),
        Value::Bool(true) => sink.put(b"true"),
        Value::Bool(false) => sink.put(b"false"),
        Value::Number(number) => write_number(sink, number)?,
        Value::String(string) => write_str(sink, string),
        Value::Array(items) => {
            sink.put(b"[");
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    sink.put(b",");
                }
                write_value(sink, item)?;
            }
            sink.put(b"]");
        }
        Value::Object(members) => write_object_without(sink, members, &[])?,
    }
    Ok(())
}

/// Streams the canonical form of the object `members` minus the keys in
/// `skip`, without copying the map (the §8.2 entry hash leaves out the two
/// chain members this way).
pub fn write_object_without<S: Sink>(
    sink: &mut S,
    members: &Map<String, Value>,
    skip: &[&str],
) -> Result<(), JcsError> {
    let kept = members
        .iter()
        .filter(|(key, _)| !skip.contains(&key.as_str()))
        .map(|(key, value)| (key.as_str(), value));
    write_object_in_key_order(sink, kept, |sink, _, value| write_value(sink, value))
}

/// Objects of up to this many members are sorted in an array on the
/// stack: a message, its `params` and a hook payload are such objects, and
/// a `Vec` each was an allocation per object per hashed hook.
const SORTED_ON_STACK: usize = 16;

/// Writes an object of `members` in JCS key order, each member's value
/// written by `write_value(sink, key, value)`, whatever tree holds them.
/// Members already in order are written as they come; up to
/// [`SORTED_ON_STACK`] are sorted on the stack, more in a `Vec`.
pub fn write_object_in_key_order<'m, S, V, I, F>(
    sink: &mut S,
    members: I,
    mut write_value: F,
) -> Result<(), JcsError>
where
    S: Sink,
    V: ?Sized + 'm,
    I: Iterator<Item = (&'m str, &'m V)> + Clone,
    F: FnMut(&mut S, &'m str, &'m V) -> Result<(), JcsError>,
{
    sink.put(b"{");
    if members
        .clone()
        .is_sorted_by(|(a, _), (b, _)| key_order(a, b).is_le())
    {
        write_members(sink, members, &mut write_value)?;
    } else {
        let mut slots = [None; SORTED_ON_STACK];
        let mut rest = members.clone();
        let mut count = 0;
        for slot in &mut slots {
            match rest.next() {
                Some(member) => *slot = Some(member),
                None => break,
            }
            count += 1;
        }
        let mut spilled: Vec<_>;
        let entries = if rest.next().is_none() {
            &mut slots[..count]
        } else {
            spilled = members.map(Some).collect();
            &mut spilled[..]
        };
        sort_by_key_order(entries);
        write_members(sink, entries.iter().flatten().copied(), &mut write_value)?;
    }
    sink.put(b"}");
    Ok(())
}

/// Sorts `entries` (all `Some`) by key.
fn sort_by_key_order<'m, V: ?Sized>(entries: &mut [Option<(&'m str, &'m V)>]) {
    let key = |entry: &Option<(&'m str, &'m V)>| -> &'m str { entry.map_or("", |(key, _)| key) };
    entries.sort_unstable_by(|a, b| key_order(key(a), key(b)));
}

fn write_members<'m, S, V, F>(
    sink: &mut S,
    members: impl Iterator<Item = (&'m str, &'m V)>,
    write_value: &mut F,
) -> Result<(), JcsError>
where
    S: Sink,
    V: ?Sized + 'm,
    F: FnMut(&mut S, &'m str, &'m V) -> Result<(), JcsError>,
{
    for (index, (key, value)) in members.enumerate() {
        if index > 0 {
            sink.put(b",");
        }
        write_str(sink, key);
        sink.put(b":");
        write_value(sink, key, value)?;
    }
    Ok(())
}

/// RFC 8785 §3.2.3: members sort by their keys' UTF-16 code units.
///
/// UTF-8 byte order is code point order, which equals UTF-16 order unless a
/// character outside the BMP (4-byte UTF-8, lead byte ≥ 0xF0) meets one in
/// U+E000..U+FFFF; only keys with such characters take the slow path.
pub fn key_order(a: &str, b: &str) -> std::cmp::Ordering {
    let astral = |key: &str| key.bytes().any(|byte| byte >= 0xF0);
    if astral(a) || astral(b) {
        a.encode_utf16().cmp(b.encode_utf16())
    } else {
        a.as_bytes().cmp(b.as_bytes())
    }
}

/// Writes a JSON string the way RFC 8785 §3.2.2.2 spells it: only `"`, `\`
/// and control characters are escaped, the usual two-character escapes
/// where they exist and lowercase `\u00xx` otherwise.
pub fn write_str<S: Sink>(sink: &mut S, string: &str) {
    let bytes = string.as_bytes();
    if !needs_escaping(bytes) {
        sink.put_quoted(bytes);
        return;
    }
    sink.put(b"\"");
    let mut start = 0;
    for (index, &byte) in bytes.iter().enumerate() {
        let escape: &[u8] = match byte {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0x00..=0x1f => b"",
            _ => continue,
        };
        sink.put(&bytes[start..index]);
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            let spelled = [
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(byte >> 4)],
                HEX[usize::from(byte & 0xf)],
            ];
            sink.put(&spelled);
        } else {
            sink.put(escape);
        }
        start = index + 1;
    }
    sink.put(&bytes[start..]);
    sink.put(b"\"");
}

/// Whether any byte of `bytes` must be escaped. Most strings need none;
/// a branch-free scan over fixed chunks, which the compiler vectorizes,
/// finds that far faster than the byte-by-byte writer. Most strings are
/// short (keys, ids, timestamps), so what is left after the chunks is
/// scanned eight bytes at a time too rather than byte by byte.
fn needs_escaping(bytes: &[u8]) -> bool {
    let escaped = |byte: u8| byte < 0x20 || byte == b'"' || byte == b'\\';
    let chunks = bytes.chunks_exact(32);
    let rest = chunks.remainder();
    for chunk in chunks {
        if chunk.iter().fold(false, |any, &byte| any | escaped(byte)) {
            return true;
        }
    }
    let words = rest.chunks_exact(8);
    let tail = words.remainder();
    let word_at = |at: usize| {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(&bytes[at..at + 8]);
        word_needs_escaping(u64::from_le_bytes(eight))
    };
    let mut at = bytes.len() - rest.len();
    for _ in words {
        if word_at(at) {
            return true;
        }
        at += 8;
    }
    match tail.len() {
        0 => false,
        // The last eight bytes overlap some already checked, which is
        // harmless and cheaper than the bytes one by one.
        _ if bytes.len() >= 8 => word_at(bytes.len() - 8),
        _ => tail.iter().any(|&byte| escaped(byte)),
    }
}

/// Whether any of the eight bytes in `word` is below 0x20, `"` or `\`.
///
/// The classic zero-byte test: `(x - 0x01..) & !x & 0x80..` is non-zero
/// exactly when some byte of `x` is zero (a borrow can only flag bytes
/// above a true zero, never create a hit on its own); with `0x20..` in
/// place of `0x01..` it flags a byte below 0x20, and applied to `x` xored
/// with a repeated byte it flags that byte.
fn word_needs_escaping(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero_byte = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let control = word.wrapping_sub(ONES * 0x20) & !word & HIGH;
    let quote = zero_byte(word ^ (ONES * u64::from(b'"')));
    let backslash = zero_byte(word ^ (ONES * u64::from(b'\\')));
    control | quote | backslash != 0
}

/// Writes a number as ECMAScript's `Number.prototype.toString` would print
/// the double it denotes (RFC 8785 §3.2.2.3).
///
/// Integers of up to 15 digits are exact doubles that ECMAScript prints
/// digit for digit, so they are copied as they are; everything else goes
/// through the double.
pub fn write_number<S: Sink>(sink: &mut S, number: &Number) -> Result<(), JcsError> {
    let text = number.as_str();
    let digits = text.strip_prefix('-').unwrap_or(text);
    let plain_integer = !digits.is_empty()
        && digits.len() <= 15
        && digits.bytes().all(|byte| byte.is_ascii_digit())
        && (digits.len() == 1 || !digits.starts_with('0'));
    if plain_integer && text != "-0" {
        sink.put(text.as_bytes());
        return Ok(());
    }
    match text.parse::<f64>() {
        Ok(double) if double.is_finite() => {
            let mut buffer = ryu_js::Buffer::new();
            sink.put(buffer.format_finite(double).as_bytes());
            Ok(())
        }
        _ => Err(JcsError::NumberOutOfRange(text.to_owned())),
    }
}

#[cfg(test)]
pub(crate) mod properties;

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast path for strings without escapes must see an escape
    /// wherever it is: in a whole chunk, at a chunk's edge, in the rest.
    #[test]
    fn escapes_are_found_anywhere_in_the_string() {
        for length in [0, 1, 31, 32, 33, 64, 70] {
            let plain = "a".repeat(length);
            let mut written = Vec::new();
            write_str(&mut written, &plain);
            assert_eq!(written, format!("\"{plain}\"").into_bytes());
            for at in 0..length {
                for special in ['"', '\\', '\n', '\u{1}'] {
                    let mut text = plain.clone().into_bytes();
                    text[at] = special as u8;
                    let text = String::from_utf8(text).unwrap();
                    let mut written = Vec::new();
                    write_str(&mut written, &text);
                    let expected = serde_json::to_string(&text).unwrap();
                    assert_eq!(
                        String::from_utf8(written).unwrap(),
                        expected,
                        "{at} of {length}"
                    );
                }
            }
        }
    }

    /// The eight-byte test must agree with the byte test for every byte
    /// value at every position, next to bytes that need no escape (plain
    /// ASCII, the last unescaped control boundary, UTF-8 continuations).
    #[test]
    fn word_test_agrees_with_the_byte_test() {
        let escaped = |byte: u8| byte < 0x20 || byte == b'"' || byte == b'\\';
        for filler in [b'a', b' ', b'!', 0x80, 0xff, b'#', b'[', b']'] {
            for at in 0..8 {
                for byte in 0..=255u8 {
                    let mut word = [filler; 8];
                    word[at] = byte;
                    assert_eq!(
                        word_needs_escaping(u64::from_le_bytes(word)),
                        escaped(byte),
                        "{byte:#04x} at {at} among {filler:#04x}"
                    );
                }
            }
        }
        for length in [8, 9, 15, 16, 17, 39, 40, 47, 48, 63] {
            for at in 0..length {
                let mut text = vec![b'z'; length];
                text[at] = b'"';
                assert!(needs_escaping(&text), "{at} of {length}");
                text[at] = b'~';
                assert!(!needs_escaping(&text), "{at} of {length}");
            }
        }
    }

    #[test]
    fn hash_sink_quoted_matches_three_puts() {
        for (filled, length) in [(0, 0), (0, 254), (0, 255), (10, 244), (10, 245), (200, 100)] {
            let text = vec![b'q'; length];
            let mut quoted = HashSink::default();
            let mut plain = HashSink::default();
            let prefix = vec![b'p'; filled];
            quoted.put(&prefix);
            plain.put(&prefix);
            quoted.put_quoted(&text);
            plain.put(b"\"");
            plain.put(&text);
            plain.put(b"\"");
            assert_eq!(quoted.finalize(), plain.finalize(), "{filled} + {length}");
        }
    }

    #[test]
    fn hex_lower_matches_the_hex_crate() {
        let bytes: Vec<u8> = (0..=255).collect();
        assert_eq!(hex_lower(&bytes), hex::encode(&bytes));
        assert_eq!(hex_lower(&[]), "");
    }

    #[test]
    fn hex_digests_match_the_hex_crate_and_parse_back() {
        let digest: [u8; 32] = std::array::from_fn(|i| (i * 37 + 5) as u8);
        let hex = HexDigest::of(&digest);
        assert_eq!(hex.as_str(), hex::encode(digest));
        assert_eq!(HexDigest::parse(hex.as_str()), Some(hex));
        let upper = hex.as_str().to_uppercase();
        for not_a_digest in ["", "ab", &upper, &"g".repeat(64), &"a".repeat(65)] {
            assert_eq!(HexDigest::parse(not_a_digest), None, "{not_a_digest}");
        }
    }

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
        // The digest still exists, over the compact form.
        assert_eq!(
            value_digest(&value),
            sha256_hex(value.to_string().as_bytes())
        );
    }

    #[test]
    fn sha256_hex_is_lowercase_hex() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn integers_keep_their_digits_only_while_exact() {
        assert_eq!(
            canonical_string("[0, -0, -7, 123456789012345]"),
            "[0,0,-7,123456789012345]"
        );
        assert_eq!(canonical_string("[9007199254740993]"), "[9007199254740992]");
        assert_eq!(canonical_string("[100000000000000000000000]"), "[1e+23]");
        assert_eq!(canonical_string("[1.0, -1.50, 1e2]"), "[1,-1.5,100]");
    }

    #[test]
    fn hash_sink_matches_hashing_the_buffer() {
        let long = "x".repeat(1000);
        let value = serde_json::json!({"a": long, "b": [1, 2, {"c": "\u{1}"}], "d": "short"});
        let mut sink = HashSink::default();
        write_value(&mut sink, &value).unwrap();
        assert_eq!(
            sink.finalize_hex(),
            sha256_hex(&canonical_bytes(&value).unwrap())
        );
    }

    #[test]
    fn object_without_skips_only_the_named_keys() {
        let value = serde_json::json!({"z": 1, "entry_hash": "h", "a": 2, "previous_hash": null});
        let Value::Object(members) = &value else {
            unreachable!()
        };
        let mut bytes = Vec::new();
        write_object_without(&mut bytes, members, &["entry_hash", "previous_hash"]).unwrap();
        assert_eq!(bytes, br#"{"a":2,"z":1}"#);
    }

    // Objects up to `SORTED_ON_STACK` members are sorted on the stack,
    // bigger ones in a `Vec`: both must give the reference order, with and
    // without skipped keys.
    #[test]
    fn objects_of_every_size_sort_by_key() {
        for size in 0..=2 * SORTED_ON_STACK + 1 {
            let mut members = Map::new();
            for index in (0..size).rev() {
                members.insert(
                    format!("k{index:02}\u{1f600}{}", index % 3),
                    Value::from(index),
                );
            }
            members.insert("skipped".into(), Value::Null);
            let value = Value::Object(members.clone());
            let mut written = Vec::new();
            write_object_without(&mut written, &members, &["skipped"]).unwrap();
            members.remove("skipped");
            let reference = serde_json_canonicalizer::to_vec(&Value::Object(members)).unwrap();
            assert_eq!(written, reference, "{size} members");
            let reference = serde_json_canonicalizer::to_vec(&value).unwrap();
            assert_eq!(
                canonical_bytes(&value).unwrap(),
                reference,
                "{size} members"
            );
        }
    }

    /// A small deterministic generator of awkward JSON: every escape class,
    /// astral and BMP-private-use keys, integers at the double boundary,
    /// decimals and exponents.
    fn awkward_value(seed: &mut u64, depth: u32) -> Value {
        fn next(seed: &mut u64) -> u64 {
            *seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            *seed >> 33
        }
        const STRINGS: [&str; 8] = [
            "",
            "plain",
            "\u{0}\u{1f}\u{7f}",
            "\"\\/\u{8}\u{c}\n\r\t",
            "\u{2028}é€",
            "\u{1f600}",
            "\u{fb33}\u{e000}",
            "a\u{10ffff}b",
        ];
        const NUMBERS: [&str; 12] = [
            "0",
            "-0",
            "1",
            "-9007199254740991",
            "9007199254740993",
            "1e21",
            "1e-7",
            "0.1",
            "123456789012345678",
            "-4.50",
            "5e-324",
            "1.7976931348623157e308",
        ];
        let pick = next(seed) % if depth == 0 { 4 } else { 6 };
        match pick {
            0 => Value::String(STRINGS[(next(seed) % 8) as usize].to_owned()),
            1 => serde_json::from_str(NUMBERS[(next(seed) % 12) as usize]).unwrap(),
            2 => Value::Bool(next(seed).is_multiple_of(2)),
            3 => Value::Null,
            4 => Value::Array(
                (0..next(seed) % 4)
                    .map(|_| awkward_value(seed, depth - 1))
                    .collect(),
            ),
            _ => {
                let mut members = Map::new();
                for _ in 0..next(seed) % 6 {
                    let key = format!("{}{}", STRINGS[(next(seed) % 8) as usize], next(seed) % 3);
                    members.insert(key, awkward_value(seed, depth - 1));
                }
                Value::Object(members)
            }
        }
    }

    #[test]
    fn agrees_with_the_reference_canonicalizer() {
        let mut seed = 7;
        for round in 0..3000 {
            let value = awkward_value(&mut seed, 4);
            let reference = serde_json_canonicalizer::to_vec(&value).unwrap();
            assert_eq!(
                canonical_bytes(&value).unwrap(),
                reference,
                "round {round}: {value}"
            );
        }
    }
}
