//! Tool calls: argument checking and the tools that answer at once.

use serde_json::{json, Map, Value};

use crate::catalog::FAKE_ENV;

/// The longest `slow` call accepted, in milliseconds.
pub const MAX_SLOW_MS: u64 = 600_000;
/// The most progress steps a `slow` call may ask for.
pub const MAX_STEPS: u64 = 1_000;
/// Progress steps of a `slow` call that names none.
pub const DEFAULT_STEPS: u64 = 3;

/// What a `tools/call` turns into.
#[derive(Debug)]
pub enum ToolOutcome {
    /// A finished `CallToolResult`.
    Done(Value),
    /// `slow`: sleep, maybe report progress, then answer.
    Slow {
        /// Total sleep in milliseconds.
        ms: u64,
        /// Number of progress notifications.
        steps: u64,
    },
    /// `sample`: ask the client for a sampling/createMessage, then answer.
    Sample {
        /// The prompt to forward.
        prompt: String,
    },
    /// `change-tools`: toggle `extra-tool`.
    ToggleTools,
    /// No such tool (a protocol error, -32602).
    Unknown,
}

/// A successful text-only `CallToolResult`.
pub fn text_result(text: impl Into<String>) -> Value {
    json!({ "content": [{ "type": "text", "text": text.into() }] })
}

/// A tool execution error (`isError: true`), which the model can see and act on.
pub fn error_result(text: impl Into<String>) -> Value {
    json!({ "content": [{ "type": "text", "text": text.into() }], "isError": true })
}

/// Runs or plans the named tool; `extra_tool` says whether `extra-tool` exists now.
pub fn call(name: &str, args: &Map<String, Value>, extra_tool: bool) -> ToolOutcome {
    let done = |r: Result<Value, String>| ToolOutcome::Done(r.unwrap_or_else(error_result));
    match name {
        "echo" => done(string_arg(args, "text").map(text_result)),
        "add" => done(add(args)),
        "get-env" => ToolOutcome::Done(text_result(FAKE_ENV)),
        "lookup-user" => done(string_arg(args, "name").map(|n| text_result(user_record(&n)))),
        "slow" => match slow_args(args) {
            Ok((ms, steps)) => ToolOutcome::Slow { ms, steps },
            Err(msg) => ToolOutcome::Done(error_result(msg)),
        },
        "sample" => match string_arg(args, "prompt") {
            Ok(prompt) => ToolOutcome::Sample { prompt },
            Err(msg) => ToolOutcome::Done(error_result(msg)),
        },
        "change-tools" => ToolOutcome::ToggleTools,
        "extra-tool" if extra_tool => ToolOutcome::Done(text_result("extra-tool called")),
        _ => ToolOutcome::Unknown,
    }
}

/// A required string argument.
fn string_arg(args: &Map<String, Value>, key: &str) -> Result<String, String> {
    match args.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(format!("argument `{key}` must be a string")),
        None => Err(format!("missing required argument `{key}`")),
    }
}

/// A required numeric argument.
fn number_arg<'a>(
    args: &'a Map<String, Value>,
    key: &str,
) -> Result<&'a serde_json::Number, String> {
    match args.get(key) {
        Some(Value::Number(n)) => Ok(n),
        Some(_) => Err(format!("argument `{key}` must be a number")),
        None => Err(format!("missing required argument `{key}`")),
    }
}

/// `add`: integers add exactly; anything else adds as f64.
fn add(args: &Map<String, Value>) -> Result<Value, String> {
    let (a, b) = (number_arg(args, "a")?, number_arg(args, "b")?);
    let exact = match (a.as_i64(), b.as_i64()) {
        (Some(x), Some(y)) => x.checked_add(y).map(|s| s.to_string()),
        _ => None,
    };
    let sum = match exact {
        Some(s) => s,
        None => {
            let (x, y) = (a.as_f64(), b.as_f64());
            let (Some(x), Some(y)) = (x, y) else {
                return Err("arguments `a` and `b` must be finite numbers".into());
            };
            (x + y).to_string()
        }
    };
    Ok(text_result(sum))
}

/// `lookup-user`'s fake record: an email derived from the name and a fake SSN.
fn user_record(name: &str) -> String {
    let local: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    let local = if local.is_empty() {
        "user".to_string()
    } else {
        local
    };
    format!("name: {name}, email: {local}@example.com, ssn: 123-45-6789")
}

/// `slow`'s arguments: `ms` (required) and `steps` (default 3), both bounded.
fn slow_args(args: &Map<String, Value>) -> Result<(u64, u64), String> {
    let ms = number_arg(args, "ms")?
        .as_u64()
        .filter(|ms| *ms <= MAX_SLOW_MS)
        .ok_or_else(|| format!("`ms` must be an integer from 0 to {MAX_SLOW_MS}"))?;
    let steps = match args.get("steps") {
        None => DEFAULT_STEPS,
        Some(v) => v
            .as_u64()
            .filter(|s| (1..=MAX_STEPS).contains(s))
            .ok_or_else(|| format!("`steps` must be an integer from 1 to {MAX_STEPS}"))?,
    };
    Ok((ms, steps))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    fn text_of(outcome: ToolOutcome) -> String {
        match outcome {
            ToolOutcome::Done(v) => v["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn add_is_exact_for_integers_and_f64_otherwise() {
        assert_eq!(
            text_of(call("add", &args(json!({"a": 2, "b": 40})), false)),
            "42"
        );
        assert_eq!(
            text_of(call("add", &args(json!({"a": 1.5, "b": 1})), false)),
            "2.5"
        );
    }

    #[test]
    fn lookup_user_has_an_ssn() {
        let text = text_of(call("lookup-user", &args(json!({"name": "Ada"})), false));
        assert_eq!(text, "name: Ada, email: ada@example.com, ssn: 123-45-6789");
    }

    #[test]
    fn bad_arguments_are_tool_errors() {
        let ToolOutcome::Done(v) = call("echo", &args(json!({})), false) else {
            panic!()
        };
        assert_eq!(v["isError"], json!(true));
        assert!(matches!(
            call("extra-tool", &args(json!({})), false),
            ToolOutcome::Unknown
        ));
    }
}
