//! The native tool steps synthesized for MCP `tools/call` (§5, DIGEST §6):
//! a request becomes `steps/toolCallRequest`, its response
//! `steps/toolCallResult`.
//!
//! Both payloads are read in place from the MCP message they describe
//! rather than copied out of it. Built as trees of their own they cost
//! about fifty allocations per call, while most hooks only need their
//! canonical form (for `request_hash`) and a policy lookup or two, which
//! [`ToolCallRequest`] and [`ToolCallResult`] answer from the message. The
//! payload as a tree ([`ToolCallRequest::to_value`]) is built for the
//! consumers that need one (a Rego input, a redaction's paths, a hook's
//! `params` kept in the audit entry).

use std::sync::Arc;

use serde_json::{json, Map, Number, Value};
use uuid::fmt::Hyphenated;
use uuid::Uuid;

use super::pointer::{walk_borrowed, PointerToken};
use crate::jcs::{self, JcsError, Sink};
use crate::jsonrpc::borrowed::{self, BorrowedJson, BorrowedObject};
use crate::jsonrpc::MessageTree;

/// The `steps/toolCallRequest` payload of a `tools/call` request: `tool`
/// (`params.name` and the route as `provider`) and each argument as
/// `{"value": …}`.
#[derive(Debug, Clone)]
pub struct ToolCallRequest {
    message: Arc<MessageTree>,
    provider: Arc<str>,
}

impl ToolCallRequest {
    /// The payload for `message`; `None` when the request names no tool
    /// (the wrapped hook still governs it).
    pub fn read(message: &Arc<MessageTree>, provider: &Arc<str>) -> Option<Self> {
        message.root().get("params")?.get("name")?.as_str()?;
        Some(Self {
            message: Arc::clone(message),
            provider: Arc::clone(provider),
        })
    }

    /// The length of the message it is read from.
    pub(super) fn message_len(&self) -> usize {
        self.message.bytes().len()
    }

    /// `tool.name`.
    pub fn name(&self) -> &str {
        self.message
            .root()
            .get("params")
            .and_then(|params| params.get("name"))
            .and_then(BorrowedJson::as_str)
            .unwrap_or_default()
    }

    /// The call's arguments; a missing or non-object `arguments` is none.
    fn arguments(&self) -> Option<&BorrowedObject<'_>> {
        self.message
            .root()
            .get("params")?
            .get("arguments")?
            .as_object()
    }

    /// The payload as a tree.
    pub fn to_value(&self) -> Value {
        let arguments: Map<String, Value> = self
            .arguments()
            .map(|args| {
                args.members()
                    .iter()
                    .map(|(key, value)| (key.to_string(), json!({ "value": value.to_value() })))
                    .collect()
            })
            .unwrap_or_default();
        json!({
            "tool": { "name": self.name(), "provider": &*self.provider },
            "arguments": arguments,
        })
    }

    /// The payload's canonical (RFC 8785) form: the bytes of
    /// [`jcs::write_value`] over [`Self::to_value`].
    pub fn write_canonical<S: Sink>(&self, sink: &mut S) -> Result<(), JcsError> {
        sink.put(b"{\"arguments\":");
        match self.arguments() {
            Some(arguments) => {
                borrowed::write_object_with(sink, arguments, &[], |sink, _, value| {
                    sink.put(b"{\"value\":");
                    borrowed::write_canonical(sink, value)?;
                    sink.put(b"}");
                    Ok(())
                })?;
            }
            None => sink.put(b"{}"),
        }
        sink.put(b",");
        write_tool(sink, self.name(), &self.provider);
        sink.put(b"}");
        Ok(())
    }
}

impl WrappedValues for ToolCallRequest {
    const CONTAINER: &'static str = "arguments";

    fn wrapped(&self, token: &PointerToken) -> Option<&BorrowedJson<'_>> {
        self.arguments()?.get(token.key.as_str())
    }

    fn any_wrapped(&self, test: impl Fn(&BorrowedJson<'_>) -> bool) -> bool {
        self.arguments()
            .is_some_and(|args| args.members().iter().any(|(_, value)| test(value)))
    }
}

/// Where one of a result's outputs was taken from in the response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OutputSource {
    /// `result.content[i].text` of a text content item.
    ContentText(usize),
    /// `result.content[i]`, a content item of another type, whole.
    ContentItem(usize),
    /// `result.structuredContent`.
    Structured,
    /// `error.message`.
    ErrorMessage,
    /// `error.data`.
    ErrorData,
}

