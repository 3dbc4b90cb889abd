//! Newline-delimited framing with a size limit.
//!
//! An oversized line is reported as [`LineFrame::TooLong`] and its remaining
//! bytes are skipped as they arrive, so a hostile peer cannot make the proxy
//! buffer more than the limit, and the stream goes on with the next line.

use bytes::{Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

use crate::jsonrpc::Message;
use crate::telemetry::Carrier;

/// One item read from a line-framed stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineFrame {
    /// A complete line without its `\n` (and without a trailing `\r`).
    Line(Bytes),
    /// A line longer than the limit; its content was discarded.
    TooLong,
    /// A message from a network listener that came with a W3C trace
    /// context (`traceparent` header) while tracing is on.
    Traced {
        /// The message.
        line: Bytes,
        /// The trace context it came with.
        carrier: Box<Carrier>,
    },
    /// A message its writer has already peeked (a virtual server's router
    /// hands a routed call to its upstream's relay session this way), so
    /// the relay does not peek it again. Never read from a byte stream.
    Peeked(Box<Message>),
}

// The large variants are boxed: every session holds several queues of
// frames, each allocated a block of slots up front, so a slot stays the
// size of a line.

impl LineFrame {
    /// The message's bytes, however they came; `None` for a line that was
    /// too long.
    pub fn into_bytes(self) -> Option<Bytes> {
        match self {
            LineFrame::Line(line) | LineFrame::Traced { line, .. } => Some(line),
            LineFrame::Peeked(message) => Some(message.bytes),
            LineFrame::TooLong => None,
        }
    }
}

/// Decoder/encoder for `\n`-terminated frames of at most `max_length` bytes.
#[derive(Debug, Clone)]
pub struct LineCodec {
    max_length: usize,
    /// Bytes of the buffer already scanned for `\n`, so each byte is scanned once.
    scanned: usize,
    /// Inside an oversized line: drop bytes until the next `\n`.
    discarding: bool,
}

impl LineCodec {
    /// A codec refusing lines longer than `max_length` bytes.
    pub fn new(max_length: usize) -> Self {
        Self {
            max_length,
            scanned: 0,
            discarding: false,
        }
    }
}

