//! JSON-RPC 2.0 framing: classifying incoming messages and building replies.

use serde_json::{json, Map, Value};

/// Invalid JSON was received.
pub const PARSE_ERROR: i64 = -32700;
/// The JSON sent is not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// The method does not exist.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Invalid method parameters.
pub const INVALID_PARAMS: i64 = -32602;
/// MCP's "resource not found".
pub const RESOURCE_NOT_FOUND: i64 = -32002;

/// One incoming JSON-RPC message, classified.
#[derive(Debug)]
pub enum Incoming {
    /// A request: it carries an id and expects exactly one response.
    Request {
        /// The request id, echoed in the response.
        id: Value,
        /// The method name.
        method: String,
        /// The params, `Value::Null` when absent.
        params: Value,
    },
    /// A notification: no id, no response.
    Notification {
        /// The method name.
        method: String,
        /// The params, `Value::Null` when absent.
        params: Value,
    },
    /// The client's response to a request this server sent.
    Response {
        /// The id of the server's request.
        id: Value,
        /// `Ok(result)` or `Err(error object)`.
        outcome: Result<Value, Value>,
    },
    /// Not a valid JSON-RPC message; answer with this error response.
    Invalid(Value),
}

/// Classifies one parsed JSON value (not an array) as a JSON-RPC message.
pub fn classify(value: Value) -> Incoming {
    let Value::Object(mut obj) = value else {
        return Incoming::Invalid(error(Value::Null, INVALID_REQUEST, "Invalid Request"));
    };
    let id = obj.remove("id");
    let id_ok = matches!(id, Some(Value::String(_) | Value::Number(_)));
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid(id, id_ok, "Invalid Request: jsonrpc must be \"2.0\"");
    }
    match obj.remove("method") {
        Some(Value::String(method)) => {
            let params = obj.remove("params").unwrap_or(Value::Null);
            match id {
                None => Incoming::Notification { method, params },
                Some(id) if id_ok => Incoming::Request { id, method, params },
                Some(_) => invalid(None, false, "Invalid Request: bad id"),
            }
        }
        Some(_) => invalid(id, id_ok, "Invalid Request: method must be a string"),
        None => classify_response(obj, id, id_ok),
    }
}

/// Classifies an object without `method`: a response to one of our requests.
fn classify_response(mut obj: Map<String, Value>, id: Option<Value>, id_ok: bool) -> Incoming {
    let outcome = match (obj.remove("result"), obj.remove("error")) {
        (Some(result), None) => Ok(result),
        (None, Some(err)) => Err(err),
        _ => return invalid(id, id_ok, "Invalid Request"),
    };
    match id {
        Some(id) if id_ok => Incoming::Response { id, outcome },
        _ => invalid(None, false, "Invalid Request: response without a valid id"),
    }
}

/// An `Invalid` message answering with the id when it was usable, else null.
fn invalid(id: Option<Value>, id_ok: bool, message: &str) -> Incoming {
    let id = if id_ok {
        id.unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    Incoming::Invalid(error(id, INVALID_REQUEST, message))
}

/// A success response.
pub fn response(id: Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// An error response without `data`.
pub fn error(id: Value, code: i64, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

/// A notification; `params` is left out when `None`.
pub fn notification(method: &str, params: Option<Value>) -> Value {
    match params {
        Some(params) => json!({ "jsonrpc": "2.0", "method": method, "params": params }),
        None => json!({ "jsonrpc": "2.0", "method": method }),
    }
}

/// A request sent by this server to the client.
pub fn request(id: &str, method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
}

/// A stable map key for a request id (`"7"` and `7` stay distinct).
pub fn id_key(id: &Value) -> String {
    id.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_requests_notifications_and_responses() {
        let req = classify(json!({"jsonrpc":"2.0","id":1,"method":"ping"}));
        assert!(matches!(req, Incoming::Request { ref method, .. } if method == "ping"));
        let note = classify(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        assert!(matches!(note, Incoming::Notification { .. }));
        let resp = classify(json!({"jsonrpc":"2.0","id":"srv-1","result":{}}));
        assert!(matches!(resp, Incoming::Response { outcome: Ok(_), .. }));
    }

    #[test]
    fn rejects_malformed_messages() {
        for bad in [
            json!(1),
            json!({"id":1,"method":"ping"}),
            json!({"jsonrpc":"2.0","id":1}),
        ] {
            assert!(matches!(classify(bad), Incoming::Invalid(_)));
        }
        let Incoming::Invalid(reply) = classify(json!({"jsonrpc":"2.0","id":{},"method":"x"}))
        else {
            panic!("expected invalid");
        };
        assert_eq!(reply["id"], Value::Null);
    }
}
