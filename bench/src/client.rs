//! A minimal MCP client over a child's stdin/stdout: newline-delimited
//! JSON-RPC, `initialize`, then `tools/call` echo requests in a closed loop
//! with a fixed number in flight.

use std::borrow::Cow;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::value::RawValue;

/// The MCP revision the client asks for (all peers here speak it).
const PROTOCOL_VERSION: &str = "2025-06-18";

/// What the client reads from each line; everything else is skipped.
#[derive(Deserialize)]
struct Peek<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

/// The answer to one of our requests.
struct Answer {
    id: u64,
    /// A result that is not `isError`.
    ok: bool,
}

/// Latencies and counts of one load phase.
#[derive(Debug, Clone)]
pub struct PhaseRun {
    /// Round-trip time of every call, in nanoseconds.
    pub latencies_ns: Vec<u64>,
    /// From the first request written to the last answer read.
    pub wall: Duration,
    /// Calls answered with a JSON-RPC error or `isError: true`.
    pub errors: usize,
}

/// One spawned MCP server (or proxy) and the client's end of its pipes.
pub struct Peer {
    child: Child,
    /// `None` once closed by [`Peer::finish`].
    stdin: Option<BufWriter<ChildStdin>>,
    stdout: BufReader<ChildStdout>,
    line: Vec<u8>,
    next_id: u64,
    /// The name of the echo tool's text argument (`text` or `message`).
    argument: String,
    /// The tool every call names (`echo`; `a__echo` behind a virtual server).
    tool: String,
    /// Filler so a request is about `request_bytes` long.
    filler: String,
    watchdog: Arc<AtomicBool>,
}

impl Peer {
    /// Spawns `command`, its stderr going to `stderr_log`, killed by a
    /// watchdog if it is still running after `deadline`.
    pub fn spawn(
        command: &[String],
        env: &[(&str, &str)],
        stderr_log: &Path,
        argument: &str,
        request_bytes: usize,
        deadline: Duration,
    ) -> io::Result<Peer> {
        let (program, args) = command
            .split_first()
            .ok_or_else(|| io::Error::other("empty command"))?;
        let log = std::fs::File::create(stderr_log)?;
        let mut child = Command::new(program)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| io::Error::other("no stdin"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| io::Error::other("no stdout"))?;
        let watchdog = Arc::new(AtomicBool::new(false));
        spawn_watchdog(child.id(), deadline, watchdog.clone());
        let mut peer = Peer {
            child,
            stdin: Some(BufWriter::with_capacity(64 * 1024, stdin)),
            stdout: BufReader::with_capacity(64 * 1024, stdout),
            line: Vec::with_capacity(4096),
            next_id: 1,
            argument: argument.to_owned(),
            tool: "echo".to_owned(),
            filler: String::new(),
            watchdog,
        };
        let base = peer.request(u64::from(u32::MAX)).len();
        peer.filler = "x".repeat(request_bytes.saturating_sub(base + 1));
        Ok(peer)
    }

    /// Calls `tool` instead of `echo` (the filler is kept, so a request
    /// grows by the name's extra bytes).
    pub fn calling(mut self, tool: &str) -> Self {
        self.tool = tool.to_owned();
        self
    }