impl OutputSource {
    /// The RFC 6901 pointer into the response.
    fn pointer(self) -> String {
        match self {
            Self::ContentText(index) => format!("/result/content/{index}/text"),
            Self::ContentItem(index) => format!("/result/content/{index}"),
            Self::Structured => "/result/structuredContent".into(),
            Self::ErrorMessage => "/error/message".into(),
            Self::ErrorData => "/error/data".into(),
        }
    }
}

/// The `steps/toolCallResult` payload of a `tools/call` response.
///
/// Outputs are text contents first-class (their text), other content
/// items whole, then `structuredContent`, then an error's message and
/// data; `exit_status` is `failure` for an error or `isError`.
#[derive(Debug, Clone)]
pub struct ToolCallResult {
    response: Arc<MessageTree>,
    tool: Arc<str>,
    provider: Arc<str>,
    request_ref: Option<Uuid>,
    duration_ms: u64,
}

impl ToolCallResult {
    /// The payload for `response`, the answer to a call of `tool` that the
    /// hook `request_ref` let through and that took `duration_ms`.
    pub fn read(
        response: &Arc<MessageTree>,
        tool: Arc<str>,
        provider: &Arc<str>,
        request_ref: Option<Uuid>,
        duration_ms: u64,
    ) -> Self {
        Self {
            response: Arc::clone(response),
            tool,
            provider: Arc::clone(provider),
            request_ref,
            duration_ms,
        }
    }

    /// The length of the response it is read from.
    pub(super) fn message_len(&self) -> usize {
        self.response.bytes().len()
    }

    /// Each output with where it came from, in payload order.
    fn outputs(&self) -> impl Iterator<Item = (OutputSource, &BorrowedJson<'_>)> {
        let response = self.response.root();
        let result = response.get("result");
        let error = if result.is_none() {
            response.get("error")
        } else {
            None
        };
        let content = result
            .and_then(|result| result.get("content"))
            .and_then(BorrowedJson::as_array)
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(index, item)| match item.get("text") {
                Some(text) if item.get("type").and_then(BorrowedJson::as_str) == Some("text") => {
                    (OutputSource::ContentText(index), text)
                }
                _ => (OutputSource::ContentItem(index), item),
            });
        let structured = result
            .and_then(|result| result.get("structuredContent"))
            .map(|value| (OutputSource::Structured, value));
        let message = error
            .and_then(|error| error.get("message"))
            .map(|value| (OutputSource::ErrorMessage, value));
        let data = error
            .and_then(|error| error.get("data"))
            .map(|value| (OutputSource::ErrorData, value));
        content.chain(structured).chain(message).chain(data)
    }

    /// Whether the call failed: an error, `isError`, or neither a result
    /// nor an error.
    fn failed(&self) -> bool {
        match self.response.root().get("result") {
            Some(result) => result
                .get("isError")
                .and_then(BorrowedJson::as_bool)
                .unwrap_or(false),
            None => true,
        }
    }

    fn exit_status(&self) -> &'static str {
        if self.failed() {
            "failure"
        } else {
            "success"
        }
    }

    /// `sources[i]` is the RFC 6901 pointer, into the response, of
    /// `outputs[i]`: how a redaction of an output is carried onto the
    /// response that is actually delivered.
    pub fn sources(&self) -> Vec<String> {
        self.outputs().map(|(source, _)| source.pointer()).collect()
    }

    /// The payload as a tree.
    pub fn to_value(&self) -> Value {
        let outputs: Vec<Value> = self
            .outputs()
            .map(|(_, value)| json!({ "value": value.to_value() }))
            .collect();
        let mut payload = json!({
            "tool": { "name": &*self.tool, "provider": &*self.provider },
            "exit_status": self.exit_status(),
            "outputs": outputs,
            "duration_ms": self.duration_ms,
        });
        if let Some(request_ref) = self.request_ref {
            payload["request_id_ref"] = Value::from(request_ref.to_string());
        }
        payload
    }

    /// The payload's canonical (RFC 8785) form: the bytes of
    /// [`jcs::write_value`] over [`Self::to_value`].
    pub fn write_canonical<S: Sink>(&self, sink: &mut S) -> Result<(), JcsError> {
        sink.put(b"{\"duration_ms\":");
        write_u64(sink, self.duration_ms)?;
        sink.put(b",\"exit_status\":");
        jcs::write_str(sink, self.exit_status());
        sink.put(b",\"outputs\":[");
        for (index, (_, value)) in self.outputs().enumerate() {
            if index > 0 {
                sink.put(b",");
            }
            sink.put(b"{\"value\":");
            borrowed::write_canonical(sink, value)?;
            sink.put(b"}");
        }
        sink.put(b"]");
        if let Some(request_ref) = self.request_ref {
            let mut uuid = Uuid::encode_buffer();
            sink.put(b",\"request_id_ref\":");
            jcs::write_str(
                sink,
                Hyphenated::from_uuid(request_ref).encode_lower(&mut uuid),
            );
        }
        sink.put(b",");
        write_tool(sink, &self.tool, &self.provider);
        sink.put(b"}");
        Ok(())
    }

    fn output(&self, index: usize) -> Option<&BorrowedJson<'_>> {
        self.outputs().nth(index).map(|(_, value)| value)
    }
}

