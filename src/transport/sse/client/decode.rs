//! A server-sent events decoder for the client side of MCP's HTTP
//! transports, with a hard size limit.
//!
//! It follows the WHATWG event-stream grammar (lines end in CRLF, LF or CR;
//! `:` starts a comment; one space after the colon is dropped; a blank line
//! ends a block) and hands each block over with the bytes of its `data`
//! exactly as sent, joined with `\n` when the block has several `data`
//! lines, which is what the grammar makes of them. Nothing is decoded to a
//! string on the way, so a message is forwarded byte for byte.
//!
//! An event whose data would pass the limit is reported as
//! [`SseEvent::oversized`] with its data dropped as it arrives: a hostile
//! server cannot make the proxy buffer more than the limit (plus one line's
//! worth of field name), and the stream goes on with the next event.
//!
//! Unlike a browser's `EventSource`, the decoder carries nothing from one
//! block to the next: the caller keeps the last event id and retry delay.

use bytes::{Bytes, BytesMut};

/// Bytes of field name and separator allowed on a line besides the limit.
const LINE_SLACK: usize = 64;

/// One event block.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event` field (the type); `None` means the default, `message`.
    pub event: Option<String>,
    /// The `data` lines joined with `\n`; `None` when the block had none.
    pub data: Option<Bytes>,
    /// The `id` field, when the block set one (possibly empty, which resets
    /// the last event id).
    pub id: Option<String>,
    /// The `retry` field, in milliseconds.
    pub retry: Option<u64>,
    /// The data passed the size limit and was dropped.
    pub oversized: bool,
}

impl SseEvent {
    /// Whether this is a `message` event (no type, or `message`).
    pub fn is_message(&self) -> bool {
        matches!(self.event.as_deref(), None | Some("message"))
    }

    /// The data when there is some: an empty `data` (a priming event) is
    /// not a message.
    pub fn payload(&self) -> Option<&Bytes> {
        self.data.as_ref().filter(|data| !data.is_empty())
    }
}

/// Incremental decoder: feed it chunks as they arrive.
#[derive(Debug)]
pub struct SseDecoder {
    max_data: usize,
    /// The line being read.
    line: BytesMut,
    /// The line passed the limit: its remaining bytes are skipped.
    line_overflow: bool,
    /// The previous chunk ended with CR: a leading LF belongs to it.
    after_cr: bool,
    /// The stream's first bytes were checked for a byte order mark.
    started: bool,
    block: Block,
}

#[derive(Debug, Default)]
struct Block {
    /// Any field was seen, so a blank line dispatches the block.
    any: bool,
    event: Option<String>,
    data: Option<BytesMut>,
    id: Option<String>,
    retry: Option<u64>,
    oversized: bool,
}

impl SseDecoder {
    /// A decoder refusing event data longer than `max_data` bytes.
    pub fn new(max_data: usize) -> Self {
        Self {
            max_data,
            line: BytesMut::new(),
            line_overflow: false,
            after_cr: false,
            started: false,
            block: Block::default(),
        }
    }

