//! `params.payload` of a hook: a tree the proxy built, the MCP message
//! itself (a wrapped hook), or one of the tool steps read in place from
//! the message it describes (see [`super::tool_call`]).
//!
//! Consumers ask the payload for what they need rather than for a tree:
//! its canonical form ([`HookPayload::write_canonical`], for
//! `request_hash` and signing), the value at a pointer
//! ([`HookPayload::find`], for rule conditions), the string leaves under a
//! pointer ([`HookPayload::any_string_under`], for redactions). A tool
//! step answers those from its message where the pointer lies inside an
//! argument or an output, and from its tree, built once on first use,
//! otherwise.

use std::sync::{Arc, OnceLock};

use serde_json::Value;

use super::pointer::{walk, walk_borrowed, Found, PointerToken};
use super::tool_call::{ToolCallRequest, ToolCallResult, WrappedValues};
use crate::jcs::{self, JcsError, Sink};
use crate::jsonrpc::{borrowed, BorrowedJson, MessageTree};

/// A hook's payload. Cloning shares it.
#[derive(Debug, Clone)]
pub enum HookPayload {
    /// A payload the proxy builds as a tree.
    Tree(Arc<Value>),
    /// The MCP message itself, for wrapped hooks: read from its borrowed
    /// tree, with a `Value` built only for a consumer that needs one.
    Message(Arc<MessageTree>),
    /// A tool step read from its `tools/call` message.
    Step(Arc<ToolStep>),
}

/// A tool step's payload and, once something needed it, its tree.
#[derive(Debug)]
pub struct ToolStep {
    step: Step,
    tree: OnceLock<Value>,
}

#[derive(Debug)]
enum Step {
    Request(ToolCallRequest),
    Result(ToolCallResult),
}

impl HookPayload {
    /// The payload as a tree; a tool step builds it on first use.
    pub fn tree(&self) -> &Value {
        match self {
            Self::Tree(tree) => tree,
            Self::Message(message) => message.value(),
            Self::Step(step) => step.tree.get_or_init(|| match &step.step {
                Step::Request(request) => request.to_value(),
                Step::Result(result) => result.to_value(),
            }),
        }
    }

    /// The `steps/toolCallResult` this payload is, if it is one read from
    /// its response.
    pub fn tool_result(&self) -> Option<&ToolCallResult> {
        match self {
            Self::Step(step) => match &step.step {
                Step::Result(result) => Some(result),
                Step::Request(_) => None,
            },
            Self::Tree(_) | Self::Message(_) => None,
        }
    }

    /// The length of the MCP message the payload is read from; `None` for
    /// a tree the proxy built.
    pub fn message_len(&self) -> Option<usize> {
        match self {
            Self::Tree(_) => None,
            Self::Message(message) => Some(message.bytes().len()),
            Self::Step(step) => Some(match &step.step {
                Step::Request(request) => request.message_len(),
                Step::Result(result) => result.message_len(),
            }),
        }
    }

    /// Writes the payload's canonical (RFC 8785) form.
    pub fn write_canonical<S: Sink>(&self, sink: &mut S) -> Result<(), JcsError> {
        match self {
            Self::Tree(tree) => jcs::write_value(sink, tree),
            Self::Message(message) => borrowed::write_canonical(sink, message.root()),
            Self::Step(step) => match &step.step {
                Step::Request(request) => request.write_canonical(sink),
                Step::Result(result) => result.write_canonical(sink),
            },
        }
    }

    /// The value at the pointer spelled by `tokens`, as `Value::pointer`
    /// finds it in [`Self::tree`].
    pub fn find(&self, tokens: &[PointerToken]) -> Option<Found<'_>> {
        match self {
            Self::Tree(tree) => walk(tree, tokens).map(Found::Value),
            Self::Message(message) => walk_borrowed(message.root(), tokens).map(Found::Borrowed),
            Self::Step(step) => {
                let in_message = match &step.step {
                    Step::Request(request) => request.find_in_message(tokens),
                    Step::Result(result) => result.find_in_message(tokens),
                };
                match in_message {
                    Some(found) => found.map(Found::Borrowed),
                    None => walk(self.tree(), tokens).map(Found::Value),
                }
            }
        }
    }

    /// Whether a string leaf at or under the pointer spelled by `tokens`
    /// passes `test`.
    pub fn any_string_under(&self, tokens: &[PointerToken], test: impl Fn(&str) -> bool) -> bool {
        if let Self::Message(message) = self {
            return walk_borrowed(message.root(), tokens)
                .is_some_and(|value| any_borrowed_string_leaf(value, &test));
        }
        if let Self::Step(step) = self {
            let leaves = |value: &BorrowedJson<'_>| any_borrowed_string_leaf(value, &test);
            let in_message = match &step.step {
                Step::Request(request) => request.any_under(tokens, leaves),
                Step::Result(result) => result.any_under(tokens, leaves),
            };
            if let Some(found) = in_message {
                return found;
            }
        }
        walk(self.tree(), tokens).is_some_and(|value| any_string_leaf(value, &test))
    }
}

