//! The batch exchange and the nonce against an in-process transport
//! whose answers each test scripts (signed with the session key).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::{self, BoxFuture, FutureExt};
use serde_json::{json, Value};
use uuid::Uuid;

use super::{RemoteGuardian, RemoteSettings};
use crate::guardian::remote::signing::{sign_request, sign_response, SessionKey, SigningSecret};
use crate::guardian::remote::transport::{GuardianTransport, TransportError};
use crate::guardian::remote::wire;
use crate::guardian::{BatchAnswer, Decision, Disposition, Guardian, GuardianError};
use crate::hooks::{HookRequest, Metadata};

const SECRET: [u8; 32] = [7; 32];

type Answerer = Box<dyn Fn(&Value, &SessionKey) -> Value + Send + Sync>;

/// Answers each body with `answer(request, key)` and keeps the bodies.
struct Scripted {
    answer: Answerer,
    key: SessionKey,
    bodies: Mutex<Vec<Value>>,
}

impl GuardianTransport for Scripted {
    fn call<'a>(&'a self, body: Bytes) -> BoxFuture<'a, Result<Bytes, TransportError>> {
        let request: Value = serde_json::from_slice(&body).unwrap();
        let reply = (self.answer)(&request, &self.key);
        self.bodies.lock().unwrap().push(request);
        future::ready(Ok(Bytes::from(reply.to_string()))).boxed()
    }

    fn name(&self) -> &'static str {
        "http"
    }
}

struct Fixture {
    guardian: RemoteGuardian,
    transport: Arc<Scripted>,
    metadata: Metadata,
}

impl Fixture {
    fn new(nonce: bool, answer: Answerer) -> Self {
        let metadata = Metadata {
            agent_id: "unit".into(),
            session_id: Uuid::new_v4(),
            environment: None,
            user: None,
        };
        let secret = SigningSecret::from_bytes(SECRET.to_vec()).unwrap();
        let key = SessionKey::derive(&secret, &metadata.session_id.to_string());
        let transport = Arc::new(Scripted {
            answer,
            key,
            bodies: Mutex::new(Vec::new()),
        });
        let settings = RemoteSettings {
            secret,
            key_id: "k-unit".into(),
            methods_implemented: vec!["steps/toolCallRequest".into()],
            transport: wire::Transport::Http,
            local_posture: None,
            timeout: Duration::from_secs(1),
            nonce,
        };
        let guardian = RemoteGuardian::new(transport.clone(), settings);
        Self {
            guardian,
            transport,
            metadata,
        }
    }

    async fn batch(&self, hooks: &[HookRequest]) -> BatchAnswer {
        let hooks: Vec<&HookRequest> = hooks.iter().collect();
        self.guardian.decide_batch(&hooks, &self.metadata).await
    }

    fn bodies(&self) -> Vec<Value> {
        self.transport.bodies.lock().unwrap().clone()
    }
}

fn hooks() -> [HookRequest; 2] {
    [
        HookRequest::new("protocols/MCP/tools/call", json!({"id": 1}), None),
        HookRequest::new(
            "steps/toolCallRequest",
            json!({"tool": {"name": "t"}}),
            None,
        ),
    ]
}

/// A signed decision answering `request`, publishing head `head`.
fn decision(request: &Value, key: &SessionKey, decision: &str, head: char) -> Value {
    let mut reply = json!({"jsonrpc": "2.0", "id": request["id"], "result": {
        "type": "final", "acs_version": "0.1.0",
        "request_id": request["params"]["request_id"], "decision": decision,
        "reasoning": "scripted", "chain_hash": head.to_string().repeat(64)}});
    sign_response(&mut reply, key, "k-unit").unwrap();
    reply
}

fn answered(answer: BatchAnswer) -> Vec<Result<Decision, GuardianError>> {
    match answer {
        BatchAnswer::Answers(answers) => answers,
        BatchAnswer::Unsupported => panic!("the batch was not answered"),
    }
}

