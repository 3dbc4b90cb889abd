//! The Guardian as a child process speaking `Content-Length`-framed JSON-RPC
//! on its stdin and stdout.
//!
//! Calls are pipelined: many may be in flight, each request is written as
//! soon as it is made, and one reader task routes every reply to its caller
//! by the reply's JSON-RPC `id`. The Guardian may answer in any order. Ids
//! must be unique among calls in flight (ACS callers use fresh ones); a
//! call given up by its caller frees its id, and a late reply to it is
//! dropped.
//!
//! The child is started and stopped by [`crate::transport::child`], the
//! same code that runs upstream MCP servers: its own process group, stderr
//! inherited, and on shutdown stdin closed, then SIGTERM, then SIGKILL.
//! Each request is written by the calling task itself, header and body in
//! one `write` ([`RequestPipe`]), so a call hands nothing to another task on
//! its way out, and a caller dropped mid-call can never leave half a frame
//! on the pipe. The bytes on the pipe are exactly
//! `Content-Length: N\r\n\r\n<body>`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::future::BoxFuture;
use futures_util::StreamExt;
use tokio::process::ChildStdout;
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;

use super::call_id::request_key;
use super::error::TransportError;
use super::framing::{put_header, ContentLengthCodec, Frame};
use super::pending::Pending;
use super::request_pipe::RequestPipe;
use super::GuardianTransport;
use crate::config::UpstreamConfig;
use crate::transport::child::{ChildError, ChildPipes, ChildProcess};

/// How long the child gets after its stdin closes, and again after SIGTERM.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Room for `Content-Length: <any usize>\r\n\r\n`.
const HEADER_CAPACITY: usize = 40;

/// How long to wait for an exit status once stdout closes, so the error
/// can say how the Guardian ended.
const EXIT_STATUS_WAIT: Duration = Duration::from_millis(100);

/// A Guardian child process, called over its stdin and stdout.
///
/// Dropping the transport shuts the child down in the background.
#[derive(Debug)]
pub struct StdioTransport {
    requests: RequestPipe,
    pending: Arc<Pending>,
    max_frame: usize,
    stop: CancellationToken,
}

impl StdioTransport {
    /// Starts `command` (program and arguments) with `env` added to the
    /// proxy's environment; frames over `max_frame` bytes are refused in
    /// both directions. Must be called within a Tokio runtime.
    pub fn spawn(
        command: &[String],
        env: &BTreeMap<String, String>,
        max_frame: usize,
    ) -> Result<Self, TransportError> {
        let config = UpstreamConfig {
            name: "guardian".into(),
            env: env.clone(),
            shutdown_grace_ms: u64::try_from(SHUTDOWN_GRACE.as_millis()).unwrap_or(u64::MAX),
            ..UpstreamConfig::for_command(command.to_vec())
        };
        let ChildPipes {
            process,
            stdin,
            stdout,
        } = ChildPipes::spawn(&config).map_err(spawn_error)?;
        let requests = RequestPipe::spawn(stdin).map_err(|source| TransportError::Spawn {
            program: config.command.first().cloned().unwrap_or_default(),
            source: Arc::new(source),
        })?;
        let pending = Arc::new(Pending::default());
        let stop = CancellationToken::new();
        tokio::spawn(
            Supervisor {
                process,
                requests: requests.clone(),
                pending: Arc::clone(&pending),
                stop: stop.clone(),
            }
            .run(stdout, max_frame),
        );
        Ok(Self {
            requests,
            pending,
            max_frame,
            stop,
        })
    }

    async fn exchange(&self, body: Bytes) -> Result<Bytes, TransportError> {
        if body.len() > self.max_frame {
            return Err(TransportError::FrameTooLarge {
                length: body.len() as u64,
                max: self.max_frame,
            });
        }
        let (shape, id) = request_key(&body)?;
        // Registered before the write, so even an instant reply finds it.
        let waiting = self.pending.register(shape, id)?;
        let mut header = BytesMut::with_capacity(HEADER_CAPACITY);
        put_header(&mut header, body.len());
        self.requests
            .send(&header, &body)
            .map_err(|_| self.closed_error())?;
        waiting.reply().await
    }

