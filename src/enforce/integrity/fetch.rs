//! Reading an upstream's current definitions for a review (`acs-proxy pins
//! diff|approve`): spawn the configured server, `initialize`, and read
//! each list it declares, every page.
//!
//! A review is a short, one-off command, so this is plain blocking I/O on
//! the child's pipes rather than the relay's transports.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::error::IntegrityError;
use super::section::Section;
use crate::config::UpstreamConfig;

/// How long the whole read may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);
/// Pages of one list read at most.
const MAX_PAGES: usize = 64;

/// An upstream's definitions, by section.
pub type Definitions = BTreeMap<Section, Vec<Value>>;

/// Reads every list `upstream` declares.
pub fn fetch(upstream: &UpstreamConfig) -> Result<Definitions, IntegrityError> {
    let failed = |message: String| IntegrityError::Fetch {
        upstream: upstream.name.clone(),
        message,
    };
    let Some((program, args)) = upstream.command.split_first() else {
        return Err(failed(
            "only spawned (command) upstreams can be read; use --from-audit".into(),
        ));
    };
    let mut command = Command::new(program);
    command
        .args(args)
        .envs(&upstream.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(cwd) = &upstream.cwd {
        command.current_dir(cwd);
    }
    let mut child = command
        .spawn()
        .map_err(|err| failed(format!("cannot spawn {program:?}: {err}")))?;
    let read = Conversation::start(&mut child).and_then(|mut talk| talk.read_all());
    let _ = child.kill();
    let _ = child.wait();
    read.map_err(failed)
}

/// Requests and answers over the child's pipes.
struct Conversation {
    stdin: ChildStdin,
    lines: Receiver<String>,
    deadline: Instant,
    next_id: u64,
}

impl Conversation {
    fn start(child: &mut Child) -> Result<Conversation, String> {
        let stdin = child.stdin.take().ok_or("the server has no stdin")?;
        let stdout = child.stdout.take().ok_or("the server has no stdout")?;
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Conversation {
            stdin,
            lines,
            deadline: Instant::now() + FETCH_TIMEOUT,
            next_id: 0,
        })
    }

    fn read_all(&mut self) -> Result<Definitions, String> {
        let initialized = self.request(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": { "name": "acs-proxy pins", "version": env!("CARGO_PKG_VERSION") },
            }),
        )?;
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        let capabilities = &initialized["capabilities"];
        let mut definitions = Definitions::new();
        for section in Section::ALL {
            if capabilities.get(section.capability()).is_none() {
                continue;
            }
            match self.list(section) {
                Ok(items) => {
                    definitions.insert(section, items);
                }
                // Templates are optional for a server with resources.
                Err(_) if section == Section::ResourceTemplates => {}
                Err(err) => return Err(err),
            }
        }
        Ok(definitions)
    }

    fn list(&mut self, section: Section) -> Result<Vec<Value>, String> {
        let mut items = Vec::new();
        let mut cursor: Option<Value> = None;
        for _ in 0..MAX_PAGES {
            let params = match &cursor {
                Some(cursor) => json!({ "cursor": cursor }),
                None => json!({}),
            };
            let result = self.request(section.list_method(), params)?;
            items.extend(section.items(&result).cloned().unwrap_or_default());
            cursor = result.get("nextCursor").filter(|c| !c.is_null()).cloned();
            if cursor.is_none() {
                break;
            }
        }
        Ok(items)
    }

    /// Sends a request and waits for its result, skipping anything else
    /// the server says meanwhile.
    fn request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        loop {
            let left = self.deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .map_err(|_| format!("no answer to {method}"))?;
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if message.get("id") != Some(&json!(id)) || message.get("method").is_some() {
                continue;
            }
            if let Some(error) = message.get("error") {
                return Err(format!("{method} failed: {error}"));
            }
            return Ok(message.get("result").cloned().unwrap_or(Value::Null));
        }
    }

    fn send(&mut self, message: &Value) -> Result<(), String> {
        let mut line = message.to_string();
        line.push('\n');
        self.stdin
            .write_all(line.as_bytes())
            .and_then(|()| self.stdin.flush())
            .map_err(|err| format!("cannot write to the server: {err}"))
    }
}
