//! The Guardian: one request body in, one [`Outcome`] out, transport-agnostic.
//!
//! Order of processing for one body:
//! 1. not JSON → -32700; a JSON array → -32600 (no batching); no usable
//!    envelope → -32600/-32602. All unsigned (the sender is unknown).
//!    With the script's `batch`, a non-empty array is a batch instead: each
//!    element goes through steps 1–7 on its own, in order, and the replies
//!    go back as one array (see [`Guardian::handle_at`]).
//! 2. `system/ping` → `allow` with `payload {status, echo, server_timestamp}`,
//!    never chained, never rejected (a script rule naming exactly
//!    `system/ping` may override).
//! 3. signature check with the key of `metadata.session_id` → -32004, unsigned.
//! 4. timestamp within `skew_window_ms` → -32006, signed; unparseable → -32602.
//! 5. `request_id` / `nonce` not seen before in the session → -32005, signed.
//! 6. `handshake/hello` → ServerHello (not chained).
//! 7. everything else: append the ContextEntry, then the script decides.
//!
//! Checks 3–5 can be switched off by the script.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{json, Value};
use time::OffsetDateTime;

use crate::decide::{self, Context};
use crate::record::{Entry, Recorder};
use crate::reply::{error_data, error_envelope, Outcome, Plan, Reply, Signer};
use crate::request::Request;
use crate::script::{self, Action, RuleBook, Script, Verdict};
use crate::session::{self, Replay, Session};
use crate::signing::{self, SessionKey};

/// How the Guardian is reached; reported as `selected_transport`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Http,
    Stdio,
}

impl Transport {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Http => "http",
            Transport::Stdio => "stdio",
        }
    }
}

/// Everything needed to build a [`Guardian`].
pub struct Config {
    /// The shared secret (HKDF input keying material).
    pub secret: Vec<u8>,
    /// The decision script.
    pub script: Script,
    /// The transport this Guardian serves.
    pub transport: Transport,
    /// `key_id` for replies when neither the request nor its session named one.
    pub default_key_id: String,
    /// Where to record requests, if anywhere.
    pub recorder: Option<Recorder>,
    /// Log one line per request to stderr.
    pub verbose: bool,
}

/// A scriptable ACS Guardian.
pub struct Guardian {
    secret: Vec<u8>,
    script: Script,
    rules: RuleBook,
    transport: Transport,
    default_key_id: String,
    recorder: Option<Recorder>,
    verbose: bool,
    sessions: Mutex<HashMap<String, Session>>,
    /// Batches accepted so far (numbers them in the record).
    batches: AtomicU64,
}

/// The result of processing one body, before recording.
struct Handled {
    outcome: Outcome,
    entry: Entry,
}

impl Guardian {
    /// A Guardian with no sessions yet.
    pub fn new(config: Config) -> Guardian {
        Guardian {
            rules: RuleBook::new(&config.script),
            secret: config.secret,
            script: config.script,
            transport: config.transport,
            default_key_id: config.default_key_id,
            recorder: config.recorder,
            verbose: config.verbose,
            sessions: Mutex::new(HashMap::new()),
            batches: AtomicU64::new(0),
        }
    }

    /// Processes one request body (records it first if `--record` is set).
    pub fn handle(&self, body: &[u8]) -> Outcome {
        self.handle_at(body, OffsetDateTime::now_utc())
    }

    /// [`Guardian::handle`] with an explicit clock, for tests.
    ///
    /// With the script's `batch`, a non-empty JSON array is a batch: every
    /// element is handled (and recorded) as if it came alone, in order, and
    /// the reply is `[` + the elements' replies joined by `,` + `]`, in
    /// request order, sent once the longest element delay has passed.
    /// Elements that stay `silent` are left out (all silent: no reply at
    /// all); a `drop` on any element drops the whole batch; a `malformed`
    /// element puts its bytes into the array as they are.
    pub fn handle_at(&self, body: &[u8], now: OffsetDateTime) -> Outcome {
        self.handle_inner(body, now, None)
    }

    /// [`Guardian::handle`] for a request that came with a W3C
    /// `traceparent` header, which its record lines then carry.
    pub fn handle_traced(&self, body: &[u8], traceparent: Option<&str>) -> Outcome {
        self.handle_inner(body, OffsetDateTime::now_utc(), traceparent)
    }

