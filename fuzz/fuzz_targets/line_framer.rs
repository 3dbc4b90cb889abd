//! The MCP stdio line framer: whatever the read sizes, it yields the frames
//! a plain split of the whole stream gives (one trailing CR dropped from
//! every line, the last included), never a line over the limit or with its
//! LF, and never holds more than the limit while waiting for the end of a
//! line.
#![no_main]

use acs_proxy::transport::{LineCodec, LineFrame};
use acs_proxy_fuzz::Chunked;
use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use tokio_util::codec::Decoder;

fuzz_target!(|data: &[u8]| {
    let input = Chunked::new(data);
    // Small limits so oversized lines are common.
    let max = data.first().map_or(8, |b| usize::from(b % 48) + 1);
    let mut codec = LineCodec::new(max);
    let mut buf = BytesMut::new();
    let mut frames = Vec::new();
    for read in input.reads() {
        buf.extend_from_slice(read);
        while let Some(frame) = codec.decode(&mut buf).expect("line decoding cannot fail") {
            frames.push(frame);
        }
        assert!(
            buf.len() <= max,
            "{} bytes buffered over a {max}-byte limit",
            buf.len()
        );
    }
    while let Some(frame) = codec
        .decode_eof(&mut buf)
        .expect("line decoding cannot fail")
    {
        frames.push(frame);
    }
    for frame in &frames {
        if let LineFrame::Line(line) = frame {
            assert!(line.len() <= max);
            assert!(!line.contains(&b'\n'));
            assert!(!line.iter().all(u8::is_ascii_whitespace));
        }
    }
    assert_eq!(frames, reference(input.stream, max));
});

/// The frames of the whole stream at once: lines split on LF, oversized
/// ones reported, CR dropped, blank ones skipped.
fn reference(stream: &[u8], max: usize) -> Vec<LineFrame> {
    let mut segments: Vec<&[u8]> = stream.split(|b| *b == b'\n').collect();
    // After a final LF, split leaves an empty last segment: nothing there.
    if segments.last().is_some_and(|last| last.is_empty()) {
        segments.pop();
    }
    segments
        .into_iter()
        .filter_map(|segment| {
            if segment.len() > max {
                return Some(LineFrame::TooLong);
            }
            let line = segment.strip_suffix(b"\r").unwrap_or(segment);
            if line.iter().all(u8::is_ascii_whitespace) {
                return None;
            }
            Some(LineFrame::Line(Bytes::copy_from_slice(line)))
        })
        .collect()
}
