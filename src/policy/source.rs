//! Where a policy came from, so errors can point at a line of it.

use std::ops::Range;

/// The file a policy was read from: its display name and full text.
///
/// Spans recorded while parsing are byte offsets into `text`; keeping the
/// text beside the name lets [`PolicyError`](super::PolicyError) say
/// `proxy.toml:42:` instead of an offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicySource<'a> {
    /// How the file is named in errors and, by default, in `policy_id`.
    pub name: &'a str,
    /// The whole file, exactly as parsed.
    pub text: &'a str,
}

impl<'a> PolicySource<'a> {
    /// Pairs a file name with the text that was parsed from it.
    pub fn new(name: &'a str, text: &'a str) -> Self {
        Self { name, text }
    }

    /// The 1-based line on which `span` starts.
    ///
    /// Offsets past the end (a span from some other text) clamp to the last
    /// line rather than panic: a slightly wrong line beats a crash while
    /// reporting an error.
    pub fn line_of(&self, span: &Range<usize>) -> usize {
        let bytes = self.text.as_bytes();
        let before = &bytes[..span.start.min(bytes.len())];
        before.iter().filter(|&&b| b == b'\n').count() + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_one_based() {
        let source = PolicySource::new("p.toml", "a\nb\nc");
        assert_eq!(source.line_of(&(0..1)), 1);
        assert_eq!(source.line_of(&(2..3)), 2);
        assert_eq!(source.line_of(&(4..5)), 3);
    }

    #[test]
    fn out_of_range_span_clamps() {
        let source = PolicySource::new("p.toml", "a\nb");
        assert_eq!(source.line_of(&(99..100)), 2);
    }
}
