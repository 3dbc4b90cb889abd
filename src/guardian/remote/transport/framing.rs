//! `Content-Length` framing, the ACS stdio transport (LSP style):
//!
//! ```text
//! Content-Length: 17\r\n
//! Content-Type: application/json\r\n      (optional, ignored)
//! \r\n
//! {"jsonrpc":"2.0"}
//! ```
//!
//! The decoder is strict: header lines end in CRLF, a blank line ends the
//! headers, and `Content-Length` must appear exactly once. A peer speaking
//! MCP's newline-delimited JSON instead gets a clear error at once rather
//! than a hang. A body over the limit is reported as [`Frame::TooLarge`]
//! as soon as its header is read, and then skipped as it arrives, so the
//! proxy never buffers it and the stream stays usable.

use std::fmt::Write as _;

use bytes::{Buf, Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

use super::error::TransportError;

/// The most header bytes accepted before the blank line; real headers are
/// a few dozen bytes, so anything near this is not a Guardian talking.
pub const MAX_HEADER_BYTES: usize = 8 * 1024;

const CONTENT_LENGTH: &str = "content-length";
const HEADER_END: &[u8] = b"\r\n\r\n";
/// How much of an offending header line an error message quotes.
const QUOTE_LIMIT: usize = 64;

/// One item read from a `Content-Length`-framed stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A complete body.
    Body(Bytes),
    /// A body longer than the limit; it is being discarded unread.
    TooLarge {
        /// The announced `Content-Length`.
        length: u64,
    },
}

/// Decoder and encoder for `Content-Length` frames of at most `max_frame`
/// body bytes.
#[derive(Debug, Clone)]
pub struct ContentLengthCodec {
    max_frame: usize,
    state: State,
    /// Header bytes already checked, so each byte is scanned once.
    scanned: usize,
}

#[derive(Debug, Clone, Copy)]
enum State {
    Headers,
    Body(usize),
    /// Inside an oversized body: this many bytes are still to be dropped.
    Skip(u64),
}

impl ContentLengthCodec {
    /// A codec refusing bodies longer than `max_frame` bytes.
    pub fn new(max_frame: usize) -> Self {
        Self {
            max_frame,
            state: State::Headers,
            scanned: 0,
        }
    }

    /// The body size limit.
    pub fn max_frame(&self) -> usize {
        self.max_frame
    }

    /// Finds the end of the header block, rejecting bare-LF line endings as
    /// soon as they show up.
    fn header_end(&mut self, buf: &BytesMut) -> Result<Option<usize>, TransportError> {
        if buf.first().is_some_and(|b| matches!(b, b'{' | b'[')) {
            return Err(malformed(
                "a JSON body arrived without a Content-Length header \
                 (ACS stdio is not newline-delimited JSON)",
            ));
        }
        for i in self.scanned..buf.len() {
            if buf[i] != b'\n' {
                continue;
            }
            if i == 0 || buf[i - 1] != b'\r' {
                return Err(malformed("a header line ends in a bare LF instead of CRLF"));
            }
            if buf[..=i].ends_with(HEADER_END) {
                self.scanned = 0;
                // The limit holds however the block arrived: in one read
                // it is whole here, in pieces it was refused below.
                if i + 1 > MAX_HEADER_BYTES {
                    return Err(headers_too_long());
                }
                return Ok(Some(i + 1));
            }
        }
        self.scanned = buf.len();
        if buf.len() > MAX_HEADER_BYTES {
            return Err(headers_too_long());
        }
        Ok(None)
    }

    /// Consumes a complete header block and moves to the body (or skips it).
    fn start_frame(
        &mut self,
        buf: &mut BytesMut,
        end: usize,
    ) -> Result<Option<Frame>, TransportError> {
        let length = content_length(&buf[..end - HEADER_END.len()])?;
        buf.advance(end);
        if length > self.max_frame as u64 {
            self.state = State::Skip(length);
            return Ok(Some(Frame::TooLarge { length }));
        }
        // The length is within the limit, so reserving it is bounded.
        let length = length as usize;
        buf.reserve(length.saturating_sub(buf.len()));
        self.state = State::Body(length);
        Ok(None)
    }
}

