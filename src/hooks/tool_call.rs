//! The native tool steps synthesized for MCP `tools/call` (§5, DIGEST §6):
//! a request becomes `steps/toolCallRequest`, its response
//! `steps/toolCallResult`.

use serde_json::{json, Map, Value};
use uuid::Uuid;

/// The `steps/toolCallRequest` payload for a `tools/call` request message:
/// `tool.name` from `params.name`, each argument as `{value}`. `None` when
/// the request names no tool (the wrapped hook still governs it).
pub fn request_payload(message: &Value, provider: &str) -> Option<Value> {
    let params = message.get("params")?;
    let name = params.get("name")?.as_str()?;
    let arguments: Map<String, Value> = params
        .get("arguments")
        .and_then(Value::as_object)
        .map(|args| {
            args.iter()
                .map(|(key, value)| (key.clone(), json!({ "value": value })))
                .collect()
        })
        .unwrap_or_default();
    Some(json!({
        "tool": { "name": name, "provider": provider },
        "arguments": arguments,
    }))
}

/// A `steps/toolCallResult` payload and, for each `outputs[i]`, the pointer
/// into the MCP response it was taken from (so a redaction of an output can
/// be applied to the message that is actually delivered).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The hook payload.
    pub payload: Value,
    /// `sources[i]` is the RFC 6901 pointer, into the response message, of `outputs[i]`.
    pub sources: Vec<String>,
}

/// Builds the `steps/toolCallResult` payload from a `tools/call` response.
/// Outputs are text contents first-class (their text), other content items
/// whole, then `structuredContent`, then an error's message and data.
pub fn result_payload(
    response: &Value,
    tool: &str,
    provider: &str,
    request_ref: Option<Uuid>,
    duration_ms: u64,
) -> ToolResult {
    let mut outputs = Vec::new();
    let mut sources = Vec::new();
    let mut push = |value: &Value, pointer: String| {
        outputs.push(json!({ "value": value }));
        sources.push(pointer);
    };
    let failed = match (response.get("result"), response.get("error")) {
        (Some(result), _) => {
            collect_result_outputs(result, &mut push);
            result
                .get("isError")
                .and_then(Value::as_bool)
                .unwrap_or(false)
        }
        (None, Some(error)) => {
            if let Some(message) = error.get("message") {
                push(message, "/error/message".into());
            }
            if let Some(data) = error.get("data") {
                push(data, "/error/data".into());
            }
            true
        }
        (None, None) => true,
    };
    let mut payload = json!({
        "tool": { "name": tool, "provider": provider },
        "exit_status": if failed { "failure" } else { "success" },
        "outputs": outputs,
        "duration_ms": duration_ms,
    });
    if let Some(request_ref) = request_ref {
        payload["request_id_ref"] = Value::from(request_ref.to_string());
    }
    ToolResult { payload, sources }
}

fn collect_result_outputs(result: &Value, push: &mut impl FnMut(&Value, String)) {
    if let Some(content) = result.get("content").and_then(Value::as_array) {
        for (index, item) in content.iter().enumerate() {
            match item.get("text") {
                Some(text) if item.get("type").and_then(Value::as_str) == Some("text") => {
                    push(text, format!("/result/content/{index}/text"))
                }
                _ => push(item, format!("/result/content/{index}")),
            }
        }
    }
    if let Some(structured) = result.get("structuredContent") {
        push(structured, "/result/structuredContent".into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_payload_wraps_each_argument() {
        let message = json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
            "params":{"name":"echo","arguments":{"text":"hi","n":2}}});
        let payload = request_payload(&message, "demo").unwrap();
        assert_eq!(payload["tool"]["name"], "echo");
        assert_eq!(payload["arguments"]["text"]["value"], "hi");
        assert_eq!(payload["arguments"]["n"]["value"], 2);
    }

    #[test]
    fn request_without_name_has_no_step() {
        let message = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}});
        assert!(request_payload(&message, "demo").is_none());
    }

    #[test]
    fn result_outputs_point_back_into_the_response() {
        let response = json!({"jsonrpc":"2.0","id":1,"result":{"content":[
            {"type":"text","text":"hello"},{"type":"image","data":"AA==","mimeType":"image/png"}],
            "structuredContent":{"k":1}}});
        let result = result_payload(&response, "echo", "demo", None, 3);
        assert_eq!(result.payload["exit_status"], "success");
        assert_eq!(result.payload["outputs"][0]["value"], "hello");
        assert_eq!(
            result.sources,
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
        let result = result_payload(&response, "echo", "demo", Some(Uuid::nil()), 0);
        assert_eq!(result.payload["exit_status"], "failure");
        assert_eq!(result.sources, vec!["/error/message"]);
        let response = json!({"jsonrpc":"2.0","id":1,"result":{"isError":true,"content":[]}});
        let result = result_payload(&response, "echo", "demo", None, 0);
        assert_eq!(result.payload["exit_status"], "failure");
    }
}
