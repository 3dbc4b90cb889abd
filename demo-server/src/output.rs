//! The server's stdout: one JSON-RPC message per line, shared between threads.

use std::io::{self, BufWriter, Stdout, Write};
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// A cloneable handle to stdout that writes whole messages atomically.
///
/// Each message is serialized, followed by `\n`, and flushed while the lock is
/// held, so lines from the reader loop and from worker threads never interleave.
#[derive(Clone)]
pub struct Output {
    inner: Arc<Mutex<BufWriter<Stdout>>>,
}

impl Output {
    /// Wraps the process's stdout.
    pub fn stdout() -> Self {
        Self {
            inner: Arc::new(Mutex::new(BufWriter::with_capacity(
                64 * 1024,
                io::stdout(),
            ))),
        }
    }

    /// Writes one message as a single line and flushes it.
    ///
    /// A closed stdout means the client went away, so the process exits quietly.
    pub fn send(&self, message: &Value) {
        let mut guard = match self.inner.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        let result = serde_json::to_writer(&mut *guard, message)
            .map_err(io::Error::from)
            .and_then(|()| guard.write_all(b"\n"))
            .and_then(|()| guard.flush());
        if let Err(err) = result {
            eprintln!("[demo-server] stdout closed ({err}); exiting");
            std::process::exit(0);
        }
    }
}
