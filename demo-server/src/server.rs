//! The MCP server: per-session state and method dispatch.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};

use serde_json::{json, Map, Value};

use crate::catalog;
use crate::output::Output;
use crate::rpc::{
    self, Incoming, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR,
    RESOURCE_NOT_FOUND,
};
use crate::slow::SlowCall;
use crate::tools::{self, error_result, text_result, ToolOutcome};

/// The MCP revisions this server speaks, oldest first.
pub const SUPPORTED_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// The revision offered when the client asks for one not in `SUPPORTED_VERSIONS`.
pub const FALLBACK_VERSION: &str = "2025-06-18";
/// The logging levels `logging/setLevel` accepts.
const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// A method's result, or a JSON-RPC error code and message.
type MethodResult = Result<Value, (i64, String)>;

/// Cancellation flags of the `slow` calls in flight, keyed by `rpc::id_key`.
type InFlight = Arc<Mutex<HashMap<String, Arc<AtomicBool>>>>;

/// One stdio session's state.
pub struct Server {
    out: Output,
    verbose: bool,
    extra_tool: bool,
    catalog: catalog::Catalog,
    /// Tools per `tools/list` page; all at once when `None`.
    page_size: Option<usize>,
    next_request: u64,
    /// Outstanding `sampling/createMessage` requests: our id → the tools/call id.
    pending_samples: HashMap<String, Value>,
    in_flight: InFlight,
    workers: Vec<JoinHandle<()>>,
}

impl Server {
    /// A fresh session writing to `out`; `verbose` logs each message to stderr.
    pub fn new(out: Output, verbose: bool) -> Self {
        Self {
            out,
            verbose,
            extra_tool: false,
            catalog: catalog::Catalog::default(),
            page_size: None,
            next_request: 0,
            pending_samples: HashMap::new(),
            in_flight: Arc::default(),
            workers: Vec::new(),
        }
    }

    /// Serves `catalog` (extra tools, `rewrite-tool`) besides the static tools.
    pub fn with_catalog(mut self, catalog: catalog::Catalog) -> Self {
        self.catalog = catalog;
        self
    }

    /// Lists tools `size` at a time (pagination, for clients that follow cursors).
    pub fn with_page_size(mut self, size: Option<usize>) -> Self {
        self.page_size = size;
        self
    }

    /// One `tools/list` page: from the offset the cursor names.
    fn list_tools(&self, params: &Value) -> Result<Value, (i64, String)> {
        let tools = self.catalog.list(self.extra_tool);
        let Some(size) = self.page_size else {
            return Ok(json!({ "tools": tools }));
        };
        let start = match params.get("cursor").and_then(Value::as_str) {
            None => 0,
            Some(cursor) => cursor
                .parse::<usize>()
                .map_err(|_| (INVALID_PARAMS, format!("invalid cursor {cursor:?}")))?,
        };
        let end = (start + size).min(tools.len());
        let page: Vec<Value> = tools.get(start..end).unwrap_or_default().to_vec();
        let mut result = json!({ "tools": page });
        if end < tools.len() {
            result["nextCursor"] = Value::from(end.to_string());
        }
        Ok(result)
    }

    /// Handles one raw line from stdin (blank lines are ignored).
    pub fn handle_line(&mut self, line: &[u8]) {
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        match serde_json::from_slice::<Value>(line) {
            Err(err) => {
                eprintln!("[demo-server] parse error: {err}");
                self.out
                    .send(&rpc::error(Value::Null, PARSE_ERROR, "Parse error"));
            }
            Ok(Value::Array(items)) => self.handle_batch(items),
            Ok(message) => {
                if let Some(reply) = self.handle_message(message, false) {
                    self.out.send(&reply);
                }
            }
        }
    }

    /// Waits for the `slow` calls still running (called at end of input).
    pub fn finish(&mut self) {
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }

    /// A batch: one array of replies; notifications and responses add none.
    fn handle_batch(&mut self, items: Vec<Value>) {
        if items.is_empty() {
            self.out.send(&rpc::error(
                Value::Null,
                INVALID_REQUEST,
                "Invalid Request: empty batch",
            ));
            return;
        }
        let replies: Vec<Value> = items
            .into_iter()
            .filter_map(|m| self.handle_message(m, true))
            .collect();
        if !replies.is_empty() {
            self.out.send(&Value::Array(replies));
        }
    }

    /// One message; returns the reply to send now, if any.
    fn handle_message(&mut self, message: Value, in_batch: bool) -> Option<Value> {
        match rpc::classify(message) {
            Incoming::Request { id, method, params } => {
                self.log(|| format!("request {id} {method}"));
                self.handle_request(id, &method, &params, in_batch)
            }
            Incoming::Notification { method, params } => {
                self.log(|| format!("notification {method}"));
                self.handle_notification(&method, &params);
                None
            }
            Incoming::Response { id, outcome } => {
                self.log(|| format!("response {id}"));
                self.handle_response(&id, outcome);
                None
            }
            Incoming::Invalid(reply) => Some(reply),
        }
    }