    /// The spawned process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `initialize`, its answer, then `notifications/initialized`.
    pub fn initialize(&mut self) -> Result<(), String> {
        let request = format!(
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{PROTOCOL_VERSION}","capabilities":{{}},"clientInfo":{{"name":"acs-proxy-bench","version":"0.1.0"}}}}}}"#
        );
        self.send(request.as_bytes())?;
        self.flush()?;
        let answer = self.read_answer()?;
        if answer.id != 0 || !answer.ok {
            return Err(format!("initialize failed (id {})", answer.id));
        }
        self.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)?;
        self.flush()
    }

    /// Issues `calls` echo calls keeping `in_flight` outstanding (1 is
    /// strictly sequential), and times each round trip.
    pub fn run_phase(&mut self, calls: usize, in_flight: usize) -> Result<PhaseRun, String> {
        let base = self.next_id;
        self.next_id += calls as u64;
        let mut sent_at = vec![None::<Instant>; calls];
        let mut latencies_ns = Vec::with_capacity(calls);
        let mut errors = 0;
        let mut next = 0usize;
        let start = Instant::now();
        while next < calls.min(in_flight.max(1)) {
            self.call(base, next, &mut sent_at)?;
            next += 1;
        }
        self.flush()?;
        while latencies_ns.len() < calls {
            let answer = self.read_answer()?;
            let now = Instant::now();
            let index = answer
                .id
                .checked_sub(base)
                .and_then(|i| usize::try_from(i).ok())
                .filter(|&i| i < calls)
                .ok_or_else(|| format!("answer to unknown id {}", answer.id))?;
            let sent = sent_at[index]
                .take()
                .ok_or_else(|| format!("second answer to id {}", answer.id))?;
            latencies_ns.push(u64::try_from((now - sent).as_nanos()).unwrap_or(u64::MAX));
            if !answer.ok {
                errors += 1;
            }
            if next < calls {
                self.call(base, next, &mut sent_at)?;
                next += 1;
            }
            // Write what is queued before blocking for more input; answers
            // that arrived together get their successors in one write.
            if !self.stdout.buffer().contains(&b'\n') {
                self.flush()?;
            }
        }
        Ok(PhaseRun {
            latencies_ns,
            wall: start.elapsed(),
            errors,
        })
    }

    /// Issues `calls` echo calls one at a time, the `i`th at `i × interval`
    /// from the start (at once when the previous answer came later), and
    /// times each round trip: an open-loop rate, so a stall shows as the
    /// latency of the calls it holds up.
    pub fn run_paced(&mut self, calls: usize, interval: Duration) -> Result<PhaseRun, String> {
        let mut latencies_ns = Vec::with_capacity(calls);
        let mut errors = 0;
        let start = Instant::now();
        for index in 0..calls {
            let due = start + interval * u32::try_from(index).unwrap_or(u32::MAX);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                thread::sleep(wait);
            }
            let id = self.next_id;
            self.next_id += 1;
            let sent = Instant::now();
            self.send(self.request(id).as_bytes())?;
            self.flush()?;
            let answer = self.read_answer()?;
            if answer.id != id {
                return Err(format!("answer to id {} while waiting for {id}", answer.id));
            }
            latencies_ns.push(u64::try_from(sent.elapsed().as_nanos()).unwrap_or(u64::MAX));
            if !answer.ok {
                errors += 1;
            }
        }
        Ok(PhaseRun {
            latencies_ns,
            wall: start.elapsed(),
            errors,
        })
    }

    /// Closes the server's stdin and waits for it to exit.
    pub fn finish(mut self, grace: Duration) -> Result<ExitStatus, String> {
        drop(self.stdin.take());
        let deadline = Instant::now() + grace;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    self.watchdog.store(true, Ordering::Release);
                    return Ok(status);
                }
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(5)),
                Ok(None) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    self.watchdog.store(true, Ordering::Release);
                    return Err("did not exit after stdin closed; killed".into());
                }
                Err(err) => return Err(format!("wait failed: {err}")),
            }
        }
    }

    fn request(&self, id: u64) -> String {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{}","arguments":{{"{}":"{}"}}}}}}"#,
            self.tool, self.argument, self.filler
        )
    }

    fn call(
        &mut self,
        base: u64,
        index: usize,
        sent_at: &mut [Option<Instant>],
    ) -> Result<(), String> {
        let request = self.request(base + index as u64);
        sent_at[index] = Some(Instant::now());
        self.send(request.as_bytes())
    }

    fn send(&mut self, line: &[u8]) -> Result<(), String> {
        let stdin = self.stdin.as_mut().ok_or("stdin is closed")?;
        stdin
            .write_all(line)
            .and_then(|()| stdin.write_all(b"\n"))
            .map_err(|err| format!("write to the server failed: {err}"))
    }

    fn flush(&mut self) -> Result<(), String> {
        let stdin = self.stdin.as_mut().ok_or("stdin is closed")?;
        stdin
            .flush()
            .map_err(|err| format!("write to the server failed: {err}"))
    }

    /// Reads until the answer to one of our requests; answers requests from
    /// the server (`ping`, `roots/list`) with an empty result and skips
    /// notifications.
    fn read_answer(&mut self) -> Result<Answer, String> {
        loop {
            self.line.clear();
            let read = self
                .stdout
                .read_until(b'\n', &mut self.line)
                .map_err(|err| format!("read from the server failed: {err}"))?;
            if read == 0 {
                return Err("the server closed its stdout".into());
            }
            let peek: Peek<'_> = serde_json::from_slice(&self.line).map_err(|err| {
                format!(
                    "not JSON-RPC ({err}): {}",
                    String::from_utf8_lossy(&self.line)
                )
            })?;
            let id = peek.id.map(|raw| raw.get().to_owned());
            match (&peek.method, id) {
                (Some(_), Some(id)) => {
                    let reply = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#);
                    self.send(reply.as_bytes())?;
                    self.flush()?;
                }
                (Some(_), None) => {}
                (None, Some(id)) => {
                    let ok = peek.error.is_none()
                        && peek
                            .result
                            .is_some_and(|result| !result.get().contains(r#""isError":true"#));
                    let id = id
                        .parse()
                        .map_err(|_| format!("unexpected id {id} in an answer"))?;
                    return Ok(Answer { id, ok });
                }
                (None, None) => return Err("a message with neither method nor id".into()),
            }
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if !self.watchdog.load(Ordering::Acquire) {
            let _ = self.child.kill();
            let _ = self.child.wait();
            self.watchdog.store(true, Ordering::Release);
        }
    }
}

/// Kills `pid` (SIGKILL via `kill`) if `done` is still false at `deadline`,
/// so a hung peer cannot hang the benchmark.
fn spawn_watchdog(pid: u32, deadline: Duration, done: Arc<AtomicBool>) {
    thread::spawn(move || {
        let until = Instant::now() + deadline;
        while Instant::now() < until {
            if done.load(Ordering::Acquire) {
                return;
            }
            thread::sleep(Duration::from_millis(100));
        }
        if !done.load(Ordering::Acquire) {
            eprintln!("acs-proxy-bench: pid {pid} still running after {deadline:?}; killing it");
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    });
}