    fn handle_inner(&self, body: &[u8], now: OffsetDateTime, traceparent: Option<&str>) -> Outcome {
        if self.script.batch {
            if let Some(elements) = batch_elements(body) {
                return self.handle_batch(elements, now, traceparent);
            }
        }
        let Handled { outcome, mut entry } = self.process(body, now);
        entry.traceparent = traceparent.map(str::to_owned);
        self.note(&entry);
        outcome
    }

    fn handle_batch(
        &self,
        elements: Vec<Value>,
        now: OffsetDateTime,
        traceparent: Option<&str>,
    ) -> Outcome {
        let batch = self.batches.fetch_add(1, Ordering::SeqCst) + 1;
        let mut delay = Duration::ZERO;
        let mut replies = Vec::with_capacity(elements.len());
        let mut dropped = false;
        for (index, element) in elements.into_iter().enumerate() {
            let Handled { outcome, mut entry } = self.process_envelope(element, now);
            entry.batch = Some((batch, index));
            entry.traceparent = traceparent.map(str::to_owned);
            self.note(&entry);
            delay = delay.max(outcome.delay);
            match outcome.reply {
                Reply::Send(bytes) => replies.push(bytes),
                Reply::Drop => dropped = true,
                Reply::Silent => {}
            }
        }
        let reply = if dropped {
            Reply::Drop
        } else if replies.is_empty() {
            Reply::Silent
        } else {
            Reply::Send(join_array(&replies))
        };
        Outcome { delay, reply }
    }

    /// Logs (`--verbose`) and records (`--record`) one request.
    fn note(&self, entry: &Entry) {
        if self.verbose {
            let method = entry
                .envelope
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or("?");
            crate::log(&format!(
                "{method} signature_valid={:?} -> {}",
                entry.signature_valid, entry.action
            ));
        }
        if let Some(recorder) = &self.recorder {
            recorder.write(entry);
        }
    }

    fn process(&self, body: &[u8], now: OffsetDateTime) -> Handled {
        let envelope: Value = match serde_json::from_slice(body) {
            Ok(envelope) => envelope,
            Err(err) => {
                let reply = error_envelope(
                    &Value::Null,
                    -32700,
                    "parse error",
                    Some(error_data("parse_error", &err.to_string())),
                );
                return Handled {
                    outcome: Plan::unsigned(reply).finish(None),
                    entry: Entry {
                        envelope: Value::Null,
                        raw: Some(String::from_utf8_lossy(body).into_owned()),
                        signature_valid: None,
                        action: "reject:parse_error".into(),
                        chain_hash: None,
                        batch: None,
                        traceparent: None,
                    },
                };
            }
        };
        self.process_envelope(envelope, now)
    }