impl Decoder for ContentLengthCodec {
    type Item = Frame;
    type Error = TransportError;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, TransportError> {
        loop {
            match self.state {
                State::Headers => {
                    let Some(end) = self.header_end(buf)? else {
                        return Ok(None);
                    };
                    if let Some(frame) = self.start_frame(buf, end)? {
                        return Ok(Some(frame));
                    }
                }
                State::Body(length) => {
                    if buf.len() < length {
                        return Ok(None);
                    }
                    self.state = State::Headers;
                    return Ok(Some(Frame::Body(buf.split_to(length).freeze())));
                }
                State::Skip(remaining) => {
                    let dropped = remaining.min(buf.len() as u64);
                    buf.advance(dropped as usize);
                    if dropped < remaining {
                        self.state = State::Skip(remaining - dropped);
                        return Ok(None);
                    }
                    self.state = State::Headers;
                }
            }
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, TransportError> {
        if let Some(frame) = self.decode(buf)? {
            return Ok(Some(frame));
        }
        if matches!(self.state, State::Headers) && buf.is_empty() {
            return Ok(None);
        }
        Err(TransportError::Closed(
            "the stream ended in the middle of a frame".into(),
        ))
    }
}

impl Encoder<Bytes> for ContentLengthCodec {
    type Error = TransportError;

    fn encode(&mut self, body: Bytes, dst: &mut BytesMut) -> Result<(), TransportError> {
        if body.len() > self.max_frame {
            return Err(TransportError::FrameTooLarge {
                length: body.len() as u64,
                max: self.max_frame,
            });
        }
        dst.reserve(body.len() + 32);
        put_header(dst, body.len());
        dst.extend_from_slice(&body);
        Ok(())
    }
}

/// Appends `Content-Length: <length>\r\n\r\n`, the whole header block this
/// side sends (no `Content-Type`: ACS fixes UTF-8 JSON).
pub fn put_header(dst: &mut BytesMut, length: usize) {
    // Writing into a BytesMut cannot fail.
    let _ = write!(dst, "Content-Length: {length}\r\n\r\n");
}

/// Reads the one `Content-Length` out of a header block (without its final
/// blank line), ignoring every other header.
fn content_length(block: &[u8]) -> Result<u64, TransportError> {
    let block = std::str::from_utf8(block).map_err(|_| malformed("headers are not UTF-8"))?;
    let mut length = None;
    for line in block.split("\r\n") {
        let (name, value) = header_line(line)?;
        if !name.eq_ignore_ascii_case(CONTENT_LENGTH) {
            continue;
        }
        if length.is_some() {
            return Err(malformed("Content-Length appears twice"));
        }
        length = Some(parse_length(value)?);
    }
    length.ok_or_else(|| malformed("no Content-Length header"))
}

/// Splits `Name: value`, refusing anything that is not a plain header line.
fn header_line(line: &str) -> Result<(&str, &str), TransportError> {
    let bad = || malformed(&format!("bad header line {:?}", quote(line)));
    let (name, value) = line.split_once(':').ok_or_else(bad)?;
    let valid_name = !name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic());
    if !valid_name || value.contains(['\r', '\n']) {
        return Err(bad());
    }
    Ok((name, value.trim_matches([' ', '\t'])))
}

/// Parses a decimal length; signs, spaces inside and overflow are refused.
fn parse_length(value: &str) -> Result<u64, TransportError> {
    let bad = || malformed(&format!("bad Content-Length {:?}", quote(value)));
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    value.parse().map_err(|_| bad())
}

fn quote(text: &str) -> &str {
    match text.char_indices().nth(QUOTE_LIMIT) {
        Some((cut, _)) => &text[..cut],
        None => text,
    }
}

fn headers_too_long() -> TransportError {
    malformed(&format!(
        "no blank line ends the headers within {MAX_HEADER_BYTES} bytes"
    ))
}

fn malformed(reason: &str) -> TransportError {
    TransportError::Malformed(reason.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_chunks(codec: &mut ContentLengthCodec, chunks: &[&[u8]]) -> Vec<Frame> {
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

    fn body(text: &str) -> Frame {
        Frame::Body(Bytes::copy_from_slice(text.as_bytes()))
    }

    fn decode_error(input: &[u8]) -> TransportError {
        let mut codec = ContentLengthCodec::new(1024);
        let mut buf = BytesMut::from(input);
        loop {
            match codec.decode(&mut buf) {
                Ok(Some(_)) => continue,
                Ok(None) => return codec.decode_eof(&mut buf).unwrap_err(),
                Err(err) => return err,
            }
        }
    }

    #[test]
    fn frames_split_across_reads_are_reassembled() {
        let mut codec = ContentLengthCodec::new(1024);
        let frames = decode_chunks(
            &mut codec,
            &[
                b"Content-Le",
                b"ngth: 7\r",
                b"\n\r\n{\"a\"",
                b":1}Content-Length: 2\r\n\r\n[]",
            ],
        );
        assert_eq!(frames, vec![body("{\"a\":1}"), body("[]")]);
    }

    #[test]
    fn header_names_are_case_insensitive_and_other_headers_ignored() {
        let mut codec = ContentLengthCodec::new(1024);
        let input = b"content-type: application/vscode-jsonrpc; charset=utf-8\r\n\
                      CONTENT-LENGTH:2\r\nX-Extra: 1\r\n\r\n{}";
        assert_eq!(decode_chunks(&mut codec, &[input]), vec![body("{}")]);
    }

    #[test]
    fn an_empty_body_is_a_frame() {
        let mut codec = ContentLengthCodec::new(1024);
        let frames = decode_chunks(&mut codec, &[b"Content-Length: 0\r\n\r\n"]);
        assert_eq!(frames, vec![body("")]);
    }

    #[test]
    fn oversized_frame_is_refused_without_buffering() {
        let mut codec = ContentLengthCodec::new(8);
        let mut buf = BytesMut::from(&b"Content-Length: 1000000\r\n\r\n0123456789"[..]);
        assert_eq!(
            codec.decode(&mut buf).unwrap(),
            Some(Frame::TooLarge { length: 1_000_000 })
        );
        assert_eq!(codec.decode(&mut buf).unwrap(), None);
        assert!(buf.is_empty(), "oversized content must not be kept");
        assert!(buf.capacity() < 1_000_000, "no room reserved for the body");
        buf.extend_from_slice(&vec![b'x'; 999_990]);
        buf.extend_from_slice(b"Content-Length: 2\r\n\r\nok");
        assert_eq!(codec.decode(&mut buf).unwrap(), Some(body("ok")));
    }

    #[test]
    fn missing_content_length_is_malformed() {
        let err = decode_error(b"Content-Type: application/json\r\n\r\n{}");
        assert!(matches!(&err, TransportError::Malformed(m) if m.contains("no Content-Length")));
    }

    #[test]
    fn bad_length_values_are_malformed() {
        for value in ["", "-1", "+2", "1 2", "abc", "99999999999999999999999"] {
            let input = format!("Content-Length: {value}\r\n\r\n{{}}");
            let err = decode_error(input.as_bytes());
            assert!(
                matches!(&err, TransportError::Malformed(m) if m.contains("bad Content-Length")),
                "{value:?}: {err}"
            );
        }
    }

    #[test]
    fn a_header_line_without_colon_is_malformed() {
        let err = decode_error(b"Content-Length 2\r\n\r\n{}");
        assert!(matches!(&err, TransportError::Malformed(m) if m.contains("bad header line")));
    }

    #[test]
    fn repeated_content_length_is_malformed() {
        let err = decode_error(b"Content-Length: 2\r\ncontent-length: 2\r\n\r\n{}");
        assert!(matches!(&err, TransportError::Malformed(m) if m.contains("twice")));
    }

    #[test]
    fn bare_lf_line_endings_fail_at_once() {
        let err = decode_error(b"Content-Length: 2\n\n{}");
        assert!(matches!(&err, TransportError::Malformed(m) if m.contains("bare LF")));
    }

    #[test]
    fn newline_delimited_json_is_named() {
        let err = decode_error(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n");
        assert!(matches!(&err, TransportError::Malformed(m) if m.contains("newline-delimited")));
    }

    #[test]
    fn endless_headers_are_refused() {
        let mut input = b"X-Filler: ".to_vec();
        input.extend(std::iter::repeat_n(b'a', MAX_HEADER_BYTES));
        let err = decode_error(&input);
        assert!(matches!(&err, TransportError::Malformed(m) if m.contains("no blank line")));
    }

    // Found by the content_length_framer fuzz target: a header block over
    // the limit was accepted when it arrived in one read and refused when
    // it arrived in pieces.
    #[test]
    fn the_header_limit_holds_for_a_block_read_at_once() {
        let mut input = b"X-Filler: ".to_vec();
        input.extend(std::iter::repeat_n(b'a', MAX_HEADER_BYTES));
        input.extend_from_slice(b"\r\nContent-Length: 2\r\n\r\n{}");
        let err = decode_error(&input);
        assert!(matches!(&err, TransportError::Malformed(m) if m.contains("no blank line")));
        let mut codec = ContentLengthCodec::new(1024);
        let mut buf = BytesMut::new();
        for chunk in input.chunks(1000) {
            buf.extend_from_slice(chunk);
            match codec.decode(&mut buf) {
                Ok(None) => continue,
                Ok(Some(frame)) => panic!("accepted {frame:?}"),
                Err(err) => {
                    assert!(
                        matches!(&err, TransportError::Malformed(m) if m.contains("no blank line"))
                    );
                    return;
                }
            }
        }
        panic!("an over-long header block was not refused");
    }

    #[test]
    fn a_stream_ending_inside_a_frame_is_closed() {
        let err = decode_error(b"Content-Length: 10\r\n\r\n{\"a\"");
        assert!(matches!(err, TransportError::Closed(_)));
    }

    #[test]
    fn encoder_writes_header_then_body_and_round_trips() {
        let mut codec = ContentLengthCodec::new(16);
        let mut buf = BytesMut::new();
        codec
            .encode(Bytes::from_static(b"{\"id\":1}"), &mut buf)
            .unwrap();
        assert_eq!(&buf[..], b"Content-Length: 8\r\n\r\n{\"id\":1}");
        assert_eq!(codec.decode(&mut buf).unwrap(), Some(body("{\"id\":1}")));
    }

    #[test]
    fn encoder_refuses_an_oversized_body() {
        let mut codec = ContentLengthCodec::new(4);
        let err = codec
            .encode(Bytes::from_static(b"0123456789"), &mut BytesMut::new())
            .unwrap_err();
        assert!(matches!(
            err,
            TransportError::FrameTooLarge { length: 10, max: 4 }
        ));
    }
}