impl WrappedValues for ToolCallResult {
    const CONTAINER: &'static str = "outputs";

    fn wrapped(&self, token: &PointerToken) -> Option<&BorrowedJson<'_>> {
        token.index.and_then(|index| self.output(index))
    }

    fn any_wrapped(&self, test: impl Fn(&BorrowedJson<'_>) -> bool) -> bool {
        self.outputs().any(|(_, value)| test(value))
    }
}

/// A step payload whose member `/<CONTAINER>` holds values of its message,
/// each wrapped as `{"value": …}`: the arguments of a request, the outputs
/// of a result. A pointer inside one of those values is answered from the
/// message; any other pointer only the payload's tree can answer.
pub(super) trait WrappedValues {
    /// `arguments` or `outputs`.
    const CONTAINER: &'static str;

    /// The message value `/<CONTAINER>/<token>/value` stands for.
    fn wrapped(&self, token: &PointerToken) -> Option<&BorrowedJson<'_>>;

    /// Whether one of the message values under `/<CONTAINER>` passes `test`.
    fn any_wrapped(&self, test: impl Fn(&BorrowedJson<'_>) -> bool) -> bool;

    /// Where `/<CONTAINER>/<member>/value<rest>` lies in the message:
    /// `Some` with the value found (or `None`) for a pointer of that form,
    /// `None` for any other pointer.
    fn find_in_message(&self, tokens: &[PointerToken]) -> Option<Option<&BorrowedJson<'_>>> {
        match tokens {
            [container, member, value, rest @ ..]
                if container.key == Self::CONTAINER && value.key == "value" =>
            {
                Some(
                    self.wrapped(member)
                        .and_then(|found| walk_borrowed(found, rest)),
                )
            }
            _ => None,
        }
    }

    /// Whether one of the message values holding the string leaves at or
    /// under the pointer `tokens` passes `test`, for a pointer inside
    /// `/<CONTAINER>`; `None` for any other pointer.
    fn any_under(
        &self,
        tokens: &[PointerToken],
        test: impl Fn(&BorrowedJson<'_>) -> bool,
    ) -> Option<bool> {
        match tokens {
            [container, rest @ ..] if container.key == Self::CONTAINER => Some(match rest {
                [] => self.any_wrapped(test),
                [member] => self.wrapped(member).is_some_and(test),
                _ => self.find_in_message(tokens)?.is_some_and(test),
            }),
            _ => None,
        }
    }
}

/// `"tool":{"name":…,"provider":…}`, the last member of both payloads.
fn write_tool<S: Sink>(sink: &mut S, name: &str, provider: &str) {
    sink.put(b"\"tool\":{\"name\":");
    jcs::write_str(sink, name);
    sink.put(b",\"provider\":");
    jcs::write_str(sink, provider);
    sink.put(b"}");
}

/// A whole number in canonical form: its digits up to 2^53, past which
/// JSON numbers are doubles and RFC 8785 spells them as one.
fn write_u64<S: Sink>(sink: &mut S, value: u64) -> Result<(), JcsError> {
    const EXACT: u64 = 1 << 53;
    if value <= EXACT {
        sink.put(itoa::Buffer::new().format(value).as_bytes());
        Ok(())
    } else {
        jcs::write_number(sink, &Number::from(value))
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    /// `message` as the relay reads it off the wire.
    fn tree(message: Value) -> Arc<MessageTree> {
        Arc::new(MessageTree::parse(Bytes::from(message.to_string())).unwrap())
    }

    /// What a pointer found in the message, as a `Value`.
    fn owned(found: Option<Option<&BorrowedJson<'_>>>) -> Option<Option<Value>> {
        found.map(|found| found.map(BorrowedJson::to_value))
    }

    /// A borrowed value's compact text.
    fn text(value: &BorrowedJson<'_>) -> String {
        serde_json::to_string(value).unwrap()
    }

    fn provider() -> Arc<str> {
        Arc::from("demo")
    }

    fn request(message: Value) -> Option<ToolCallRequest> {
        ToolCallRequest::read(&tree(message), &provider())
    }

    fn result(response: Value, request_ref: Option<Uuid>, duration_ms: u64) -> ToolCallResult {
        ToolCallResult::read(
            &tree(response),
            Arc::from("echo"),
            &provider(),
            request_ref,
            duration_ms,
        )
    }

    fn canonical(write: impl Fn(&mut Vec<u8>) -> Result<(), JcsError>) -> String {
        let mut out = Vec::new();
        write(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn tokens(pointer: &str) -> Box<[PointerToken]> {
        PointerToken::split(pointer)
    }

    #[test]
    fn request_payload_wraps_each_argument() {
        let message = json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
            "params":{"name":"echo","arguments":{"text":"hi","n":2}}});
        let payload = request(message).unwrap().to_value();
        assert_eq!(payload["tool"]["name"], "echo");
        assert_eq!(payload["tool"]["provider"], "demo");
        assert_eq!(payload["arguments"]["text"]["value"], "hi");
        assert_eq!(payload["arguments"]["n"]["value"], 2);
    }

    #[test]
    fn request_without_name_has_no_step() {
        let message = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}});
        assert!(request(message).is_none());
        let message = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":3}});
        assert!(request(message).is_none());
    }