    /// Steps 1–7 for one parsed request (or batch element).
    fn process_envelope(&self, envelope: Value, now: OffsetDateTime) -> Handled {
        let unsigned_reject =
            |envelope: Value, id: &Value, code: i64, reason: &str, message: &str| {
                let reply = error_envelope(id, code, message, Some(error_data(reason, message)));
                Handled {
                    outcome: Plan::unsigned(reply).finish(None),
                    entry: entry(envelope, None, &format!("reject:{reason}"), None),
                }
            };
        if envelope.is_array() && self.script.batch {
            // Only an empty array or an array inside a batch gets here.
            let message = "an empty array or a nested array is not a request";
            return unsigned_reject(envelope, &Value::Null, -32600, "invalid_request", message);
        }
        if envelope.is_array() {
            let message = "batches are not supported; send requests one at a time";
            return unsigned_reject(
                envelope,
                &Value::Null,
                -32600,
                "batch_not_supported",
                message,
            );
        }
        let request = match Request::parse(envelope.clone()) {
            Ok(request) => request,
            Err(bad) => {
                return unsigned_reject(envelope, &bad.id, bad.code, bad.reason, &bad.message)
            }
        };
        if request.is_ping() {
            return self.ping(request, now);
        }
        // Request::parse guarantees a session id on everything but ping.
        let session_id = request.session_id.clone().unwrap_or_default();
        let key = SessionKey::derive(&self.secret, &session_id);
        let verified = signing::verify(&key, &request.envelope);
        let signature_valid = verified.is_ok();
        if let Err(why) = &verified {
            if self.script.verify_signatures {
                let message = format!("request signature rejected: {why}");
                let mut handled = unsigned_reject(
                    request.envelope,
                    &request.id,
                    -32004,
                    "signature_invalid",
                    &message,
                );
                handled.entry.signature_valid = Some(false);
                return handled;
            }
        }

        let mut sessions = self
            .sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let session = sessions.entry(session_id).or_default();
        if signature_valid {
            session.key_id = request.key_id.clone();
        }
        let signer = Signer {
            key,
            key_id: request
                .key_id
                .clone()
                .or_else(|| session.key_id.clone())
                .unwrap_or_else(|| self.default_key_id.clone()),
        };
        let signed_reject = |request: Request, code: i64, reason: &str, data: Value| {
            let message = data["message"].as_str().unwrap_or(reason).to_owned();
            let reply = error_envelope(&request.id, code, &message, Some(data));
            Handled {
                outcome: Plan::signed(reply).finish(Some(&signer)),
                entry: entry(
                    request.envelope,
                    Some(signature_valid),
                    &format!("reject:{reason}"),
                    None,
                ),
            }
        };

        if self.script.check_timestamp {
            let window = self.script.hello.skew_window_ms;
            match request
                .timestamp
                .as_deref()
                .and_then(|ts| session::skew_ms(ts, now))
            {
                None => {
                    let data = error_data("invalid_params", "\"params.timestamp\" is not RFC 3339");
                    return signed_reject(request, -32602, "invalid_params", data);
                }
                Some(skew) if skew > u128::from(window) => {
                    let mut data = error_data(
                        "timestamp_out_of_window",
                        &format!("timestamp is {skew} ms from the Guardian clock"),
                    );
                    data["skew_window_ms"] = json!(window);
                    return signed_reject(request, -32006, "timestamp_out_of_window", data);
                }
                Some(_) => {}
            }
        }
        if self.script.check_replay {
            if let Err(replay) = session.note(&request.request_id, request.nonce.as_deref()) {
                let what = match replay {
                    Replay::RequestId => "request_id",
                    Replay::Nonce => "nonce",
                };
                let mut data = error_data(
                    "replay_detected",
                    &format!("{what} already seen in this session"),
                );
                data["request_id"] = json!(request.request_id);
                return signed_reject(request, -32005, "replay_detected", data);
            }
        }

        if request.is_hello() {
            drop(sessions);
            let (plan, label) =
                crate::hello::answer(&self.script.hello, &request, self.transport.as_str());
            return Handled {
                outcome: plan.finish(Some(&signer)),
                entry: entry(request.envelope, Some(signature_valid), &label, None),
            };
        }

        // A content-bearing step: cross-check, chain, then decide.
        let mismatch = self.script.check_chain_hash
            && request
                .client_chain_hash()
                .is_some_and(|claimed| !session.chain.has_published(claimed));
        let head = session
            .chain
            .append(&request.request_id, &request.method, request.params());
        let named = script::tool_name(&request.method, request.payload()).map(str::to_owned);
        let tool = if script::is_mcp_tools_call(&request.method) {
            session.mcp_tool(request.payload(), named.as_deref())
        } else {
            named
        };
        drop(sessions);

        let action = if mismatch {
            Action::ChainMismatch(Verdict::default())
        } else {
            self.rules.action_for(&request.method, tool.as_deref())
        };
        let ctx = Context {
            id: &request.id,
            request_id: &request.request_id,
            chain_hash: Some(&head),
            payload: None,
        };
        let outcome = decide::plan(&action, &ctx).finish(Some(&signer));
        Handled {
            outcome,
            entry: entry(
                request.envelope,
                Some(signature_valid),
                &action.label(),
                Some(head),
            ),
        }
    }