    /// A request; `None` when the answer comes later (slow, sample).
    fn handle_request(
        &mut self,
        id: Value,
        method: &str,
        params: &Value,
        in_batch: bool,
    ) -> Option<Value> {
        let result: MethodResult = match method {
            "initialize" => Ok(initialize(params)),
            "ping" => Ok(json!({})),
            "tools/list" => self.list_tools(params),
            "tools/call" => return self.call_tool(id, params, in_batch),
            "resources/list" => Ok(json!({ "resources": catalog::resources() })),
            "resources/read" => read_resource(params),
            "prompts/list" => Ok(json!({ "prompts": catalog::prompts() })),
            "prompts/get" => get_prompt(params),
            "logging/setLevel" => set_level(params),
            _ => Err((METHOD_NOT_FOUND, format!("Method not found: {method}"))),
        };
        Some(match result {
            Ok(result) => rpc::response(id, result),
            Err((code, message)) => rpc::error(id, code, &message),
        })
    }

    /// `tools/call`.
    fn call_tool(&mut self, id: Value, params: &Value, in_batch: bool) -> Option<Value> {
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return Some(rpc::error(
                id,
                INVALID_PARAMS,
                "tools/call needs a string params.name",
            ));
        };
        let args = match params.get("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(args)) => args.clone(),
            Some(_) => {
                return Some(rpc::error(
                    id,
                    INVALID_PARAMS,
                    "params.arguments must be an object",
                ))
            }
        };
        if self.catalog.is_extra(name) {
            return Some(rpc::response(id, text_result(format!("{name} called"))));
        }
        if name == "rewrite-tool" && self.catalog.rug_pull() {
            return Some(rpc::response(id, self.rewrite_tool(&args)));
        }
        match tools::call(name, &args, self.extra_tool) {
            ToolOutcome::Done(result) => Some(rpc::response(id, result)),
            ToolOutcome::Unknown => Some(rpc::error(
                id,
                INVALID_PARAMS,
                &format!("Unknown tool: {name}"),
            )),
            ToolOutcome::ToggleTools => Some(rpc::response(id, self.toggle_tools())),
            ToolOutcome::Slow { ms, steps } => {
                let call = SlowCall {
                    id,
                    progress_token: progress_token(params),
                    ms,
                    steps,
                    cancelled: Arc::default(),
                };
                if in_batch {
                    call.run(&self.out)
                } else {
                    self.spawn_slow(call);
                    None
                }
            }
            ToolOutcome::Sample { .. } if in_batch => Some(rpc::response(
                id,
                error_result("sample cannot run inside a JSON-RPC batch"),
            )),
            ToolOutcome::Sample { prompt } => {
                self.start_sample(id, &prompt);
                None
            }
        }
    }

    /// `change-tools`: flips `extra-tool` and tells the client the list changed.
    fn toggle_tools(&mut self) -> Value {
        self.extra_tool = !self.extra_tool;
        self.out
            .send(&rpc::notification("notifications/tools/list_changed", None));
        let state = if self.extra_tool {
            "enabled"
        } else {
            "disabled"
        };
        text_result(format!("extra-tool is now {state}"))
    }

    /// `rewrite-tool`: changes a tool's description and tells the client
    /// the list changed (a "rug pull").
    fn rewrite_tool(&mut self, args: &Map<String, Value>) -> Value {
        let text = |key: &str| args.get(key).and_then(Value::as_str).map(str::to_owned);
        let (Some(name), Some(description)) = (text("name"), text("description")) else {
            return error_result("rewrite-tool needs string `name` and `description`");
        };
        self.catalog.rewrite(&name, &description);
        self.out
            .send(&rpc::notification("notifications/tools/list_changed", None));
        text_result(format!("{name} now reads: {description}"))
    }

    /// Runs a `slow` call on its own thread so cancellations can still be read.
    fn spawn_slow(&mut self, call: SlowCall) {
        let key = rpc::id_key(&call.id);
        lock(&self.in_flight).insert(key.clone(), call.cancelled.clone());
        let (out, in_flight) = (self.out.clone(), self.in_flight.clone());
        let cancelled = call.cancelled.clone();
        self.workers.retain(|w| !w.is_finished());
        self.workers.push(thread::spawn(move || {
            let reply = call.run(&out);
            // Deregister and answer under one lock, so a cancellation either
            // lands before the answer (no answer) or finds nothing to cancel.
            let mut in_flight = lock(&in_flight);
            in_flight.remove(&key);
            if let Some(reply) = reply.filter(|_| !cancelled.load(Ordering::SeqCst)) {
                out.send(&reply);
            }
        }));
    }

    /// `sample`: sends `sampling/createMessage` and parks the tool call.
    fn start_sample(&mut self, call_id: Value, prompt: &str) {
        self.next_request += 1;
        let request_id = format!("srv-{}", self.next_request);
        let params = json!({
            "messages": [{ "role": "user", "content": { "type": "text", "text": prompt } }],
            "maxTokens": 100,
        });
        self.pending_samples.insert(request_id.clone(), call_id);
        self.out
            .send(&rpc::request(&request_id, "sampling/createMessage", params));
    }

    /// The client's response to one of our requests: finishes the parked tool call.
    fn handle_response(&mut self, id: &Value, outcome: Result<Value, Value>) {
        let Some(call_id) = id.as_str().and_then(|id| self.pending_samples.remove(id)) else {
            eprintln!("[demo-server] response to unknown request {id}; ignored");
            return;
        };
        self.out
            .send(&rpc::response(call_id, sample_result(outcome)));
    }

    /// Notifications: only cancellation does anything.
    fn handle_notification(&mut self, method: &str, params: &Value) {
        if method != "notifications/cancelled" {
            return;
        }
        let Some(request_id) = params.get("requestId") else {
            return;
        };
        if let Some(flag) = lock(&self.in_flight).get(&rpc::id_key(request_id)) {
            flag.store(true, Ordering::SeqCst);
        }
        self.cancel_sample(request_id);
    }

    /// Drops a parked `sample` call and withdraws its sampling request.
    fn cancel_sample(&mut self, call_id: &Value) {
        let Some(ours) = self
            .pending_samples
            .iter()
            .find(|(_, v)| *v == call_id)
            .map(|(k, _)| k.clone())
        else {
            return;
        };
        self.pending_samples.remove(&ours);
        let params = json!({ "requestId": ours, "reason": "the tool call was cancelled" });
        self.out
            .send(&rpc::notification("notifications/cancelled", Some(params)));
    }

    /// Logs to stderr in verbose mode.
    fn log(&self, message: impl FnOnce() -> String) {
        if self.verbose {
            eprintln!("[demo-server] {}", message());
        }
    }
}