    fn closed_error(&self) -> TransportError {
        self.pending
            .closed()
            .unwrap_or_else(|| TransportError::Closed("the Guardian's stdin is closed".into()))
    }
}

impl GuardianTransport for StdioTransport {
    fn call<'a>(&'a self, body: Bytes) -> BoxFuture<'a, Result<Bytes, TransportError>> {
        Box::pin(self.exchange(body))
    }

    fn name(&self) -> &'static str {
        "stdio"
    }
}

impl Drop for StdioTransport {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn spawn_error(err: ChildError) -> TransportError {
    match err {
        ChildError::Spawn { program, source } => TransportError::Spawn {
            program,
            source: Arc::new(source),
        },
        ChildError::NoCommand => TransportError::Config("the Guardian command is empty".into()),
        ChildError::NoPipes(program) => TransportError::Spawn {
            program,
            source: Arc::new(std::io::Error::other("no stdio pipes")),
        },
    }
}

/// The task that owns the child: routes replies while the stream lasts,
/// then fails whatever still waits and shuts the child down.
struct Supervisor {
    process: ChildProcess,
    requests: RequestPipe,
    pending: Arc<Pending>,
    stop: CancellationToken,
}

impl Supervisor {
    async fn run(mut self, stdout: ChildStdout, max_frame: usize) {
        let mut frames = FramedRead::new(stdout, ContentLengthCodec::new(max_frame));
        let err = tokio::select! {
            err = route_replies(&mut frames, &self.pending) => err,
            () = self.requests.ended() => writer_ended(self.requests.failure()),
            () = self.stop.cancelled() => {
                TransportError::Closed("the Guardian transport was shut down".into())
            }
        };
        let err = self.with_exit_status(err).await;
        tracing::debug!(%err, "Guardian stdio transport closing");
        self.pending.close(err);
        self.requests.close();
        let exit = self.process.shutdown().await;
        tracing::debug!(?exit, "Guardian child ended");
    }

    /// Adds how the child ended to a closed-stream error, when it has.
    async fn with_exit_status(&mut self, err: TransportError) -> TransportError {
        let TransportError::Closed(reason) = err else {
            return err;
        };
        if self.stop.is_cancelled() {
            return TransportError::Closed(reason);
        }
        let status = tokio::time::timeout(EXIT_STATUS_WAIT, self.process.wait()).await;
        let reason = match status.map(|exit| exit.code) {
            Ok(Some(code)) => format!("{reason}; it exited with code {code}"),
            Ok(None) => format!("{reason}; it was killed by a signal"),
            Err(_) => reason,
        };
        TransportError::Closed(reason)
    }
}

/// Routes replies until the stream ends or breaks; returns why it stopped.
async fn route_replies(
    frames: &mut FramedRead<ChildStdout, ContentLengthCodec>,
    pending: &Pending,
) -> TransportError {
    let max = frames.decoder().max_frame();
    loop {
        match frames.next().await {
            Some(Ok(Frame::Body(reply))) => pending.deliver(reply),
            // Framing survives (the body is skipped), but the reply is lost
            // and its id unread: any waiting call may have been its target.
            Some(Ok(Frame::TooLarge { length })) => {
                tracing::warn!(length, max, "the Guardian sent an oversized reply");
                pending.fail_waiting(&TransportError::FrameTooLarge { length, max });
            }
            Some(Err(err)) => return err,
            None => return TransportError::Closed("the Guardian closed its stdout".into()),
        }
    }
}

fn writer_ended(failure: Option<String>) -> TransportError {
    let reason = match failure {
        None => "the Guardian's stdin was closed".to_owned(),
        Some(err) => format!("writing to the Guardian failed: {err}"),
    };
    TransportError::Closed(reason)
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Instant;

    use super::*;

    /// A Guardian in Python that reads `batch` requests, then answers them
    /// in reverse order, forever; `exit_after` requests it exits instead
    /// of answering. Each reply is `{"id": <id>, "result": <request>}`.
    const GUARDIAN: &str = r#"
import json, sys

def read_frame():
    length = None
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            return None
        if line == b"\r\n":
            break
        name, _, value = line.decode().partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    return sys.stdin.buffer.read(length)

def write_frame(body):
    sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    sys.stdout.buffer.flush()

def key(request):
    return request[0]["id"] if isinstance(request, list) else request["id"]

batch, exit_after = int(sys.argv[1]), int(sys.argv[2])
seen, held = 0, []
while True:
    body = read_frame()
    if body is None:
        sys.exit(0)
    seen += 1
    if seen == exit_after:
        sys.exit(3)
    request = json.loads(body)
    if isinstance(request, list):
        reply = [{"id": r["id"], "result": r} for r in request]
    elif request.get("method") == "huge":
        reply = {"id": request["id"], "result": "x" * 100000}
    else:
        reply = {"id": key(request), "result": request}
    held.append(json.dumps(reply).encode())
    if len(held) == batch:
        for body in reversed(held):
            write_frame(body)
        held = []
"#;

    struct Fixture {
        _dir: tempfile::TempDir,
        transport: StdioTransport,
    }

    fn guardian(batch: u32, exit_after: u32, max_frame: usize) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("guardian.py");
        std::fs::write(&script, GUARDIAN).unwrap();
        let transport = StdioTransport::spawn(
            &command(&script, batch, exit_after),
            &BTreeMap::new(),
            max_frame,
        )
        .unwrap();
        Fixture {
            _dir: dir,
            transport,
        }
    }