impl From<Value> for HookPayload {
    fn from(value: Value) -> Self {
        Self::Tree(Arc::new(value))
    }
}

impl From<Arc<Value>> for HookPayload {
    fn from(value: Arc<Value>) -> Self {
        Self::Tree(value)
    }
}

impl From<Arc<MessageTree>> for HookPayload {
    fn from(message: Arc<MessageTree>) -> Self {
        Self::Message(message)
    }
}

impl From<ToolCallRequest> for HookPayload {
    fn from(request: ToolCallRequest) -> Self {
        Self::Step(Arc::new(ToolStep {
            step: Step::Request(request),
            tree: OnceLock::new(),
        }))
    }
}

impl From<ToolCallResult> for HookPayload {
    fn from(result: ToolCallResult) -> Self {
        Self::Step(Arc::new(ToolStep {
            step: Step::Result(result),
            tree: OnceLock::new(),
        }))
    }
}

/// Whether a string leaf of `value` passes `test`.
fn any_string_leaf(value: &Value, test: &impl Fn(&str) -> bool) -> bool {
    match value {
        Value::String(text) => test(text),
        Value::Array(items) => items.iter().any(|item| any_string_leaf(item, test)),
        Value::Object(members) => members.values().any(|item| any_string_leaf(item, test)),
        _ => false,
    }
}

/// Whether a string leaf of a borrowed `value` passes `test`.
fn any_borrowed_string_leaf(value: &BorrowedJson<'_>, test: &impl Fn(&str) -> bool) -> bool {
    match value {
        BorrowedJson::String(text) => test(text),
        BorrowedJson::Array(items) => items
            .iter()
            .any(|item| any_borrowed_string_leaf(item, test)),
        BorrowedJson::Object(members) => members
            .members()
            .iter()
            .any(|(_, item)| any_borrowed_string_leaf(item, test)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use serde_json::json;
    use uuid::Uuid;

    use super::*;

    /// `message` as the relay reads it off the wire.
    fn message(message: Value) -> Arc<MessageTree> {
        Arc::new(MessageTree::parse(Bytes::from(message.to_string())).unwrap())
    }

    fn tokens(pointer: &str) -> Box<[PointerToken]> {
        PointerToken::split(pointer)
    }

    fn steps() -> Vec<HookPayload> {
        let provider: Arc<str> = Arc::from("demo");
        let request = message(json!({"params":{"name":"run","arguments":{
            "command":"rm -rf /tmp","a/b":"slash","opts":{"deep":["a","ssn 123-45-6789"]},"n":3}}}));
        let response = message(json!({"result":{"content":[
            {"type":"text","text":"ssn 123-45-6789"},{"type":"image","data":"AA=="}],
            "structuredContent":{"k":[1,"x"]}}}));
        vec![
            ToolCallRequest::read(&request, &provider).unwrap().into(),
            ToolCallResult::read(&response, Arc::from("run"), &provider, Some(Uuid::nil()), 7)
                .into(),
        ]
    }

    /// A step answers every pointer as its tree would, whether it reads
    /// the message or falls back to the tree.
    #[test]
    fn a_step_finds_what_its_tree_holds() {
        let pointers = [
            "",
            "/tool",
            "/tool/name",
            "/tool/provider",
            "/arguments",
            "/arguments/command",
            "/arguments/command/value",
            "/arguments/opts/value/deep/1",
            "/arguments/opts/value/deep/01",
            "/arguments/n/value",
            "/arguments/missing/value",
            "/outputs",
            "/outputs/0",
            "/outputs/0/value",
            "/outputs/1/value/data",
            "/outputs/2/value/k/1",
            "/outputs/3/value",
            "/outputs/+1/value",
            "/arguments/a~1b/value",
            "/arguments/opts/value/deep",
            "/exit_status",
            "/duration_ms",
            "/request_id_ref",
        ];
        for step in steps() {
            let tree = HookPayload::from(step.tree().clone());
            for pointer in pointers {
                assert_eq!(
                    step.find(&tokens(pointer)).map(|found| found.to_value()),
                    tree.tree().pointer(pointer).cloned(),
                    "{pointer}"
                );
                for needle in ["123-45", "rm -rf", "run", "demo", "AA==", "x", "nothing"] {
                    let test = |text: &str| text.contains(needle);
                    assert_eq!(
                        step.any_string_under(&tokens(pointer), test),
                        tree.any_string_under(&tokens(pointer), test),
                        "{pointer} {needle}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_steps_canonical_form_is_its_trees() {
        for step in steps() {
            let mut written = Vec::new();
            step.write_canonical(&mut written).unwrap();
            assert_eq!(written, jcs::canonical_bytes(step.tree()).unwrap());
        }
    }
}