#[tokio::test]
async fn one_body_carries_every_hook_and_answers_bind_by_id_in_any_order() {
    let fixture = Fixture::new(
        false,
        Box::new(|batch, key| {
            let elements = batch.as_array().unwrap();
            json!([
                decision(&elements[1], key, "deny", 'b'),
                decision(&elements[0], key, "allow", 'a'),
            ])
        }),
    );
    let hooks = hooks();
    let answers = answered(fixture.batch(&hooks).await);
    assert_eq!(answers[0].as_ref().unwrap().decision, Disposition::Allow);
    assert_eq!(answers[1].as_ref().unwrap().decision, Disposition::Deny);
    let bodies = fixture.bodies();
    assert_eq!(bodies.len(), 1, "one exchange");
    let elements = bodies[0].as_array().expect("a batch array");
    assert_eq!(elements.len(), 2);
    assert_ne!(elements[0]["id"], elements[1]["id"]);
    for (element, hook) in elements.iter().zip(&hooks) {
        assert_eq!(element["method"], hook.method.as_str());
        assert_eq!(element["params"]["request_id"], hook.request_id.to_string());
        assert_eq!(element["params"]["signature"]["key_id"], "k-unit");
        assert!(element["params"].get("nonce").is_none());
    }
    // Elements are read in the order asked; the last one's head is the
    // Guardian's newest and goes out on the next request.
    let sessions = fixture.guardian.sessions.lock().unwrap();
    let head = sessions[&fixture.metadata.session_id].chain_head.clone();
    assert_eq!(head, Some("b".repeat(64)));
}

#[tokio::test]
async fn each_element_fails_on_its_own() {
    let fixture = Fixture::new(
        false,
        Box::new(|batch, key| {
            let elements = batch.as_array().unwrap();
            let mut wrong = elements[0].clone();
            wrong["params"]["request_id"] = json!(Uuid::new_v4().to_string());
            let mut forged = decision(&elements[1], key, "allow", 'b');
            forged["result"]["decision"] = json!("deny");
            json!([decision(&wrong, key, "allow", 'a'), forged])
        }),
    );
    let answers = answered(fixture.batch(&hooks()).await);
    assert!(
        matches!(&answers[0], Err(GuardianError::Binding(_))),
        "{answers:?}"
    );
    assert!(
        matches!(&answers[1], Err(GuardianError::Signature(_))),
        "{answers:?}"
    );
}

#[tokio::test]
async fn a_missing_answer_is_malformed_and_a_foreign_id_is_a_binding_failure() {
    let missing = Fixture::new(
        false,
        Box::new(|batch, key| json!([decision(&batch[0], key, "allow", 'a')])),
    );
    let answers = answered(missing.batch(&hooks()).await);
    assert!(answers[0].is_ok(), "{answers:?}");
    assert!(
        matches!(&answers[1], Err(GuardianError::Malformed(m)) if m.contains("no answer")),
        "{answers:?}"
    );

    let foreign = Fixture::new(
        false,
        Box::new(|batch, key| {
            let mut misfiled = batch[1].clone();
            misfiled["id"] = json!(999_999);
            json!([
                decision(&batch[0], key, "allow", 'a'),
                decision(&misfiled, key, "allow", 'b'),
            ])
        }),
    );
    let answers = answered(foreign.batch(&hooks()).await);
    assert!(answers[0].is_ok(), "{answers:?}");
    assert!(
        matches!(&answers[1], Err(GuardianError::Binding(m)) if m.contains("999999")),
        "{answers:?}"
    );
}

#[tokio::test]
async fn a_single_minus_32600_turns_batching_off_for_good() {
    let fixture = Fixture::new(
        false,
        Box::new(|_, _| {
            json!({"jsonrpc": "2.0", "id": null,
                   "error": {"code": -32600, "message": "batches are not supported"}})
        }),
    );
    assert!(matches!(
        fixture.batch(&hooks()).await,
        BatchAnswer::Unsupported
    ));
    assert!(!fixture.guardian.accepts_batches());
    assert!(matches!(
        fixture.batch(&hooks()).await,
        BatchAnswer::Unsupported
    ));
    assert_eq!(fixture.bodies().len(), 1, "not asked again");
}

