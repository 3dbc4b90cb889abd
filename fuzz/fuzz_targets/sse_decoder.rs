//! The client-side SSE decoder (Streamable HTTP and legacy SSE upstreams):
//! the same events whatever the read sizes, and no event's data over the
//! limit; an oversized event carries no data.
#![no_main]

use acs_proxy::transport::sse::client::decode::{SseDecoder, SseEvent};
use acs_proxy_fuzz::Chunked;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let input = Chunked::new(data);
    let max = data.first().map_or(16, |b| usize::from(b % 96));
    let whole = decode(&[input.stream], max);
    let split = decode(&input.reads(), max);
    assert_eq!(whole, split, "the read sizes changed the events");
    let bytewise: Vec<&[u8]> = input.stream.chunks(1).collect();
    assert_eq!(
        whole,
        decode(&bytewise, max),
        "byte-by-byte reads changed the events"
    );
    for event in &whole {
        if let Some(data) = &event.data {
            assert!(
                data.len() <= max,
                "{} data bytes over a {max}-byte limit",
                data.len()
            );
        }
        if event.oversized {
            assert!(event.data.is_none());
        }
    }
});

fn decode(reads: &[&[u8]], max: usize) -> Vec<SseEvent> {
    let mut decoder = SseDecoder::new(max);
    let mut events = Vec::new();
    for read in reads {
        decoder.feed(read, &mut events);
    }
    events
}