    /// Decodes one chunk, appending every block it completes to `out`.
    pub fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<SseEvent>) {
        if !self.started {
            let bom = b"\xEF\xBB\xBF";
            let have = self.line.len() + chunk.len();
            if have < bom.len() && bom.starts_with(&[&self.line[..], chunk].concat()) {
                self.line.extend_from_slice(chunk);
                return;
            }
            self.started = true;
            let mut head = std::mem::take(&mut self.line);
            head.extend_from_slice(chunk);
            let head = head.freeze();
            let rest = head.strip_prefix(bom).unwrap_or(&head);
            self.feed(rest, out);
            return;
        }
        if self.after_cr {
            self.after_cr = false;
            if let Some(rest) = chunk.strip_prefix(b"\n") {
                chunk = rest;
            }
        }
        while let Some(end) = chunk.iter().position(|b| *b == b'\n' || *b == b'\r') {
            self.push_line_bytes(&chunk[..end]);
            self.end_line(out);
            let cr = chunk[end] == b'\r';
            chunk = &chunk[end + 1..];
            if cr {
                match chunk.first() {
                    Some(b'\n') => chunk = &chunk[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        self.push_line_bytes(chunk);
    }

    fn push_line_bytes(&mut self, bytes: &[u8]) {
        if self.line_overflow || bytes.is_empty() {
            return;
        }
        if self.line.len() + bytes.len() > self.max_data.saturating_add(LINE_SLACK) {
            // Enough of the line to read its field name, not all of it.
            let mut probe = self.line.split();
            probe.extend_from_slice(&bytes[..bytes.len().min(LINE_SLACK)]);
            if field_name(&probe) == b"data" {
                self.block.any = true;
                self.block.oversized = true;
                self.block.data = None;
            }
            self.line = BytesMut::new();
            self.line_overflow = true;
            return;
        }
        self.line.extend_from_slice(bytes);
    }

    fn end_line(&mut self, out: &mut Vec<SseEvent>) {
        if std::mem::take(&mut self.line_overflow) {
            return;
        }
        let line = self.line.split().freeze();
        if line.is_empty() {
            let block = std::mem::take(&mut self.block);
            if block.any {
                out.push(SseEvent {
                    event: block.event,
                    data: block.data.map(BytesMut::freeze),
                    id: block.id,
                    retry: block.retry,
                    oversized: block.oversized,
                });
            }
            return;
        }
        if line[0] == b':' {
            return;
        }
        let name = field_name(&line);
        let mut value = line.slice(name.len()..);
        if value.first() == Some(&b':') {
            value = value.slice(1..);
            if value.first() == Some(&b' ') {
                value = value.slice(1..);
            }
        }
        self.field(name, value);
    }

    fn field(&mut self, name: &[u8], value: Bytes) {
        let block = &mut self.block;
        match name {
            b"data" => {
                block.any = true;
                if block.oversized {
                    return;
                }
                // Every data line after the first adds a `\n` before it.
                let separator = usize::from(block.data.is_some());
                let current = block.data.as_ref().map_or(0, BytesMut::len);
                if current + separator + value.len() > self.max_data {
                    block.oversized = true;
                    block.data = None;
                    return;
                }
                let data = block.data.get_or_insert_with(BytesMut::new);
                if separator == 1 {
                    data.extend_from_slice(b"\n");
                }
                data.extend_from_slice(&value);
            }
            b"event" => {
                block.any = true;
                block.event = Some(String::from_utf8_lossy(&value).into_owned());
            }
            // An id containing NUL is ignored, as browsers do.
            b"id" if !value.contains(&0) => {
                block.any = true;
                block.id = Some(String::from_utf8_lossy(&value).into_owned());
            }
            b"retry" => {
                let digits = !value.is_empty() && value.iter().all(u8::is_ascii_digit);
                if let Some(ms) = digits
                    .then(|| std::str::from_utf8(&value).ok()?.parse().ok())
                    .flatten()
                {
                    block.any = true;
                    block.retry = Some(ms);
                }
            }
            _ => {}
        }
    }
}

/// The field name: the line up to its first colon (all of it without one).
fn field_name(line: &[u8]) -> &[u8] {
    let end = line.iter().position(|b| *b == b':').unwrap_or(line.len());
    &line[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(chunks: &[&[u8]], max: usize) -> Vec<SseEvent> {
        let mut decoder = SseDecoder::new(max);
        let mut out = Vec::new();
        for chunk in chunks {
            decoder.feed(chunk, &mut out);
        }
        out
    }

    fn data(event: &SseEvent) -> &[u8] {
        event.data.as_deref().unwrap_or_default()
    }

    #[test]
    fn data_bytes_are_kept_exactly() {
        let body = b"id: 7\nevent: message\ndata: {\"a\":  1.0E+2, \"s\":\"\\u00e9\"}\n\n";
        let events = decode(&[body], 1024);
        assert_eq!(events.len(), 1);
        assert_eq!(data(&events[0]), br#"{"a":  1.0E+2, "s":"\u00e9"}"#);
        assert_eq!(events[0].id.as_deref(), Some("7"));
        assert!(events[0].is_message());
    }

    #[test]
    fn every_line_ending_and_any_split_point_decode_the_same() {
        let body: &[u8] = b"\xEF\xBB\xBF: comment\r\nretry: 250\rid:x\r\ndata:one\ndata: two\r\n\r\ndata: three\n\n";
        for split in 0..=body.len() {
            let events = decode(&[&body[..split], &body[split..]], 1024);
            assert_eq!(events.len(), 2, "split at {split}");
            assert_eq!(data(&events[0]), b"one\ntwo", "split at {split}");
            assert_eq!(events[0].retry, Some(250));
            assert_eq!(events[0].id.as_deref(), Some("x"));
            assert_eq!(data(&events[1]), b"three");
            assert_eq!(events[1].id, None);
        }
        let bytewise: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(decode(&bytewise, 1024).len(), 2);
    }

    #[test]
    fn a_priming_event_has_an_id_and_no_payload() {
        let events = decode(&[b"id: p1\nretry: 10\ndata:\n\n"], 64);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].id.as_deref(), Some("p1"));
        assert_eq!(events[0].payload(), None);
        let events = decode(&[b"id: p2\n\n"], 64);
        assert_eq!(events[0].data, None);
    }

    #[test]
    fn empty_data_lines_keep_their_separators() {
        let events = decode(&[b"data\ndata\ndata: x\n\n"], 64);
        assert_eq!(data(&events[0]), b"\n\nx");
    }

    #[test]
    fn oversized_data_is_dropped_and_the_stream_goes_on() {
        let big = format!("data: {}\n\ndata: ok\n\n", "x".repeat(500));
        let events = decode(&[big.as_bytes()], 100);
        assert_eq!(events.len(), 2);
        assert!(events[0].oversized);
        assert_eq!(events[0].data, None);
        assert_eq!(data(&events[1]), b"ok");
        // Several lines adding up past the limit.
        let lines = "data: 0123456789\n".repeat(20) + "\ndata: next\n\n";
        let events = decode(&[lines.as_bytes()], 100);
        assert!(events[0].oversized);
        assert_eq!(data(&events[1]), b"next");
        // A long line split over many chunks is never buffered whole.
        let mut decoder = SseDecoder::new(100);
        let mut out = Vec::new();
        decoder.feed(b"data: ", &mut out);
        for _ in 0..1000 {
            decoder.feed(&[b'y'; 1000], &mut out);
            assert!(decoder.line.len() <= 100 + LINE_SLACK + 1000);
        }
        decoder.feed(b"\n\n", &mut out);
        assert_eq!(out.len(), 1);
        assert!(out[0].oversized);
    }

    #[test]
    fn odd_fields_are_ignored() {
        let events = decode(
            &[b"retry: 1x\nid: a\0b\nfoo: bar\nevent:endpoint\ndata: /m\n\n"],
            64,
        );
        assert_eq!(events[0].retry, None);
        assert_eq!(events[0].id, None);
        assert_eq!(events[0].event.as_deref(), Some("endpoint"));
        assert!(!events[0].is_message());
        assert_eq!(data(&events[0]), b"/m");
    }

    #[test]
    fn an_unfinished_block_is_not_dispatched() {
        assert!(decode(&[b"data: half"], 64).is_empty());
        assert!(decode(&[b"data: half\n"], 64).is_empty());
    }
}