#[tokio::test]
async fn another_single_reply_fails_every_element() {
    let fixture = Fixture::new(
        false,
        Box::new(|_, key| {
            let mut reply = json!({"jsonrpc": "2.0", "id": null,
                "error": {"code": -32005, "message": "replayed"}});
            sign_response(&mut reply, key, "k-unit").unwrap();
            reply
        }),
    );
    let answers = answered(fixture.batch(&hooks()).await);
    for answer in &answers {
        let err = answer.as_ref().unwrap_err();
        assert!(
            matches!(err, GuardianError::Refused { code: -32005, .. }),
            "{err}"
        );
        assert!(err.fails_closed());
    }
    assert!(fixture.guardian.accepts_batches());

    let unsigned = Fixture::new(
        false,
        Box::new(
            |_, _| json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "parse"}}),
        ),
    );
    for answer in answers_of(&unsigned).await {
        assert!(matches!(answer, Err(GuardianError::Signature(_))));
    }
}

async fn answers_of(fixture: &Fixture) -> Vec<Result<Decision, GuardianError>> {
    answered(fixture.batch(&hooks()).await)
}

#[tokio::test]
async fn nonces_are_fresh_32_hex_digits_on_signed_requests_only() {
    let fixture = Fixture::new(
        true,
        Box::new(|request, key| match request {
            Value::Array(elements) => Value::Array(
                elements
                    .iter()
                    .map(|e| decision(e, key, "allow", 'c'))
                    .collect(),
            ),
            single => {
                if single["method"] == crate::hooks::SYSTEM_PING {
                    json!({"jsonrpc": "2.0", "id": single["id"], "result": {
                        "type": "final", "acs_version": "0.1.0",
                        "request_id": single["params"]["request_id"], "decision": "allow",
                        "payload": {"status": "ok", "echo": "acs-proxy",
                                    "server_timestamp": "2026-01-01T00:00:00Z"}}})
                } else {
                    decision(single, key, "allow", 'c')
                }
            }
        }),
    );
    let [wrapped, step] = hooks();
    fixture.batch(&[wrapped.clone(), step]).await;
    fixture
        .guardian
        .decide(&wrapped, &fixture.metadata)
        .await
        .unwrap();
    fixture.guardian.ping().await.unwrap();
    let mut signed = Vec::new();
    for body in fixture.bodies() {
        match body {
            Value::Array(elements) => signed.extend(elements),
            single if single["method"] == crate::hooks::SYSTEM_PING => {
                assert!(single["params"].get("nonce").is_none(), "{single}");
                let metadata = &single["params"]["metadata"];
                assert_eq!(metadata["platform"], "acs-proxy", "{single}");
                assert_eq!(metadata["platform_version"], env!("CARGO_PKG_VERSION"));
                let session = metadata["session_id"].as_str().unwrap_or_default();
                assert!(
                    uuid::Uuid::parse_str(session).is_ok_and(|id| !id.is_nil()),
                    "{single}"
                );
            }
            single => signed.push(single),
        }
    }
    assert_eq!(signed.len(), 3);
    let mut seen = HashSet::new();
    for request in &signed {
        let nonce = request["params"]["nonce"].as_str().expect("a nonce");
        assert_eq!(nonce.len(), 32, "{nonce}");
        assert!(
            nonce
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
            "{nonce}"
        );
        assert!(seen.insert(nonce.to_owned()), "nonce reused: {nonce}");
        // The nonce is covered by the signature.
        let mut unsigned = request.clone();
        let signature = unsigned["params"]
            .as_object_mut()
            .unwrap()
            .remove("signature")
            .unwrap();
        sign_request(&mut unsigned, &fixture.transport.key, "k-unit").unwrap();
        assert_eq!(unsigned["params"]["signature"], signature);
    }
}