    /// `system/ping`: always `allow` with the liveness payload, unless a rule
    /// names `system/ping` exactly. Signed when the ping names a session.
    fn ping(&self, request: Request, now: OffsetDateTime) -> Handled {
        let key = request
            .session_id
            .as_deref()
            .map(|session_id| SessionKey::derive(&self.secret, session_id));
        let signature_valid = match (&key, request.params().get("signature")) {
            (Some(key), Some(_)) => Some(signing::verify(key, &request.envelope).is_ok()),
            (None, Some(_)) => Some(false),
            (_, None) => None,
        };
        let signer = key.map(|key| {
            let remembered = request.session_id.as_deref().and_then(|session_id| {
                let sessions = self
                    .sessions
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                sessions
                    .get(session_id)
                    .and_then(|session| session.key_id.clone())
            });
            Signer {
                key,
                key_id: request
                    .key_id
                    .clone()
                    .or(remembered)
                    .unwrap_or_else(|| self.default_key_id.clone()),
            }
        });

        let mut payload = json!({"status": "ok"});
        if let Some(echo) = request.payload().get("echo") {
            payload["echo"] = echo.clone();
        }
        payload["server_timestamp"] = json!(session::rfc3339(now));
        let ctx = Context {
            id: &request.id,
            request_id: &request.request_id,
            chain_hash: None,
            payload: Some(&payload),
        };
        let (action, label) = match self.rules.rule_for(crate::PING, None) {
            Some(action) => {
                let label = action.label();
                (action, label)
            }
            None => (Action::allow(), "ping".to_owned()),
        };
        Handled {
            outcome: decide::plan(&action, &ctx).finish(signer.as_ref()),
            entry: entry(request.envelope, signature_valid, &label, None),
        }
    }
}

fn entry(
    envelope: Value,
    signature_valid: Option<bool>,
    action: &str,
    chain_hash: Option<String>,
) -> Entry {
    Entry {
        envelope,
        raw: None,
        signature_valid,
        action: action.to_owned(),
        chain_hash,
        batch: None,
        traceparent: None,
    }
}

/// The elements of a non-empty JSON array body, if that is what it is.
fn batch_elements(body: &[u8]) -> Option<Vec<Value>> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace())?;
    if *first != b'[' {
        return None;
    }
    match serde_json::from_slice(body) {
        Ok(Value::Array(elements)) if !elements.is_empty() => Some(elements),
        _ => None,
    }
}