    fn command(script: &Path, batch: u32, exit_after: u32) -> Vec<String> {
        vec![
            "python3".into(),
            script.display().to_string(),
            batch.to_string(),
            exit_after.to_string(),
        ]
    }

    fn request(id: u32) -> Bytes {
        Bytes::from(format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"m"}}"#))
    }

    fn result_id(reply: &Bytes) -> serde_json::Value {
        let reply: serde_json::Value = serde_json::from_slice(reply).unwrap();
        reply["id"].clone()
    }

    #[tokio::test]
    async fn one_call_gets_its_reply() {
        let fixture = guardian(1, 0, 1 << 20);
        let reply = fixture.transport.call(request(7)).await.unwrap();
        assert_eq!(result_id(&reply), 7);
        assert_eq!(fixture.transport.name(), "stdio");
    }

    #[tokio::test]
    async fn pipelined_calls_answered_out_of_order_reach_their_callers() {
        let fixture = guardian(2, 0, 1 << 20);
        let transport = &fixture.transport;
        let (first, second) = tokio::join!(transport.call(request(1)), transport.call(request(2)));
        assert_eq!(result_id(&first.unwrap()), 1);
        assert_eq!(result_id(&second.unwrap()), 2);
    }

    #[tokio::test]
    async fn a_batch_is_matched_by_its_first_id() {
        let fixture = guardian(1, 0, 1 << 20);
        let batch = Bytes::from_static(br#"[{"id":"a","method":"m"},{"id":"b","method":"m"}]"#);
        let reply = fixture.transport.call(batch).await.unwrap();
        let reply: serde_json::Value = serde_json::from_slice(&reply).unwrap();
        assert_eq!(reply[0]["id"], "a");
        assert_eq!(reply[1]["id"], "b");
    }

    #[tokio::test]
    async fn a_cancelled_call_does_not_disturb_the_next() {
        let fixture = guardian(2, 0, 1 << 20);
        let transport = &fixture.transport;
        // Held by the Guardian until a second request arrives; give up on it.
        let abandoned =
            tokio::time::timeout(Duration::from_millis(200), transport.call(request(1))).await;
        assert!(abandoned.is_err());
        // Its late reply (id 1) arrives along with this one and is dropped.
        let reply = transport.call(request(2)).await.unwrap();
        assert_eq!(result_id(&reply), 2);
        let again = tokio::join!(transport.call(request(3)), transport.call(request(4)));
        assert_eq!(result_id(&again.0.unwrap()), 3);
        assert_eq!(result_id(&again.1.unwrap()), 4);
    }

    #[tokio::test]
    async fn child_exit_fails_waiting_calls_and_later_calls_at_once() {
        let fixture = guardian(2, 2, 1 << 20);
        let transport = &fixture.transport;
        let (first, second) = tokio::join!(transport.call(request(1)), transport.call(request(2)));
        for result in [first, second] {
            let err = result.unwrap_err();
            assert!(
                matches!(&err, TransportError::Closed(m) if m.contains("stdout")),
                "{err}"
            );
        }
        let started = Instant::now();
        let err = transport.call(request(3)).await.unwrap_err();
        assert!(matches!(err, TransportError::Closed(_)), "{err}");
        assert!(started.elapsed() < Duration::from_millis(100));
    }

    #[tokio::test]
    async fn the_exit_code_is_reported() {
        let fixture = guardian(1, 1, 1 << 20);
        let err = fixture.transport.call(request(1)).await.unwrap_err();
        assert!(err.to_string().contains("code 3"), "{err}");
    }

    #[tokio::test]
    async fn an_oversized_reply_fails_the_call_and_the_stream_goes_on() {
        let fixture = guardian(1, 0, 1024);
        let huge = Bytes::from_static(br#"{"id":1,"method":"huge"}"#);
        let err = fixture.transport.call(huge).await.unwrap_err();
        assert!(
            matches!(err, TransportError::FrameTooLarge { max: 1024, .. }),
            "{err}"
        );
        assert_eq!(
            result_id(&fixture.transport.call(request(2)).await.unwrap()),
            2
        );
    }

    #[tokio::test]
    async fn requests_are_checked_before_sending() {
        let fixture = guardian(1, 0, 64);
        let no_id = fixture
            .transport
            .call(Bytes::from_static(b"{\"method\":\"m\"}"))
            .await;
        assert!(matches!(no_id, Err(TransportError::Unroutable(_))));
        let big = Bytes::from(format!(r#"{{"id":1,"pad":"{}"}}"#, "x".repeat(64)));
        let too_big = fixture.transport.call(big).await;
        assert!(matches!(too_big, Err(TransportError::FrameTooLarge { .. })));
    }

    #[tokio::test]
    async fn a_guardian_speaking_newline_json_is_malformed() {
        let command = [
            "sh",
            "-c",
            r#"read line; echo '{"id":1,"result":{}}'; exec sleep 5"#,
        ];
        let command: Vec<String> = command.iter().map(|s| s.to_string()).collect();
        let transport = StdioTransport::spawn(&command, &BTreeMap::new(), 1024).unwrap();
        let err = transport.call(request(1)).await.unwrap_err();
        assert!(matches!(err, TransportError::Malformed(_)), "{err}");
    }

    #[tokio::test]
    async fn a_missing_program_is_named() {
        let command = vec!["/no/such/guardian".to_owned()];
        let err = StdioTransport::spawn(&command, &BTreeMap::new(), 1024).unwrap_err();
        assert!(matches!(err, TransportError::Spawn { .. }));
        assert!(err.to_string().contains("/no/such/guardian"), "{err}");
    }

    #[tokio::test]
    async fn dropping_the_transport_stops_the_child() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let script = format!("echo $$ > {}; exec cat > /dev/null", pid_file.display());
        let command: Vec<String> = vec!["sh".into(), "-c".into(), script];
        let transport = StdioTransport::spawn(&command, &BTreeMap::new(), 1024).unwrap();
        let pid = wait_for_pid(&pid_file).await;
        drop(transport);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Path::new(&format!("/proc/{pid}")).exists() && !is_zombie(pid) {
            assert!(
                Instant::now() < deadline,
                "the Guardian child is still running"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn wait_for_pid(path: &Path) -> u32 {
        for _ in 0..250 {
            if let Ok(text) = std::fs::read_to_string(path) {
                if let Ok(pid) = text.trim().parse() {
                    return pid;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("the child never wrote its pid");
    }

    fn is_zombie(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            stat.rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z'))
        })
    }
}
