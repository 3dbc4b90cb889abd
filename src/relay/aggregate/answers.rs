//! Where the answers a leg's relay session writes go: an answer to a
//! routed call straight to the agent, under the agent's id, from the task
//! that wrote it; an answer to the router's own request to the router task
//! waiting for it; everything else to the leg's reader, for the router.
//!
//! An answer never overtakes what the leg sent before it: while a message
//! of the leg is still on its way through the router (a progress
//! notification just before the result, say), answers take the reader's
//! path too, and the router writes them after it.

use bytes::Bytes;
use serde_json::Value;

use super::pending::{Answer, PendingRequests, Taken};
use super::splice;
use crate::jsonrpc::{codes, error_response, RequestId};
use crate::transport::writer::{Backlog, BacklogEntry, Divert, Diverted, FrameWriter};

/// One leg's requests in flight and where their answers go.
pub(super) struct Answers {
    /// The upstream's name, for logs and refusals.
    upstream: String,
    /// The leg's requests not yet answered.
    pub(super) pending: PendingRequests,
    to_agent: FrameWriter,
    /// Messages of the leg queued for its reader or the router, not yet
    /// handled by the router.
    ahead: Backlog,
}

impl Answers {
    /// Answers of the upstream `upstream`, written to the agent through
    /// `to_agent`.
    pub(super) fn new(upstream: String, to_agent: FrameWriter) -> Self {
        Self {
            upstream,
            pending: PendingRequests::default(),
            to_agent,
            ahead: Backlog::default(),
        }
    }

    /// The count of a frame the reader took off the leg's queue; every
    /// frame on that queue was counted when it was written.
    pub(super) fn counted(&self) -> BacklogEntry {
        self.ahead.entry()
    }

    /// Delivers `frame` when it answers a request of the leg's; gives it
    /// back when it is something else.
    pub(super) fn deliver(&self, frame: Bytes) -> Result<Diverted<'_>, Bytes> {
        let Some((id, _)) = splice::peek_reply_id(&frame) else {
            return Err(frame);
        };
        let taken = self.pending.take(id);
        self.hand_over(frame, taken)
    }

    /// Delivers `frame`, the answer to the leg's request `id`, when that
    /// request is one of the leg's; gives it back otherwise.
    fn deliver_answer(&self, frame: Bytes, id: &RequestId) -> Result<Diverted<'_>, Bytes> {
        let taken = self.pending.take(id.as_json());
        self.hand_over(frame, taken)
    }

    fn hand_over(&self, frame: Bytes, taken: Option<Taken>) -> Result<Diverted<'_>, Bytes> {
        let Some(taken) = taken else {
            return Err(frame);
        };
        match taken.answer {
            Answer::Agent if !taken.renumbered => Ok(Diverted::To(&self.to_agent, frame)),
            Answer::Agent => {
                let agent_id = taken.agent_id.as_ref().map_or("null", RequestId::as_json);
                let reply = match splice::peek_reply_id(&frame) {
                    Some((_, id_at)) => splice::splice(&frame, &mut [(id_at, agent_id.as_bytes())]),
                    None => frame,
                };
                Ok(Diverted::To(&self.to_agent, reply))
            }
            Answer::Waiter(waiter) => {
                match serde_json::from_slice::<Value>(&frame) {
                    Ok(message) => {
                        let _ = waiter.send(message);
                    }
                    Err(_) => {
                        tracing::warn!(upstream = %self.upstream, "an upstream's relay sent a frame that is not JSON");
                    }
                }
                Ok(Diverted::Delivered)
            }
        }
    }

    /// Answers the agent's call `agent_id`: this upstream is gone, or
    /// went before answering it.
    pub(super) async fn unavailable(&self, agent_id: &RequestId) {
        let text = format!("the upstream server {:?} is not available", self.upstream);
        let reply = error_response(Some(agent_id), codes::UPSTREAM_UNAVAILABLE, &text, None);
        let _ = self.to_agent.send(reply).await;
    }
}

impl Divert for Answers {
    fn divert(&self, frame: Bytes) -> Result<Diverted<'_>, Bytes> {
        self.ahead.unless_behind(frame, |frame| self.deliver(frame))
    }

    fn divert_answer(&self, frame: Bytes, id: &RequestId) -> Result<Diverted<'_>, Bytes> {
        self.ahead
            .unless_behind(frame, |frame| self.deliver_answer(frame, id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers with the agent's calls `7` (sent as is) and `"a\u0037"`
    /// (renumbered) in flight; the second's id on the leg.
    fn answers() -> (Answers, RequestId) {
        let (to_agent, _receiver) = FrameWriter::channel(4);
        let answers = Answers::new("b".into(), to_agent);
        let pending = &answers.pending;
        assert_eq!(
            pending.insert_agent_request(&RequestId::from_json("7"), Answer::Agent),
            None
        );
        let escaped = RequestId::from_json(r#""a\u0037""#);
        let renumbered = pending.insert_agent_request(&escaped, Answer::Agent);
        (answers, renumbered.expect("an escaped id is renumbered"))
    }

    fn reply(id: &str) -> Bytes {
        Bytes::from(format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"id":1}}}}"#
        ))
    }

    #[test]
    fn an_answer_goes_to_the_agent_under_its_id_when_nothing_is_ahead() {
        let (answers, renumbered) = answers();
        match answers.divert(reply("7")) {
            Ok(Diverted::To(_, frame)) => assert_eq!(frame, reply("7")),
            _ => panic!("the answer was not diverted"),
        }
        match answers.divert(reply(renumbered.as_json())) {
            Ok(Diverted::To(_, frame)) => assert_eq!(frame, reply(r#""a\u0037""#)),
            _ => panic!("the answer was not diverted"),
        }
        assert!(answers.pending.take("7").is_none());
    }

    #[test]
    fn an_answer_waits_behind_a_message_on_its_way_through_the_router() {
        let (answers, _) = answers();
        let progress =
            Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/progress"}"#);
        assert!(answers.divert(progress).is_err());
        let held = answers.divert(reply("7"));
        assert_eq!(held.err(), Some(reply("7")));
        // The reader takes both off the queue; once the router has handled
        // them, answers go straight to the agent again.
        let (first, second) = (answers.counted(), answers.counted());
        drop((first, second));
        assert!(answers.ahead.is_clear());
        assert!(matches!(answers.divert(reply("7")), Ok(Diverted::To(..))));
    }

    #[test]
    fn an_answer_the_relay_knows_the_id_of_is_routed_by_it() {
        let (answers, renumbered) = answers();
        let id = RequestId::from_json;
        match answers.divert_answer(reply("7"), &id("7")) {
            Ok(Diverted::To(_, frame)) => assert_eq!(frame, reply("7")),
            _ => panic!("the answer was not diverted"),
        }
        match answers.divert_answer(reply(renumbered.as_json()), &renumbered) {
            Ok(Diverted::To(_, frame)) => assert_eq!(frame, reply(r#""a\u0037""#)),
            _ => panic!("the answer was not diverted"),
        }
        // An answer to nothing of the leg's goes on to the leg's reader.
        assert_eq!(
            answers.divert_answer(reply("9"), &id("9")).err(),
            Some(reply("9"))
        );
    }
}
