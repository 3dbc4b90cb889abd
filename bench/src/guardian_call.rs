//! One `tools/call` to the demo server's `echo` and its answer, as the
//! hooks acs-proxy asks a remote Guardian about with `[guardian] batch =
//! true`: the request's `protocols/MCP/tools/call` and
//! `steps/toolCallRequest` as one batch, then the answer's
//! `protocols/MCP/tools/call` and `steps/toolCallResult` as another.
//!
//! The messages are read once; every ask builds fresh hooks around them,
//! signs, sends, verifies and reads the answer with acs-proxy's own remote
//! Guardian client. Nothing else of the gateway runs: no policy, no hook
//! built from the live message, no audit. The harness's ACS client floor
//! asks both batches per call on its own; the bare relay's Guardian floor
//! asks them around the call it relays.

use std::sync::Arc;
use std::time::Duration;

use acs_proxy::guardian::remote::RemoteGuardian;
use acs_proxy::guardian::{BatchAnswer, Guardian};
use acs_proxy::hooks::tool_call::{ToolCallRequest, ToolCallResult};
use acs_proxy::hooks::{HookPayload, HookRequest, Identity, IdentityDescriptor, Metadata};
use acs_proxy::jsonrpc::MessageTree;
use bytes::Bytes;
use uuid::Uuid;

/// The MCP revision the sessions announce.
pub const MCP_VERSION: &str = "2025-06-18";

/// How long one batch may take before the run is abandoned.
const BATCH_TIMEOUT: Duration = Duration::from_secs(5);

/// Which of a call's two batches to ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Half {
    /// The request's hooks, before it reaches the server.
    Request,
    /// The answer's hooks, before it reaches the agent.
    Answer,
}

/// A stdio session's metadata as acs-proxy fills it when no agent id or
/// environment is configured, the caller the OS user it runs as (here
/// root, as on the benchmark machine): the same members, about the same
/// bytes.
pub fn metadata() -> Metadata {
    Metadata {
        agent_id: "unknown-agent".into(),
        session_id: Uuid::new_v4(),
        environment: None,
        user: Some(Arc::new(Identity {
            user_id: "root".into(),
            roles: Vec::new(),
            tenant: None,
            descriptor: IdentityDescriptor::PosixUid {
                uid: 0,
                user: Some("root".into()),
            },
        })),
    }
}

/// The call and its answer, read once.
pub struct Call {
    tool: Arc<str>,
    request: HookPayload,
    request_step: HookPayload,
    response: HookPayload,
    response_step: HookPayload,
}

impl Call {
    /// A call whose request line is `request_bytes` long.
    pub fn new(request_bytes: usize) -> Result<Self, String> {
        let provider: Arc<str> = Arc::from("demo");
        let tool: Arc<str> = Arc::from("echo");
        let head = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":""#;
        let tail = r#""}}}"#;
        let text = "x".repeat(request_bytes.saturating_sub(head.len() + tail.len()));
        let request = read(format!("{head}{text}{tail}"))?;
        let response = read(format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{{"type":"text","text":"{text}"}}]}}}}"#
        ))?;
        let request_step = ToolCallRequest::read(&request, &provider)
            .ok_or("the tools/call names no tool")?
            .into();
        let response_step = ToolCallResult::read(
            &response,
            Arc::clone(&tool),
            &provider,
            Some(Uuid::nil()),
            0,
        )
        .into();
        Ok(Self {
            tool,
            request: request.into(),
            request_step,
            response: response.into(),
            response_step,
        })
    }

    /// Asks the call's two batches, each answered `allow` for both hooks.
    pub async fn decide(
        &self,
        guardian: &RemoteGuardian,
        metadata: &Metadata,
    ) -> Result<(), String> {
        self.ask(Half::Request, guardian, metadata).await?;
        self.ask(Half::Answer, guardian, metadata).await
    }

    /// Asks one batch; anything but `allow` for both hooks is an error.
    pub async fn ask(
        &self,
        half: Half,
        guardian: &RemoteGuardian,
        metadata: &Metadata,
    ) -> Result<(), String> {
        let (message, step, step_method) = match half {
            Half::Request => (&self.request, &self.request_step, "steps/toolCallRequest"),
            Half::Answer => (&self.response, &self.response_step, "steps/toolCallResult"),
        };
        let hooks = [
            self.hook("protocols/MCP/tools/call", message),
            self.hook(step_method, step),
        ];
        let asked: Vec<&HookRequest> = hooks.iter().collect();
        let answer = tokio::time::timeout(BATCH_TIMEOUT, guardian.decide_batch(&asked, metadata))
            .await
            .map_err(|_| format!("the Guardian did not answer within {BATCH_TIMEOUT:?}"))?;
        let BatchAnswer::Answers(answers) = answer else {
            return Err("the Guardian does not take batches".into());
        };
        for decision in answers {
            let decision = decision.map_err(|e| format!("decision: {e}"))?;
            if decision.decision.as_str() != "allow" {
                return Err(format!(
                    "the Guardian answered {}",
                    decision.decision.as_str()
                ));
            }
        }
        Ok(())
    }

    fn hook(&self, method: &'static str, payload: &HookPayload) -> HookRequest {
        HookRequest::new(method, payload.clone(), Some(Arc::clone(&self.tool)))
    }
}

fn read(line: String) -> Result<Arc<MessageTree>, String> {
    MessageTree::parse(Bytes::from(line))
        .map(Arc::new)
        .map_err(|e| format!("bench message: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_call_is_a_tools_call_line_of_the_asked_size() {
        for bytes in [200, 1000] {
            let call = Call::new(bytes).unwrap();
            let HookPayload::Message(request) = &call.request else {
                panic!("the wrapped hook carries the message itself");
            };
            assert_eq!(request.bytes().len(), bytes);
            assert_eq!(
                request
                    .root()
                    .get("params")
                    .and_then(|p| p.get("name"))
                    .and_then(|n| n.as_str()),
                Some("echo")
            );
            let hook = call.hook("steps/toolCallRequest", &call.request_step);
            assert_eq!(hook.tool.as_deref(), Some("echo"));
        }
    }
}
