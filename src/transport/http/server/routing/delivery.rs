//! Handing events out: appending to a stream's log (bounded, for
//! resumption), to the connection attached to it, and finishing a POST
//! stream once all its requests are settled.

use bytes::Bytes;

use super::messages::join_parts;
use super::{Dispatch, Event, Routes, STANDALONE};
use crate::jsonrpc::RequestId;

impl Routes {
    /// Messages not tied to a request: the GET stream, else the newest open
    /// POST stream, else kept on the GET stream.
    pub(super) fn route_unrelated(&mut self, frame: Bytes, out: &mut Vec<Dispatch>) {
        let standalone_live = self
            .streams
            .get(&STANDALONE)
            .is_some_and(|s| s.live.is_some());
        let target = if standalone_live {
            STANDALONE
        } else {
            self.streams
                .iter()
                .rev()
                .find(|(_, log)| log.is_open_post_stream())
                .map_or(STANDALONE, |(id, _)| *id)
        };
        out.extend(self.deliver(target, frame));
    }

    pub(super) fn deliver_responses(
        &mut self,
        stream: u64,
        frame: Bytes,
        ids: &[RequestId],
        out: &mut Vec<Dispatch>,
    ) {
        let Some(log) = self.streams.get_mut(&stream) else {
            return;
        };
        match log.post.as_mut().and_then(|p| p.json.as_mut()) {
            Some(reply) => reply.parts.push(frame),
            None => out.extend(self.deliver(stream, frame)),
        }
        let Some(post) = self.streams.get_mut(&stream).and_then(|l| l.post.as_mut()) else {
            return;
        };
        for id in ids {
            post.pending.remove(id);
        }
        if post.pending.is_empty() {
            out.extend(self.finish(stream));
        }
    }

    /// Appends an event to `stream`'s log; a dispatch when a connection is live.
    pub(super) fn deliver(&mut self, stream: u64, data: Bytes) -> Option<Dispatch> {
        let limits = self.limits;
        let log = self.streams.get_mut(&stream)?;
        if log.finished {
            return None;
        }
        log.last_seq += 1;
        let event = Event {
            stream,
            seq: log.last_seq,
            data,
        };
        log.replay_bytes += event.data.len();
        log.replay.push_back(event.clone());
        while log.replay.len() > 1
            && (log.replay.len() > limits.events || log.replay_bytes > limits.bytes)
        {
            if let Some(old) = log.replay.pop_front() {
                log.replay_bytes -= old.data.len();
                if old.seq > log.sent_upto {
                    tracing::warn!(
                        stream,
                        seq = old.seq,
                        "an undelivered event was dropped: the stream's buffer is full"
                    );
                }
            }
        }
        let live = log.live.as_ref()?;
        log.sent_upto = event.seq;
        Some(Dispatch::Live {
            tx: live.tx.clone(),
            kick: live.kick.clone(),
            event,
        })
    }

    /// Every request of a POST stream is settled: no more events on it.
    pub(super) fn finish(&mut self, stream: u64) -> Option<Dispatch> {
        let log = self.streams.get_mut(&stream)?;
        if log.finished {
            return None;
        }
        log.finished = true;
        log.live = None;
        let post = log.post.as_mut()?;
        for token in post.tokens.drain(..) {
            if self.by_token.get(&token) == Some(&stream) {
                self.by_token.remove(&token);
            }
        }
        let json = post.json.take();
        self.finished.push_back(stream);
        while self.finished.len() > self.limits.finished_streams {
            if let Some(old) = self.finished.pop_front() {
                self.streams.remove(&old);
            }
        }
        let reply = json?;
        let body = join_parts(reply.parts, reply.batch)?;
        Some(Dispatch::Json { tx: reply.tx, body })
    }
}
