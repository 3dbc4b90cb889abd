//! The HMAC state the signed input is streamed into.
//!
//! Canonical JSON is written in many tiny pieces (quotes, colons, commas);
//! a small stack buffer in front of the MAC keeps its per-call bookkeeping
//! off every piece, as [`HashSink`](crate::jcs::HashSink) does for SHA-256.

use hmac::Mac;

use super::session_key::HmacSha256;
use super::SessionKey;
use crate::jcs::Sink;

/// Bytes gathered before they are fed to the MAC.
const BUFFER_BYTES: usize = 256;

/// An HMAC-SHA256 under one session key, fed canonical bytes.
pub struct MacSink {
    mac: HmacSha256,
    buffer: [u8; BUFFER_BYTES],
    filled: usize,
}

impl MacSink {
    /// A MAC keyed with `key`, with nothing fed yet.
    pub fn new(key: &SessionKey) -> Self {
        Self {
            mac: key.mac(),
            buffer: [0; BUFFER_BYTES],
            filled: 0,
        }
    }

    /// The tag over everything put so far.
    pub fn finalize(mut self) -> [u8; 32] {
        self.flush();
        self.mac.finalize().into_bytes().into()
    }

    /// Whether `tag` is the MAC of everything put so far, compared in
    /// constant time.
    pub fn verify(mut self, tag: &[u8]) -> bool {
        self.flush();
        self.mac.verify_slice(tag).is_ok()
    }

    fn flush(&mut self) {
        self.mac.update(&self.buffer[..self.filled]);
        self.filled = 0;
    }
}

impl Sink for MacSink {
    fn put(&mut self, bytes: &[u8]) {
        if self.filled + bytes.len() <= BUFFER_BYTES {
            self.buffer[self.filled..self.filled + bytes.len()].copy_from_slice(bytes);
            self.filled += bytes.len();
            return;
        }
        self.flush();
        if bytes.len() >= BUFFER_BYTES {
            self.mac.update(bytes);
        } else {
            self.buffer[..bytes.len()].copy_from_slice(bytes);
            self.filled = bytes.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guardian::remote::signing::SigningSecret;

    #[test]
    fn pieces_of_any_size_give_the_one_shot_tag() {
        let secret = SigningSecret::from_bytes([9u8; 32]).unwrap();
        let key = SessionKey::derive(&secret, "s");
        let input: Vec<u8> = (0..2000u32).map(|i| (i % 251) as u8).collect();
        let whole = key.mac().chain_update(&input).finalize().into_bytes();
        for piece in [1, 7, 255, 256, 257, 1000] {
            let mut sink = MacSink::new(&key);
            for chunk in input.chunks(piece) {
                sink.put(chunk);
            }
            assert_eq!(sink.finalize()[..], whole[..], "pieces of {piece}");
        }
        let mut sink = MacSink::new(&key);
        sink.put(&input);
        assert!(sink.verify(&whole));
    }
}