/// Locks a mutex, ignoring poisoning (a panicked worker leaves valid data).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `params._meta.progressToken`, when it is a string or a number.
fn progress_token(params: &Value) -> Option<Value> {
    let token = params.get("_meta")?.get("progressToken")?;
    (token.is_string() || token.is_number()).then(|| token.clone())
}

/// `initialize`: echoes a supported protocolVersion, else offers the fallback.
fn initialize(params: &Value) -> Value {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let version = asked
        .filter(|v| SUPPORTED_VERSIONS.contains(v))
        .unwrap_or(FALLBACK_VERSION);
    json!({
        "protocolVersion": version,
        "capabilities": {
            "tools": { "listChanged": true },
            "resources": {},
            "prompts": {},
            "logging": {},
        },
        "serverInfo": { "name": "acs-proxy-demo-server", "version": env!("CARGO_PKG_VERSION") },
    })
}

/// `resources/read`.
fn read_resource(params: &Value) -> MethodResult {
    match params.get("uri").and_then(Value::as_str) {
        Some(catalog::README_URI) => Ok(json!({
            "contents": [{ "uri": catalog::README_URI, "mimeType": "text/plain", "text": catalog::README_TEXT }],
        })),
        Some(uri) => Err((RESOURCE_NOT_FOUND, format!("Resource not found: {uri}"))),
        None => Err((
            INVALID_PARAMS,
            "resources/read needs a string params.uri".into(),
        )),
    }
}

/// `prompts/get`.
fn get_prompt(params: &Value) -> MethodResult {
    match params.get("name").and_then(Value::as_str) {
        Some("greeting") => match params.pointer("/arguments/name").and_then(Value::as_str) {
            Some(name) => Ok(catalog::greeting(name)),
            None => Err((
                INVALID_PARAMS,
                "prompt greeting needs the argument `name`".into(),
            )),
        },
        Some(other) => Err((INVALID_PARAMS, format!("Unknown prompt: {other}"))),
        None => Err((
            INVALID_PARAMS,
            "prompts/get needs a string params.name".into(),
        )),
    }
}

/// `logging/setLevel`: accepts the eight syslog levels.
fn set_level(params: &Value) -> MethodResult {
    match params.get("level").and_then(Value::as_str) {
        Some(level) if LOG_LEVELS.contains(&level) => Ok(json!({})),
        _ => Err((
            INVALID_PARAMS,
            format!("level must be one of {}", LOG_LEVELS.join(", ")),
        )),
    }
}

/// The `sample` tool's result from the client's sampling reply.
fn sample_result(outcome: Result<Value, Value>) -> Value {
    let reply = match outcome {
        Ok(reply) => reply,
        Err(err) => {
            let message = err
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("unknown error");
            return error_result(format!("sampling failed: {message}"));
        }
    };
    // `content` is one block, or (2025-11-25) possibly an array of blocks.
    let blocks = match reply.get("content") {
        Some(Value::Array(blocks)) => blocks.iter().collect(),
        Some(block) => vec![block],
        None => Vec::new(),
    };
    let text: Vec<&str> = blocks
        .iter()
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect();
    if text.is_empty() {
        error_result("the sampling reply had no text content")
    } else {
        text_result(text.concat())
    }
}
