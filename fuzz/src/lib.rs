//! Helpers shared by the fuzz targets: carving one input into a stream and
//! the read sizes it arrives in, splitting an input into fields, and
//! comparing JSON values the way RFC 8785 sees them.

use serde_json::Value;

/// A byte stream and the sizes of the reads that deliver it, both taken
/// from one fuzz input: the first byte seeds the read sizes, the rest is the
/// stream. Framers must give the same frames however the stream is split.
pub struct Chunked<'a> {
    /// The whole stream.
    pub stream: &'a [u8],
    seed: u32,
}

impl<'a> Chunked<'a> {
    /// Splits `data` into a read-size seed and the stream.
    pub fn new(data: &'a [u8]) -> Self {
        match data.split_first() {
            Some((&seed, stream)) => Self {
                stream,
                seed: u32::from(seed) | 0x100,
            },
            None => Self {
                stream: data,
                seed: 0x100,
            },
        }
    }

    /// The stream cut into reads of 1 to 64 bytes (xorshift-chosen), so
    /// every split point gets exercised across runs.
    pub fn reads(&self) -> Vec<&'a [u8]> {
        let mut state = self.seed;
        let mut rest = self.stream;
        let mut reads = Vec::new();
        while !rest.is_empty() {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            let size = (state % 64 + 1) as usize;
            let (read, tail) = rest.split_at(size.min(rest.len()));
            reads.push(read);
            rest = tail;
        }
        reads
    }
}

/// Splits `data` at NUL bytes into exactly `N` fields (missing ones empty,
/// extra NULs stay in the last field).
pub fn fields<const N: usize>(data: &[u8]) -> [&[u8]; N] {
    let mut out = [&data[..0]; N];
    let mut parts = data.splitn(N, |b| *b == 0);
    for slot in out.iter_mut() {
        match parts.next() {
            Some(part) => *slot = part,
            None => break,
        }
    }
    out
}

/// Whether two JSON values are the same document, numbers compared by
/// their IEEE 754 double value (how RFC 8785 reads them) rather than by
/// spelling, which `arbitrary_precision` would otherwise keep.
pub fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => number_value(x) == number_value(y),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(key, x)| y.get(key).is_some_and(|y| same_json(x, y)))
        }
        _ => a == b,
    }
}

/// A number's double value, parsed from its exact text.
pub fn number_value(number: &serde_json::Number) -> f64 {
    number.to_string().parse().unwrap_or(f64::NAN)
}

/// Whether any number in `value` is outside the double range (RFC 8785
/// has no spelling for it).
pub fn has_unrepresentable_number(value: &Value) -> bool {
    match value {
        Value::Number(n) => !number_value(n).is_finite(),
        Value::Array(items) => items.iter().any(has_unrepresentable_number),
        Value::Object(members) => members.values().any(has_unrepresentable_number),
        _ => false,
    }
}
