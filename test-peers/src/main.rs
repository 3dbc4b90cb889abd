//! `acs-misbehaving-server`: an MCP server over stdio that misbehaves on
//! demand, for acs-proxy's fault-injection tests.
//!
//! It answers `initialize`, `ping` and `tools/list` like any server; each
//! tool is one fault, chosen per call by its name:
//!
//! | tool | what the server does |
//! |---|---|
//! | `echo {text}` | answers at once (the control) |
//! | `exit {code?}` | exits without answering (status `code`, default 7) |
//! | `hang` | never answers; goes on serving other requests |
//! | `late {ms}` | answers after `ms`, whatever happened meanwhile |
//! | `garbage` | writes a line that is not JSON and a half message cut by a newline, then answers |
//! | `flood {count, bytes}` | writes `count` log notifications of `bytes` padding each, then answers |
//! | `huge {bytes}` | answers with a text of `bytes` characters |
//!
//! `--record FILE` appends every raw line received to FILE, so a test can
//! see what reached the server (a `notifications/cancelled`, for one).

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, Write};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

/// The `--help` text.
const USAGE: &str = "\
usage: acs-misbehaving-server [--record FILE]

An MCP server over stdio whose tools each inject one fault:
echo {text}, exit {code?}, hang, late {ms}, garbage, flood {count,bytes}, huge {bytes}";

/// Serialised access to stdout, shared with the threads of `late` calls.
type Out = Arc<Mutex<io::Stdout>>;

fn main() -> ExitCode {
    let mut record = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--record" => match args.next().map(|p| open_record(&p)) {
                Some(Ok(file)) => record = Some(file),
                Some(Err(err)) => return fail(&format!("--record: {err}")),
                None => return fail("--record needs a FILE"),
            },
            "--help" | "-h" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => return fail(&format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    let out: Out = Arc::new(Mutex::new(io::stdout()));
    for line in io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if let Some(file) = record.as_mut() {
            let _ = writeln!(file, "{line}");
            let _ = file.flush();
        }
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if handle(&out, &message).is_err() {
            break;
        }
    }
    ExitCode::SUCCESS
}

fn open_record(path: &str) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

fn fail(message: &str) -> ExitCode {
    eprintln!("acs-misbehaving-server: {message}");
    ExitCode::from(2)
}

/// Answers one message; `Err` once stdout is gone.
fn handle(out: &Out, message: &Value) -> io::Result<()> {
    let Some(id) = message.get("id").cloned() else {
        return Ok(());
    };
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        return Ok(());
    };
    let result = match method {
        "initialize" => json!({
            "protocolVersion": message["params"]["protocolVersion"].as_str().unwrap_or("2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "acs-misbehaving-server", "version": env!("CARGO_PKG_VERSION")},
        }),
        "ping" => json!({}),
        "tools/list" => json!({"tools": tools()}),
        "tools/call" => return call_tool(out, id, &message["params"]),
        _ => {
            let error = json!({"code": -32601, "message": format!("no method {method}")});
            return write(
                out,
                &json!({"jsonrpc": "2.0", "id": id, "error": error}).to_string(),
            );
        }
    };
    write(out, &answer(&id, result))
}

fn tools() -> Vec<Value> {
    ["echo", "exit", "hang", "late", "garbage", "flood", "huge"]
        .iter()
        .map(|name| json!({"name": name, "inputSchema": {"type": "object"}}))
        .collect()
}

fn call_tool(out: &Out, id: Value, params: &Value) -> io::Result<()> {
    let arguments = &params["arguments"];
    let number = |key: &str, default: u64| arguments[key].as_u64().unwrap_or(default);
    match params["name"].as_str().unwrap_or_default() {
        "exit" => std::process::exit(i32::try_from(number("code", 7)).unwrap_or(7)),
        "hang" => Ok(()),
        "late" => {
            let out = out.clone();
            let delay = Duration::from_millis(number("ms", 1000));
            std::thread::spawn(move || {
                std::thread::sleep(delay);
                let _ = write(&out, &answer(&id, text_result("late answer")));
            });
            Ok(())
        }
        "garbage" => {
            write(out, "this is not JSON at all")?;
            write(out, r#"{"jsonrpc":"2.0","method":"notifications/mess"#)?;
            write(out, &answer(&id, text_result("after garbage")))
        }
        "flood" => {
            let padding = "x".repeat(usize::try_from(number("bytes", 1024)).unwrap_or(1024));
            for n in 0..number("count", 1000) {
                let notification = json!({"jsonrpc": "2.0", "method": "notifications/message",
                    "params": {"level": "info", "data": {"n": n, "padding": padding}}});
                write(out, &notification.to_string())?;
            }
            write(out, &answer(&id, text_result("flood done")))
        }
        "huge" => {
            let size = usize::try_from(number("bytes", 1 << 20)).unwrap_or(1 << 20);
            write(out, &answer(&id, text_result(&"y".repeat(size))))
        }
        _ => {
            let text = arguments["text"].as_str().unwrap_or_default();
            write(out, &answer(&id, text_result(text)))
        }
    }
}

fn text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

fn answer(id: &Value, result: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

fn write(out: &Out, line: &str) -> io::Result<()> {
    let mut stdout = out.lock().unwrap_or_else(|p| p.into_inner());
    stdout.write_all(line.as_bytes())?;
    stdout.write_all(b"\n")?;
    stdout.flush()
}
