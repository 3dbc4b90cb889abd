//! The event streams of a Streamable HTTP session: reading one, resuming a
//! response stream that dropped before its response (GET with
//! `Last-Event-ID`, after the server's `retry`), and the standalone GET
//! stream, reopened whenever it drops.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::HeaderValue;
use reqwest::{Response, StatusCode};

use super::net::describe_reqwest;
use super::pending::Pending;
use super::{
    is_event_stream, Client, Mode, StreamEnd, DEFAULT_RETRY, EVENT_STREAM, LAST_EVENT_ID,
    MAX_BACKOFF, MAX_LISTEN_FAILURES, MAX_RESUME_ATTEMPTS, MIN_RETRY,
};
use crate::transport::sse::client::decode::SseDecoder;

/// The event-stream position: last event id and the server's retry delay.
#[derive(Debug, Default)]
struct Cursor {
    last_id: Option<String>,
    retry: Option<Duration>,
    /// Any event arrived since the last (re)connection.
    progressed: bool,
}

impl Cursor {
    /// The wait before reconnecting after `failures` failures in a row.
    fn delay(&self, failures: u32) -> Duration {
        let backoff = DEFAULT_RETRY
            .saturating_mul(1 << failures.min(5))
            .min(MAX_BACKOFF);
        match self.retry {
            Some(retry) if failures == 0 => retry.max(MIN_RETRY),
            Some(retry) => retry.max(backoff),
            None => backoff,
        }
    }
}

impl Client {
    /// Reads a response stream, resuming it by GET + `Last-Event-ID` while
    /// requests wait for their responses.
    pub(super) async fn follow(
        &self,
        response: Response,
        pending: &mut Pending,
        mode: Mode,
    ) -> StreamEnd {
        let mut cursor = Cursor::default();
        let mut response = response;
        let mut attempts = 0;
        loop {
            let reason = match self.read_events(response, &mut cursor, pending).await {
                StreamEnd::Dropped(reason) => reason,
                end => return end,
            };
            if pending.is_empty() {
                return StreamEnd::Answered;
            }
            let resumable = matches!(mode, Mode::Session { .. }) && !pending.oversized;
            let Some(last_id) = cursor.last_id.clone().filter(|_| resumable) else {
                return StreamEnd::Dropped(format!(
                    "the upstream's response stream ended before the response ({reason})"
                ));
            };
            if cursor.progressed {
                attempts = 0;
            }
            response = loop {
                if attempts >= MAX_RESUME_ATTEMPTS {
                    return StreamEnd::Dropped(format!(
                        "the upstream's response stream could not be resumed after {attempts} attempts"
                    ));
                }
                tokio::time::sleep(cursor.delay(attempts)).await;
                attempts += 1;
                match self.get(Some(&last_id)).await {
                    Ok(response) if is_event_stream(&response) => break response,
                    Ok(response) if self.session_gone(&response) => {
                        self.expire();
                        return StreamEnd::Closed;
                    }
                    Ok(response) if response.status() == StatusCode::METHOD_NOT_ALLOWED => {
                        return StreamEnd::Dropped(
                            "the upstream's response stream ended before the response and the server does not resume streams (HTTP 405)".into(),
                        );
                    }
                    Ok(response) => tracing::debug!(
                        route = %self.route.target.route,
                        status = %response.status(),
                        "resuming a response stream failed"
                    ),
                    Err(err) => tracing::debug!(
                        route = %self.route.target.route,
                        error = %describe_reqwest(err),
                        "resuming a response stream failed"
                    ),
                }
            };
            cursor.progressed = false;
        }
    }