    #[test]
    fn request_canonical_form_is_the_trees() {
        let messages = [
            json!({"params":{"name":"echo","arguments":{"text":"hi","n":2,"a\u{e9}":[1,{"z":null,"b":true}]}}}),
            json!({"params":{"name":"e\"cho\u{1f600}","arguments":{"\u{1f600}":1,"\u{e000}":2,"":{"x":1e3}}}}),
            json!({"params":{"name":"echo"}}),
            json!({"params":{"name":"echo","arguments":["not","an","object"]}}),
            json!({"params":{"name":"echo","arguments":{}}}),
        ];
        for message in messages {
            let step = request(message).unwrap();
            let expected = String::from_utf8(jcs::canonical_bytes(&step.to_value()).unwrap());
            assert_eq!(
                canonical(|out| step.write_canonical(out)),
                expected.unwrap()
            );
        }
    }

    #[test]
    fn request_pointers_into_arguments_read_the_message() {
        let step = request(json!({"params":{"name":"run","arguments":{
            "command":"rm -rf /","opts":{"deep":["a","b"]}}}}))
        .unwrap();
        let found = |pointer| owned(step.find_in_message(&tokens(pointer)));
        assert_eq!(
            found("/arguments/command/value"),
            Some(Some(json!("rm -rf /")))
        );
        assert_eq!(
            found("/arguments/opts/value/deep/1"),
            Some(Some(json!("b")))
        );
        assert_eq!(found("/arguments/missing/value"), Some(None));
        assert_eq!(
            found("/arguments/command"),
            None,
            "a wrapper only the tree has"
        );
        assert_eq!(found("/tool/name"), None);
        let under = |pointer, needle| {
            step.any_under(&tokens(pointer), |value: &BorrowedJson<'_>| {
                text(value).contains(needle)
            })
        };
        assert_eq!(under("/arguments", "rm"), Some(true));
        assert_eq!(under("/arguments/opts", "rm"), Some(false));
        assert_eq!(under("/arguments/opts/value/deep", "b"), Some(true));
        assert_eq!(under("/arguments/none", ""), Some(false));
        assert_eq!(under("", "run"), None);
        assert_eq!(under("/tool", "run"), None);
    }

    #[test]
    fn result_outputs_point_back_into_the_response() {
        let response = json!({"jsonrpc":"2.0","id":1,"result":{"content":[
            {"type":"text","text":"hello"},{"type":"image","data":"AA==","mimeType":"image/png"}],
            "structuredContent":{"k":1}}});
        let step = result(response, None, 3);
        let payload = step.to_value();
        assert_eq!(payload["exit_status"], "success");
        assert_eq!(payload["outputs"][0]["value"], "hello");
        assert_eq!(payload["outputs"][1]["value"]["mimeType"], "image/png");
        assert_eq!(
            step.sources(),
            vec![
                "/result/content/0/text",
                "/result/content/1",
                "/result/structuredContent"
            ]
        );
    }

    #[test]
    fn error_and_is_error_are_failures() {
        let response = json!({"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"boom"}});
        let step = result(response, Some(Uuid::nil()), 0);
        assert_eq!(step.to_value()["exit_status"], "failure");
        assert_eq!(step.sources(), vec!["/error/message"]);
        let response = json!({"jsonrpc":"2.0","id":1,"result":{"isError":true,"content":[]}});
        assert_eq!(
            result(response, None, 0).to_value()["exit_status"],
            "failure"
        );
        let neither = json!({"jsonrpc":"2.0","id":1});
        assert_eq!(
            result(neither, None, 0).to_value()["exit_status"],
            "failure"
        );
    }

    #[test]
    fn result_canonical_form_is_the_trees() {
        let responses = [
            serde_json::from_str(
                r#"{"result":{"content":[{"type":"text","text":"h\u00e9llo\n"},{"type":"image","data":"AA=="}],
                "structuredContent":{"b":[1.5,-0.0,1e400,12345678901234567890],"a":"x"}}}"#,
            )
            .unwrap(),
            serde_json::from_str(r#"{"result":{"structuredContent":{"b":[1.5,-0.0,1e2]}}}"#).unwrap(),
            json!({"result":{"isError":true}}),
            json!({"error":{"code":-32000,"message":"boom","data":{"why":["a"]}}}),
            json!({"result":{"content":[{"type":"text"}],"structuredContent":null}}),
            json!({}),
        ];
        for (index, response) in responses.into_iter().enumerate() {
            for (request_ref, duration_ms) in [(None, 0), (Some(Uuid::new_v4()), 1 << 60)] {
                let step = result(response.clone(), request_ref, duration_ms + index as u64);
                let expected = jcs::canonical_bytes(&step.to_value()).map(String::from_utf8);
                let written = {
                    let mut out = Vec::new();
                    step.write_canonical(&mut out)
                        .map(|()| String::from_utf8(out))
                };
                match (written, expected) {
                    (Ok(written), Ok(expected)) => assert_eq!(written.unwrap(), expected.unwrap()),
                    (Err(_), Err(_)) => {}
                    (written, expected) => panic!("{written:?} against {expected:?}"),
                }
            }
        }
    }

    #[test]
    fn result_pointers_into_outputs_read_the_response() {
        let step = result(
            json!({"result":{"content":[{"type":"text","text":"a"},{"type":"image","data":"AA=="}],
                "structuredContent":{"k":[1,2]}}}),
            None,
            0,
        );
        let found = |pointer| owned(step.find_in_message(&tokens(pointer)));
        assert_eq!(found("/outputs/0/value"), Some(Some(json!("a"))));
        assert_eq!(found("/outputs/1/value/data"), Some(Some(json!("AA=="))));
        assert_eq!(found("/outputs/2/value/k/1"), Some(Some(json!(2))));
        assert_eq!(found("/outputs/3/value"), Some(None));
        assert_eq!(found("/outputs/x/value"), Some(None));
        assert_eq!(found("/exit_status"), None);
        let under = |pointer, needle| {
            step.any_under(&tokens(pointer), |value: &BorrowedJson<'_>| {
                text(value).contains(needle)
            })
        };
        assert_eq!(under("/outputs", "AA=="), Some(true));
        assert_eq!(under("/outputs/1", "a"), Some(true));
        assert_eq!(under("/outputs/1", "\"a\""), Some(false));
        assert_eq!(under("/outputs/9", ""), Some(false));
        assert_eq!(under("/tool", "run"), None);
    }
}
