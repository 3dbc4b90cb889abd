//! The remote Guardian's `Content-Length` framer: the same stream gives the
//! same frames (and the same verdict) whatever the read sizes, a body never
//! passes the limit, and what the encoder writes decodes back to the body.
#![no_main]

use acs_proxy::guardian::remote::transport::framing::{ContentLengthCodec, Frame};
use acs_proxy_fuzz::Chunked;
use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use tokio_util::codec::{Decoder, Encoder};

/// Frames until the end of the stream, and whether it ended cleanly.
type Outcome = (Vec<Frame>, bool);

fuzz_target!(|data: &[u8]| {
    let input = Chunked::new(data);
    let max = data.first().map_or(16, |b| usize::from(b % 64));
    let whole = decode(&[input.stream], max);
    let split = decode(&input.reads(), max);
    assert_eq!(whole, split, "the read sizes changed the frames");
    for frame in &whole.0 {
        if let Frame::Body(body) = frame {
            assert!(body.len() <= max);
        }
    }
    round_trip(input.stream, max);
});

fn decode(reads: &[&[u8]], max: usize) -> Outcome {
    let mut codec = ContentLengthCodec::new(max);
    let mut buf = BytesMut::new();
    let mut frames = Vec::new();
    for read in reads {
        buf.extend_from_slice(read);
        loop {
            match codec.decode(&mut buf) {
                Ok(Some(frame)) => frames.push(frame),
                Ok(None) => break,
                Err(_) => return (frames, false),
            }
        }
    }
    loop {
        match codec.decode_eof(&mut buf) {
            Ok(Some(frame)) => frames.push(frame),
            Ok(None) => return (frames, true),
            Err(_) => return (frames, false),
        }
    }
}

fn round_trip(body: &[u8], max: usize) {
    let mut codec = ContentLengthCodec::new(max);
    let mut buf = BytesMut::new();
    let body = Bytes::copy_from_slice(body);
    if codec.encode(body.clone(), &mut buf).is_err() {
        assert!(body.len() > max);
        return;
    }
    assert_eq!(
        codec.decode(&mut buf).ok().flatten(),
        Some(Frame::Body(body))
    );
    assert!(buf.is_empty());
}