/// `[a,b,…]` from the bytes of each element.
fn join_array(elements: &[Vec<u8>]) -> Vec<u8> {
    let mut out =
        Vec::with_capacity(elements.iter().map(Vec::len).sum::<usize>() + elements.len() + 1);
    out.push(b'[');
    for (index, element) in elements.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        out.extend_from_slice(element);
    }
    out.push(b']');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::Reply;
    use time::macros::datetime;

    const SECRET: &[u8] = b"unit-test-secret-unit-test-secret";
    const SESSION: &str = "5c3f1b8e-9a0d-4c2e-8f4b-2d6a7e9c1b30";
    const NOW: OffsetDateTime = datetime!(2026-09-19 10:00:00 UTC);

    fn guardian(script: &str) -> Guardian {
        Guardian::new(Config {
            secret: SECRET.to_vec(),
            script: Script::parse(script).expect("valid script"),
            transport: Transport::Http,
            default_key_id: "default".into(),
            recorder: None,
            verbose: false,
        })
    }

    fn key() -> SessionKey {
        SessionKey::derive(SECRET, SESSION)
    }

    /// A signed request with `request_id` and `timestamp`.
    fn request(method: &str, request_id: &str, timestamp: &str, payload: Value) -> Value {
        let mut envelope = json!({"jsonrpc": "2.0", "id": request_id, "method": method, "params": {
            "acs_version": "0.1.0", "request_id": request_id, "timestamp": timestamp,
            "metadata": {"agent_id": "unit", "session_id": SESSION}, "payload": payload}});
        assert!(signing::sign_in_place(&key(), &mut envelope, "k1"));
        envelope
    }

    fn reply(guardian: &Guardian, envelope: &Value) -> Value {
        match guardian
            .handle_at(envelope.to_string().as_bytes(), NOW)
            .reply
        {
            Reply::Send(bytes) => serde_json::from_slice(&bytes).expect("JSON reply"),
            other => panic!("no reply: {other:?}"),
        }
    }

    fn tool(name: &str) -> Value {
        json!({"tool": {"name": name}, "arguments": {}})
    }

    #[test]
    fn decisions_are_signed_and_chained() {
        let g = guardian(
            r#"{"rules": [{"method": "steps/toolCallRequest", "tool": "rm", "then": {"action": "deny"}}]}"#,
        );
        let first = request(
            "steps/toolCallRequest",
            "r1",
            "2026-09-19T10:00:00Z",
            tool("ls"),
        );
        let second = request(
            "steps/toolCallRequest",
            "r2",
            "2026-09-19T10:00:01Z",
            tool("rm"),
        );
        let a = reply(&g, &first);
        let b = reply(&g, &second);
        assert_eq!(a["result"]["decision"], "allow");
        assert_eq!(b["result"]["decision"], "deny");
        assert_eq!(signing::verify(&key(), &a), Ok(()));
        assert_eq!(signing::verify(&key(), &b), Ok(()));
        assert_eq!(b["result"]["signature"]["key_id"], "k1");

        let mut chain = crate::chain::Chain::default();
        chain.append("r1", "steps/toolCallRequest", &first["params"]);
        let head = chain.append("r2", "steps/toolCallRequest", &second["params"]);
        assert_eq!(b["result"]["chain_hash"], json!(head));
    }

    fn batch_reply(guardian: &Guardian, elements: &[Value]) -> Reply {
        let body = Value::Array(elements.to_vec()).to_string();
        guardian.handle_at(body.as_bytes(), NOW).reply
    }

    #[test]
    fn batches_are_refused_unless_the_script_accepts_them() {
        let first = request(
            "steps/toolCallRequest",
            "r1",
            "2026-09-19T10:00:00Z",
            tool("ls"),
        );
        let refused = reply(&guardian("{}"), &json!([first.clone()]));
        assert_eq!(refused["error"]["code"], -32600);
        assert_eq!(refused["error"]["data"]["reason"], "batch_not_supported");
        assert_eq!(refused["id"], Value::Null);

        let g = guardian(r#"{"batch": true}"#);
        for empty_or_nested in [json!([]), json!([[first]])] {
            let text = empty_or_nested.to_string();
            let Reply::Send(bytes) = g.handle_at(text.as_bytes(), NOW).reply else {
                panic!("no reply to {text}");
            };
            let answer: Value = serde_json::from_slice(&bytes).expect("JSON");
            let error = if answer.is_array() {
                &answer[0]["error"]
            } else {
                &answer["error"]
            };
            assert_eq!(error["code"], -32600, "{text}");
            assert_eq!(error["data"]["reason"], "invalid_request", "{text}");
        }
    }

    #[test]
    fn batch_elements_are_decided_signed_and_chained_one_by_one() {
        let g = guardian(
            r#"{"batch": true, "rules": [{"method": "steps/toolCallRequest", "tool": "rm", "then": {"action": "deny"}}]}"#,
        );
        let first = request(
            "steps/toolCallRequest",
            "r1",
            "2026-09-19T10:00:00Z",
            tool("ls"),
        );
        let second = request(
            "steps/toolCallRequest",
            "r2",
            "2026-09-19T10:00:00Z",
            tool("rm"),
        );
        let mut forged = request(
            "steps/toolCallRequest",
            "r3",
            "2026-09-19T10:00:00Z",
            tool("ls"),
        );
        forged["params"]["payload"]["tool"]["name"] = json!("cat");
        let Reply::Send(bytes) = batch_reply(&g, &[first.clone(), second.clone(), forged]) else {
            panic!("no reply");
        };
        let answers: Value = serde_json::from_slice(&bytes).expect("JSON array");
        let answers = answers.as_array().expect("an array");
        assert_eq!(answers.len(), 3);
        assert_eq!(answers[0]["id"], "r1");
        assert_eq!(answers[0]["result"]["decision"], "allow");
        assert_eq!(answers[1]["id"], "r2");
        assert_eq!(answers[1]["result"]["decision"], "deny");
        for answer in &answers[..2] {
            assert_eq!(signing::verify(&key(), answer), Ok(()));
        }
        assert_eq!(answers[2]["error"]["code"], -32004);

        let mut chain = crate::chain::Chain::default();
        let head1 = chain.append("r1", "steps/toolCallRequest", &first["params"]);
        let head2 = chain.append("r2", "steps/toolCallRequest", &second["params"]);
        assert_eq!(answers[0]["result"]["chain_hash"], json!(head1));
        assert_eq!(answers[1]["result"]["chain_hash"], json!(head2));

        // The same request_id again, alone: a replay.
        assert_eq!(reply(&g, &first)["error"]["code"], -32005);
    }

    #[test]
    fn batch_delays_silence_and_drop() {
        let g = guardian(
            r#"{"batch": true, "rules": [
                {"method": "steps/toolCallRequest", "tool": "slow", "then": {"action": "late", "delay_ms": 30, "then": {"action": "allow"}}},
                {"method": "steps/toolCallRequest", "tool": "mute", "then": {"action": "silent"}},
                {"method": "steps/toolCallRequest", "tool": "gone", "then": {"action": "drop"}}]}"#,
        );
        let call = |id: &str, name: &str| {
            request(
                "steps/toolCallRequest",
                id,
                "2026-09-19T10:00:00Z",
                tool(name),
            )
        };
        let outcome = g.handle_at(
            json!([call("a", "slow"), call("b", "mute"), call("c", "ls")])
                .to_string()
                .as_bytes(),
            NOW,
        );
        assert_eq!(outcome.delay, Duration::from_millis(30));
        let Reply::Send(bytes) = outcome.reply else {
            panic!("no reply");
        };
        let answers: Value = serde_json::from_slice(&bytes).expect("JSON");
        let ids: Vec<&Value> = answers
            .as_array()
            .expect("array")
            .iter()
            .map(|a| &a["id"])
            .collect();
        assert_eq!(
            ids,
            [&json!("a"), &json!("c")],
            "the silent element is left out"
        );
        assert_eq!(batch_reply(&g, &[call("d", "mute")]), Reply::Silent);
        assert_eq!(
            batch_reply(&g, &[call("e", "ls"), call("f", "gone")]),
            Reply::Drop
        );
    }

    #[test]
    fn batch_elements_are_recorded_with_their_batch_and_position() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("record.jsonl");
        let g = Guardian::new(Config {
            secret: SECRET.to_vec(),
            script: Script::parse(r#"{"batch": true}"#).expect("valid"),
            transport: Transport::Http,
            default_key_id: "default".into(),
            recorder: Some(Recorder::open(&path).expect("recorder")),
            verbose: false,
        });
        let call = |id: &str| {
            request(
                "steps/toolCallRequest",
                id,
                "2026-09-19T10:00:00Z",
                tool("ls"),
            )
        };
        reply(&g, &call("alone"));
        batch_reply(&g, &[call("a"), call("b")]);
        batch_reply(&g, &[call("c")]);
        let lines: Vec<Value> = std::fs::read_to_string(&path)
            .expect("record")
            .lines()
            .map(|line| serde_json::from_str(line).expect("JSON line"))
            .collect();
        let placed: Vec<(Value, Value, Value)> = lines
            .iter()
            .map(|l| {
                (
                    l["envelope"]["id"].clone(),
                    l.get("batch").cloned().unwrap_or(Value::Null),
                    l.get("batch_index").cloned().unwrap_or(Value::Null),
                )
            })
            .collect();
        assert_eq!(
            placed,
            [
                (json!("alone"), Value::Null, Value::Null),
                (json!("a"), json!(1), json!(0)),
                (json!("b"), json!(1), json!(1)),
                (json!("c"), json!(2), json!(0)),
            ]
        );
        assert!(lines.iter().all(|l| l["action"] == "allow"));
    }

    #[test]
    fn signature_replay_and_timestamp_checks() {
        let g = guardian("{}");
        let mut forged = request(
            "steps/toolCallRequest",
            "r1",
            "2026-09-19T10:00:00Z",
            tool("ls"),
        );
        forged["params"]["payload"]["tool"]["name"] = json!("rm");
        let err = reply(&g, &forged);
        assert_eq!(err["error"]["code"], -32004);
        assert!(err["error"].get("signature").is_none());

        let ok = request(
            "steps/toolCallRequest",
            "r2",
            "2026-09-19T10:00:00Z",
            tool("ls"),
        );
        assert_eq!(reply(&g, &ok)["result"]["decision"], "allow");
        let replayed = reply(&g, &ok);
        assert_eq!(replayed["error"]["code"], -32005);
        assert_eq!(signing::verify(&key(), &replayed), Ok(()));

        let stale = request(
            "steps/toolCallRequest",
            "r3",
            "2026-09-19T09:54:59Z",
            tool("ls"),
        );
        let err = reply(&g, &stale);
        assert_eq!(err["error"]["code"], -32006);
        assert_eq!(err["error"]["data"]["skew_window_ms"], 300_000);
    }

    #[test]
    fn checks_can_be_switched_off() {
        let g = guardian(
            r#"{"verify_signatures": false, "check_replay": false, "check_timestamp": false}"#,
        );
        let mut unsigned = request(
            "steps/toolCallRequest",
            "r1",
            "1999-01-01T00:00:00Z",
            tool("ls"),
        );
        unsigned["params"]
            .as_object_mut()
            .expect("object")
            .remove("signature");
        assert_eq!(reply(&g, &unsigned)["result"]["decision"], "allow");
        let again = reply(&g, &unsigned);
        assert_eq!(again["result"]["decision"], "allow");
        // Still signed, with the default key_id.
        assert_eq!(again["result"]["signature"]["key_id"], "default");
    }

    #[test]
    fn ping_is_allowed_even_under_deny_unchained_and_signed() {
        let g = guardian(r#"{"default": {"action": "deny"}}"#);
        let ping = json!({"jsonrpc": "2.0", "id": 9, "method": "system/ping", "params": {
            "acs_version": "0.1.0", "request_id": "p1", "timestamp": "2026-09-19T10:00:00Z",
            "metadata": {"agent_id": "unit", "session_id": SESSION}, "payload": {"echo": "hi"}}});
        let pong = reply(&g, &ping);
        assert_eq!(pong["result"]["decision"], "allow");
        assert_eq!(pong["result"]["payload"]["status"], "ok");
        assert_eq!(pong["result"]["payload"]["echo"], "hi");
        assert!(pong["result"].get("chain_hash").is_none());
        assert_eq!(signing::verify(&key(), &pong), Ok(()));
    }

    #[test]
    fn malformed_bodies_get_unsigned_json_rpc_errors() {
        let g = guardian("{}");
        let parse = |body: &[u8]| match g.handle_at(body, NOW).reply {
            Reply::Send(bytes) => serde_json::from_slice::<Value>(&bytes).expect("JSON"),
            other => panic!("{other:?}"),
        };
        assert_eq!(parse(b"{nope")["error"]["code"], -32700);
        assert_eq!(parse(b"[]")["error"]["code"], -32600);
        let no_payload =
            parse(br#"{"jsonrpc":"2.0","id":1,"method":"steps/x","params":{"request_id":"r"}}"#);
        assert_eq!(no_payload["error"]["code"], -32602);
        assert_eq!(no_payload["id"], 1);
    }

    #[test]
    fn chain_cross_check_and_mcp_tool_memory() {
        let g = guardian(
            r#"{"check_chain_hash": true,
                "rules": [{"method": "protocols/MCP/tools/call", "tool": "get-env", "then": {"action": "deny"}}]}"#,
        );
        let call = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "get-env"}});
        let request_reply = reply(
            &g,
            &request(
                "protocols/MCP/tools/call",
                "r1",
                "2026-09-19T10:00:00Z",
                call,
            ),
        );
        assert_eq!(request_reply["result"]["decision"], "deny");
        let response = json!({"jsonrpc": "2.0", "id": 4, "result": {"content": []}});
        let response_reply = reply(
            &g,
            &request(
                "protocols/MCP/tools/call",
                "r2",
                "2026-09-19T10:00:01Z",
                response,
            ),
        );
        assert_eq!(response_reply["result"]["decision"], "deny");

        let mut lying = request(
            "steps/userMessage",
            "r3",
            "2026-09-19T10:00:02Z",
            json!({"content": []}),
        );
        lying["params"]["metadata"]["session_state"] = json!({"chain_hash": "0".repeat(64)});
        signing::sign_in_place(&key(), &mut lying, "k1");
        let mismatch = reply(&g, &lying);
        assert_eq!(mismatch["result"]["decision"], "deny");
        assert_eq!(
            mismatch["result"]["reason_codes"],
            json!(["chain_mismatch"])
        );

        let mut honest = request(
            "steps/userMessage",
            "r4",
            "2026-09-19T10:00:03Z",
            json!({"content": []}),
        );
        honest["params"]["metadata"]["session_state"] =
            json!({"chain_hash": mismatch["result"]["chain_hash"]});
        signing::sign_in_place(&key(), &mut honest, "k1");
        assert_eq!(reply(&g, &honest)["result"]["decision"], "allow");
    }
}