    /// The standalone GET stream, reopened when it drops, until the server
    /// says it has none (405) or keeps failing.
    async fn listen(self: Arc<Self>) {
        let mut cursor = Cursor::default();
        let mut failures = 0;
        loop {
            match self.get(cursor.last_id.as_deref()).await {
                Ok(response) if is_event_stream(&response) => {
                    failures = 0;
                    cursor.progressed = false;
                    let mut none = Pending::default();
                    match self.read_events(response, &mut cursor, &mut none).await {
                        StreamEnd::Closed => return,
                        end => {
                            tracing::debug!(route = %self.route.target.route, ?end, "the standalone stream ended; reopening it")
                        }
                    }
                }
                Ok(response) if response.status() == StatusCode::METHOD_NOT_ALLOWED => {
                    tracing::debug!(route = %self.route.target.route, "the upstream offers no standalone stream");
                    return;
                }
                Ok(response) if self.session_gone(&response) => {
                    self.expire();
                    return;
                }
                Ok(response) => {
                    failures += 1;
                    tracing::warn!(route = %self.route.target.route, status = %response.status(), "opening the standalone stream failed");
                }
                Err(err) => {
                    failures += 1;
                    tracing::warn!(route = %self.route.target.route, error = %describe_reqwest(err), "opening the standalone stream failed");
                }
            }
            if failures >= MAX_LISTEN_FAILURES {
                tracing::warn!(route = %self.route.target.route, "giving up the standalone stream; server-initiated messages arrive only with responses");
                return;
            }
            tokio::time::sleep(cursor.delay(failures)).await;
        }
    }

    pub(super) fn start_listening(self: &Arc<Self>) {
        {
            let mut state = self.lock();
            if state.listening {
                return;
            }
            state.listening = true;
        }
        self.link.spawn(self.clone().listen());
    }

    /// A GET for an event stream: the standalone one, or a resumption.
    async fn get(&self, last_event_id: Option<&str>) -> Result<Response, reqwest::Error> {
        let mut headers = self.session_headers(Some(EVENT_STREAM));
        if let Some(id) = last_event_id.and_then(|id| HeaderValue::from_str(id).ok()) {
            headers.insert(LAST_EVENT_ID, id);
        }
        let get = self.route.http.get(self.route.target.url.clone());
        self.route.send(get.headers(headers)).await
    }

    /// Reads one event stream, handing over each message, until it ends or
    /// every request in `pending` is answered.
    async fn read_events(
        &self,
        mut response: Response,
        cursor: &mut Cursor,
        pending: &mut Pending,
    ) -> StreamEnd {
        let waiting = !pending.is_empty();
        let mut decoder = SseDecoder::new(self.max_message_bytes);
        let mut events = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => decoder.feed(&chunk, &mut events),
                Ok(None) => return StreamEnd::Dropped("the stream ended".into()),
                Err(err) => return StreamEnd::Dropped(describe_reqwest(err)),
            }
            for event in events.drain(..) {
                cursor.progressed = true;
                if let Some(id) = event.id.as_ref() {
                    cursor.last_id = Some(id.clone()).filter(|id| !id.is_empty());
                }
                if let Some(retry) = event.retry {
                    cursor.retry = Some(Duration::from_millis(retry));
                }
                if !event.is_message() {
                    tracing::debug!(route = %self.route.target.route, event = ?event.event, "ignored an event that is not a message");
                    continue;
                }
                if event.oversized {
                    pending.oversized = true;
                    if !self.link.emit_too_long().await {
                        return StreamEnd::Closed;
                    }
                    continue;
                }
                let Some(data) = event.payload() else {
                    continue;
                };
                if !self.deliver(data.clone(), pending).await {
                    return StreamEnd::Closed;
                }
                if waiting && pending.is_empty() {
                    return StreamEnd::Answered;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconnection_waits_for_the_server_retry_then_backs_off() {
        let mut cursor = Cursor::default();
        assert_eq!(cursor.delay(0), DEFAULT_RETRY);
        assert_eq!(cursor.delay(1), DEFAULT_RETRY * 2);
        assert_eq!(cursor.delay(30), MAX_BACKOFF);
        cursor.retry = Some(Duration::from_millis(3_000));
        assert_eq!(cursor.delay(0), Duration::from_millis(3_000));
        assert_eq!(cursor.delay(2), Duration::from_millis(3_000));
        cursor.retry = Some(Duration::ZERO);
        assert_eq!(cursor.delay(0), MIN_RETRY);
    }
}
