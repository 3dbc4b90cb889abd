//! `--record FILE`: one JSON line per request received, so tests can assert
//! what the Guardian saw and did.
//!
//! Each line is
//! `{"envelope": <request as received>, "signature_valid": true|false|null,
//!   "action": "<label>", "chain_hash": "<head after the request>"|null}`;
//! for a body that is not JSON, `envelope` is `null` and `raw` holds the
//! body as (lossy) UTF-8. Each element of an accepted batch gets its own
//! line, with `"batch": <n>` (the n-th batch this Guardian accepted,
//! counting from 1) and `"batch_index": <i>` (its position, from 0). A
//! request that came over HTTP with a W3C `traceparent` header has
//! `"traceparent": "<header>"` too.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::Path;
use std::sync::Mutex;

use anyhow::Context as _;
use serde_json::{json, Value};

/// What the Guardian knew and did about one request.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The request as received (`null` if it was not JSON).
    pub envelope: Value,
    /// The body, only when it was not JSON.
    pub raw: Option<String>,
    /// `Some(valid)` when a signature was checked, `None` when not.
    pub signature_valid: Option<bool>,
    /// What it did (see README.md for the labels).
    pub action: String,
    /// The session head after this request's ContextEntry, if one was written.
    pub chain_hash: Option<String>,
    /// For an element of an accepted batch: which batch (1-based, in
    /// arrival order) and its position in it (0-based).
    pub batch: Option<(u64, usize)>,
    /// The W3C `traceparent` header the request came with (HTTP only).
    pub traceparent: Option<String>,
}

impl Entry {
    /// The JSON line written for this entry.
    pub fn to_json(&self) -> Value {
        let mut line = json!({
            "envelope": self.envelope,
            "signature_valid": self.signature_valid,
            "action": self.action,
            "chain_hash": self.chain_hash,
        });
        if let Some(raw) = &self.raw {
            line["raw"] = Value::String(raw.clone());
        }
        if let Some(traceparent) = &self.traceparent {
            line["traceparent"] = Value::String(traceparent.clone());
        }
        if let Some((batch, index)) = self.batch {
            line["batch"] = json!(batch);
            line["batch_index"] = json!(index);
        }
        line
    }
}

/// An append-only JSON-lines file.
#[derive(Debug)]
pub struct Recorder {
    file: Mutex<File>,
}

impl Recorder {
    /// Opens (creating if needed) `path` for appending.
    pub fn open(path: &Path) -> anyhow::Result<Recorder> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening record file {}", path.display()))?;
        Ok(Recorder {
            file: Mutex::new(file),
        })
    }

    /// Appends one line and flushes it, so a test may read it right away.
    pub fn write(&self, entry: &Entry) {
        let mut line = entry.to_json().to_string();
        line.push('\n');
        let mut file = self
            .file
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Err(err) = file.write_all(line.as_bytes()).and_then(|()| file.flush()) {
            crate::log(&format!("cannot write the record file: {err}"));
        }
    }
}
