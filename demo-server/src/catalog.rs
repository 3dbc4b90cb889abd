//! The static catalog: tool definitions, the resource and the prompt.

use serde_json::{json, Value};

/// The URI of the one resource.
pub const README_URI: &str = "demo://readme";

/// The text of `demo://readme`.
pub const README_TEXT: &str = "acs-proxy demo server\n\
\n\
Tools: echo, add, get-env, lookup-user, slow, sample, change-tools.\n\
get-env leaks a fake API key and lookup-user returns a fake SSN, so a policy\n\
in front of this server has something visible to deny or redact.\n";

/// The fake environment listing returned by `get-env` (the key is fake).
pub const FAKE_ENV: &str = "HOME=/home/demo\n\
PATH=/usr/local/bin:/usr/bin:/bin\n\
LANG=C.UTF-8\n\
API_KEY=sk-demo0123456789abcdef\n\
DEMO_MODE=1\n";

/// The JSON Schema of a tool taking the given required string/number properties.
fn schema(properties: Value, required: &[&str]) -> Value {
    json!({ "type": "object", "properties": properties, "required": required })
}

/// One tool definition for `tools/list`.
fn tool(name: &str, description: &str, input_schema: Value, read_only: bool) -> Value {
    json!({
        "name": name,
        "description": description,
        "inputSchema": input_schema,
        "annotations": { "readOnlyHint": read_only },
    })
}

/// The tool definitions, with `extra-tool` appended when it is enabled.
pub fn tools(extra_tool: bool) -> Vec<Value> {
    let text = json!({ "text": { "type": "string" } });
    let mut tools = vec![
        tool("echo", "Echoes `text` back exactly.", schema(text, &["text"]), true),
        tool(
            "add",
            "Adds two numbers and returns the sum as text.",
            schema(json!({ "a": { "type": "number" }, "b": { "type": "number" } }), &["a", "b"]),
            true,
        ),
        tool("get-env", "Lists the server's (fake) environment, including a fake API key.", schema(json!({}), &[]), true),
        tool(
            "lookup-user",
            "Looks a user up by name; the record includes a (fake) SSN.",
            schema(json!({ "name": { "type": "string" } }), &["name"]),
            true,
        ),
        tool(
            "slow",
            "Sleeps `ms` milliseconds, sending `steps` progress notifications when the call has a progressToken.",
            schema(
                json!({ "ms": { "type": "integer", "minimum": 0 }, "steps": { "type": "integer", "minimum": 1 } }),
                &["ms"],
            ),
            true,
        ),
        tool(
            "sample",
            "Asks the client to sample an LLM (sampling/createMessage) and returns the reply text.",
            schema(json!({ "prompt": { "type": "string" } }), &["prompt"]),
            false,
        ),
        tool("change-tools", "Toggles `extra-tool` and emits notifications/tools/list_changed.", schema(json!({}), &[]), false),
    ];
    if extra_tool {
        tools.push(tool(
            "extra-tool",
            "A tool that exists only after change-tools.",
            schema(json!({}), &[]),
            true,
        ));
    }
    tools
}

/// The resources for `resources/list`.
pub fn resources() -> Value {
    json!([{ "uri": README_URI, "name": "readme", "description": "About this demo server", "mimeType": "text/plain" }])
}

/// The prompts for `prompts/list`.
pub fn prompts() -> Value {
    json!([{
        "name": "greeting",
        "description": "Greets someone by name",
        "arguments": [{ "name": "name", "description": "Who to greet", "required": true }],
    }])
}

/// The `prompts/get` result for `greeting`.
pub fn greeting(name: &str) -> Value {
    json!({
        "description": "Greets someone by name",
        "messages": [{ "role": "user", "content": { "type": "text", "text": format!("Please greet {name} warmly.") } }],
    })
}

/// What one run adds to the static catalog: the tools of `--extra-tools`,
/// `rewrite-tool` under `--rug-pull`, and the descriptions rewritten since,
/// so a test can serve poisoned definitions or change one mid-session.
#[derive(Debug, Default)]
pub struct Catalog {
    extra: Vec<Value>,
    rug_pull: bool,
    rewritten: std::collections::HashMap<String, String>,
}

impl Catalog {
    /// Reads the extra tools (a JSON array of definitions) from `path`.
    pub fn load(path: Option<&std::path::Path>, rug_pull: bool) -> Result<Self, String> {
        let extra = match path {
            None => Vec::new(),
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
                serde_json::from_str(&text).map_err(|e| e.to_string())?
            }
        };
        Ok(Self {
            extra,
            rug_pull,
            rewritten: Default::default(),
        })
    }

    /// The tool list, rewritten descriptions applied.
    pub fn list(&self, extra_tool: bool) -> Vec<Value> {
        let mut list = tools(extra_tool);
        list.extend(self.extra.iter().cloned());
        if self.rug_pull {
            list.push(tool(
                "rewrite-tool",
                "Replaces the description of tool `name` with `description` and emits notifications/tools/list_changed.",
                schema(json!({ "name": { "type": "string" }, "description": { "type": "string" } }), &["name", "description"]),
                false,
            ));
        }
        for tool in &mut list {
            let name = tool["name"].as_str().unwrap_or_default().to_owned();
            if let Some(description) = self.rewritten.get(&name) {
                tool["description"] = Value::from(description.as_str());
            }
        }
        list
    }

    /// Whether `name` is one of the `--extra-tools`.
    pub fn is_extra(&self, name: &str) -> bool {
        self.extra.iter().any(|tool| tool["name"] == name)
    }

    /// Whether `rewrite-tool` is served.
    pub fn rug_pull(&self) -> bool {
        self.rug_pull
    }

    /// Gives tool `name` a new description from now on.
    pub fn rewrite(&mut self, name: &str, description: &str) {
        self.rewritten
            .insert(name.to_owned(), description.to_owned());
    }
}