impl Decoder for LineCodec {
    type Item = LineFrame;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<LineFrame>, std::io::Error> {
        loop {
            let newline = buf[self.scanned..].iter().position(|b| *b == b'\n');
            match (newline, self.discarding) {
                (Some(offset), true) => {
                    let _ = buf.split_to(self.scanned + offset + 1);
                    self.scanned = 0;
                    self.discarding = false;
                    return Ok(Some(LineFrame::TooLong));
                }
                (Some(offset), false) => {
                    let end = self.scanned + offset;
                    self.scanned = 0;
                    if end > self.max_length {
                        let _ = buf.split_to(end + 1);
                        return Ok(Some(LineFrame::TooLong));
                    }
                    let mut line = buf.split_to(end + 1);
                    line.truncate(end);
                    if line.last() == Some(&b'\r') {
                        line.truncate(end - 1);
                    }
                    if line.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    return Ok(Some(LineFrame::Line(line.freeze())));
                }
                (None, true) => {
                    buf.clear();
                    self.scanned = 0;
                    return Ok(None);
                }
                (None, false) => {
                    if buf.len() > self.max_length {
                        buf.clear();
                        self.scanned = 0;
                        self.discarding = true;
                        return Ok(None);
                    }
                    self.scanned = buf.len();
                    return Ok(None);
                }
            }
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<LineFrame>, std::io::Error> {
        if let Some(frame) = self.decode(buf)? {
            return Ok(Some(frame));
        }
        if self.discarding {
            self.discarding = false;
            return Ok(Some(LineFrame::TooLong));
        }
        // A final line without `\n` is still a message.
        if buf.iter().all(u8::is_ascii_whitespace) {
            buf.clear();
            self.scanned = 0;
            return Ok(None);
        }
        self.scanned = 0;
        let mut line = buf.split_to(buf.len());
        if line.last() == Some(&b'\r') {
            line.truncate(line.len() - 1);
        }
        Ok(Some(LineFrame::Line(line.freeze())))
    }
}

impl Encoder<Bytes> for LineCodec {
    type Error = std::io::Error;

    fn encode(&mut self, item: Bytes, dst: &mut BytesMut) -> Result<(), std::io::Error> {
        dst.reserve(item.len() + 1);
        dst.extend_from_slice(&item);
        dst.extend_from_slice(b"\n");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_frame_but_a_too_long_line_gives_its_bytes() {
        let line = Bytes::from_static(br#"{"jsonrpc":"2.0","method":"m"}"#);
        let message = match crate::jsonrpc::peek_frame(line.clone()) {
            Ok(crate::jsonrpc::Frame::Single(message)) => message,
            _ => panic!("the line is a message"),
        };
        assert_eq!(
            LineFrame::Line(line.clone()).into_bytes(),
            Some(line.clone())
        );
        assert_eq!(
            LineFrame::Peeked(Box::new(message)).into_bytes(),
            Some(line)
        );
        assert_eq!(LineFrame::TooLong.into_bytes(), None);
        assert!(std::mem::size_of::<LineFrame>() <= 48);
    }

    fn decode_all(codec: &mut LineCodec, chunks: &[&[u8]]) -> Vec<LineFrame> {
        let mut buf = BytesMut::new();
        let mut frames = Vec::new();
        for chunk in chunks {
            buf.extend_from_slice(chunk);
            while let Some(frame) = codec.decode(&mut buf).unwrap() {
                frames.push(frame);
            }
        }
        while let Some(frame) = codec.decode_eof(&mut buf).unwrap() {
            frames.push(frame);
        }
        frames
    }

    fn line(text: &str) -> LineFrame {
        LineFrame::Line(Bytes::copy_from_slice(text.as_bytes()))
    }

    #[test]
    fn splits_lines_across_chunks_and_strips_cr() {
        let mut codec = LineCodec::new(100);
        let frames = decode_all(&mut codec, &[b"{\"a\":", b"1}\r\n{\"b\"", b":2}\n\n"]);
        assert_eq!(frames, vec![line("{\"a\":1}"), line("{\"b\":2}")]);
    }

    #[test]
    fn oversized_line_is_skipped_without_buffering() {
        let mut codec = LineCodec::new(8);
        let mut buf = BytesMut::new();
        buf.extend_from_slice(b"0123456789abcdef");
        assert_eq!(codec.decode(&mut buf).unwrap(), None);
        assert!(buf.is_empty(), "oversized content must not be kept");
        buf.extend_from_slice(b"more-more-more\nok\n");
        assert_eq!(codec.decode(&mut buf).unwrap(), Some(LineFrame::TooLong));
        assert_eq!(codec.decode(&mut buf).unwrap(), Some(line("ok")));
    }

    #[test]
    fn oversized_complete_line_is_reported() {
        let mut codec = LineCodec::new(4);
        let frames = decode_all(&mut codec, &[b"123456\nabc\n"]);
        assert_eq!(frames, vec![LineFrame::TooLong, line("abc")]);
    }

    #[test]
    fn final_line_without_newline_is_kept() {
        let mut codec = LineCodec::new(100);
        let frames = decode_all(&mut codec, &[b"a\nb"]);
        assert_eq!(frames, vec![line("a"), line("b")]);
    }

    // Found by the line_framer fuzz target: the last line of a stream kept
    // its CR when no LF followed, unlike every other line.
    #[test]
    fn final_line_without_newline_drops_its_cr() {
        let mut codec = LineCodec::new(100);
        let frames = decode_all(&mut codec, &[b"a\r\nb\r"]);
        assert_eq!(frames, vec![line("a"), line("b")]);
    }
}
