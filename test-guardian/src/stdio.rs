//! The stdio transport: LSP-style frames on stdin/stdout.
//!
//! A frame is `Content-Length: N\r\n` (header names case-insensitive, other
//! headers ignored, a bare `\n` line end accepted), an empty line, then N
//! bytes of UTF-8 JSON. Requests are processed in arrival order (so chain
//! entries follow the order the client sent them), but each reply is
//! written when its delay has passed, so the reply to a later request may
//! overtake a `late` one. `drop` ends serving once the replies queued
//! before it are written (the binary then exits with status 0, unanswered
//! requests and all). At EOF on the input the Guardian first writes the
//! delayed replies still pending.

use std::sync::Arc;

use anyhow::{bail, Context as _};
use tokio::io::{
    AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader,
};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::guardian::Guardian;
use crate::reply::Reply;

/// Frames larger than this are refused (the transport gives up).
const MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;

/// What the writer task is told to do, in order.
enum Out {
    /// Write one frame.
    Frame(Vec<u8>),
    /// Stop answering (the `drop` action).
    Drop,
}

/// Why serving ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// EOF on the input, after every pending reply was written.
    Eof,
    /// A `drop` action: the replies before it were written, nothing after.
    Dropped,
}

/// Serves `guardian` on this process's stdin/stdout until EOF; a `drop`
/// action exits the process with status 0 (stdin cannot be unblocked).
pub async fn serve(guardian: Arc<Guardian>) -> anyhow::Result<()> {
    let input = BufReader::new(tokio::io::stdin());
    match serve_on(guardian, input, tokio::io::stdout()).await? {
        End::Eof => Ok(()),
        End::Dropped => {
            crate::log("drop: exiting without answering");
            std::process::exit(0)
        }
    }
}

/// Serves `guardian` on any reader/writer pair until EOF or a `drop`.
pub async fn serve_on<R, W>(guardian: Arc<Guardian>, mut input: R, output: W) -> anyhow::Result<End>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (sender, receiver) = mpsc::unbounded_channel();
    let mut writer = tokio::spawn(write_frames(receiver, output));
    // Dropping the set on return aborts replies still waiting out a delay.
    let mut pending = JoinSet::new();
    let read_all = async {
        while let Some(body) = read_frame(&mut input).await? {
            let outcome = guardian.handle(&body);
            let sender = sender.clone();
            pending.spawn(async move {
                if !outcome.delay.is_zero() {
                    tokio::time::sleep(outcome.delay).await;
                }
                let out = match outcome.reply {
                    Reply::Send(bytes) => Out::Frame(bytes),
                    Reply::Drop => Out::Drop,
                    Reply::Silent => return,
                };
                // Fails only once the writer has stopped, after a drop.
                let _ = sender.send(out);
            });
        }
        anyhow::Ok(())
    };
    tokio::select! {
        read = read_all => {
            read?;
            crate::log("input closed; finishing pending replies");
        }
        written = &mut writer => return written.context("the output writer panicked")?,
    }
    let finish = async {
        while pending.join_next().await.is_some() {}
        drop(sender);
    };
    tokio::select! {
        () = finish => {}
        written = &mut writer => return written.context("the output writer panicked")?,
    }
    writer.await.context("the output writer panicked")?
}

/// Writes frames until every sender is dropped ([`End::Eof`]) or a
/// [`Out::Drop`] arrives ([`End::Dropped`]).
async fn write_frames<W>(
    mut receiver: mpsc::UnboundedReceiver<Out>,
    mut output: W,
) -> anyhow::Result<End>
where
    W: AsyncWrite + Unpin,
{
    while let Some(out) = receiver.recv().await {
        match out {
            Out::Frame(body) => {
                let header = format!("Content-Length: {}\r\n\r\n", body.len());
                output.write_all(header.as_bytes()).await?;
                output.write_all(&body).await?;
                output.flush().await?;
            }
            Out::Drop => return Ok(End::Dropped),
        }
    }
    Ok(End::Eof)
}

/// Reads one frame body; `None` at a clean EOF between frames.
pub async fn read_frame<R>(input: &mut R) -> anyhow::Result<Option<Vec<u8>>>
where
    R: AsyncBufRead + Unpin,
{
    let mut header = FrameHeader::default();
    let mut line = String::new();
    loop {
        line.clear();
        let read = input
            .read_line(&mut line)
            .await
            .context("reading a frame header")?;
        if read == 0 {
            return header.at_eof();
        }
        if header.take(&line)? {
            break;
        }
    }
    let mut body = vec![0; header.body_length()?];
    input
        .read_exact(&mut body)
        .await
        .context("EOF inside a frame body")?;
    Ok(Some(body))
}

/// [`read_frame`] from a blocking reader, for a Guardian that serves one
/// pipe from one thread.
pub fn read_frame_blocking<R>(input: &mut R) -> anyhow::Result<Option<Vec<u8>>>
where
    R: std::io::BufRead,
{
    let mut header = FrameHeader::default();
    let mut line = String::new();
    loop {
        line.clear();
        let read = input
            .read_line(&mut line)
            .context("reading a frame header")?;
        if read == 0 {
            return header.at_eof();
        }
        if header.take(&line)? {
            break;
        }
    }
    let mut body = vec![0; header.body_length()?];
    input
        .read_exact(&mut body)
        .context("EOF inside a frame body")?;
    Ok(Some(body))
}

/// What the header lines of one frame have said so far.
#[derive(Default)]
struct FrameHeader {
    length: Option<usize>,
    seen: bool,
}

impl FrameHeader {
    /// Takes one header line; `true` once the empty line ends the header.
    /// Empty lines before any header are tolerated between frames.
    fn take(&mut self, line: &str) -> anyhow::Result<bool> {
        let text = line.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            return Ok(self.seen);
        }
        self.seen = true;
        let Some((name, value)) = text.split_once(':') else {
            bail!("malformed frame header line {text:?}");
        };
        if name.trim().eq_ignore_ascii_case("content-length") {
            let value = value.trim();
            let parsed: usize = value
                .parse()
                .with_context(|| format!("bad Content-Length {value:?}"))?;
            self.length = Some(parsed);
        }
        Ok(false)
    }

    /// The input ended: between frames that is the end, inside a header
    /// an error.
    fn at_eof(&self) -> anyhow::Result<Option<Vec<u8>>> {
        if self.seen {
            bail!("EOF inside a frame header");
        }
        Ok(None)
    }

    /// The body's length, once the header has ended.
    fn body_length(&self) -> anyhow::Result<usize> {
        let Some(length) = self.length else {
            bail!("frame without a Content-Length header");
        };
        if length > MAX_FRAME_BYTES {
            bail!("frame of {length} bytes is over the {MAX_FRAME_BYTES}-byte limit");
        }
        Ok(length)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_with_mixed_case_headers_and_line_ends() {
        let bytes: &[u8] =
            b"content-length: 2\r\nContent-Type: application/json\r\n\r\n{}CONTENT-LENGTH:3\n\n[1]";
        let mut input = BufReader::new(bytes);
        assert_eq!(
            read_frame(&mut input).await.expect("ok"),
            Some(b"{}".to_vec())
        );
        assert_eq!(
            read_frame(&mut input).await.expect("ok"),
            Some(b"[1]".to_vec())
        );
        assert_eq!(read_frame(&mut input).await.expect("ok"), None);
    }

    fn guardian(script: &str) -> Arc<Guardian> {
        use crate::guardian::{Config, Transport};
        Arc::new(Guardian::new(Config {
            secret: b"stdio-unit-secret".to_vec(),
            script: crate::script::Script::parse(script).expect("valid"),
            transport: Transport::Stdio,
            default_key_id: "default".into(),
            recorder: None,
            verbose: false,
        }))
    }

    fn frames(bodies: &[&str]) -> Vec<u8> {
        bodies
            .iter()
            .flat_map(|body| format!("Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes())
            .collect()
    }

    /// Serves `input` and returns how it ended and the reply bodies.
    async fn run(script: &str, input: Vec<u8>) -> (End, Vec<String>) {
        let (output, mut replies) = tokio::io::duplex(1 << 16);
        let end = serve_on(guardian(script), BufReader::new(&input[..]), output)
            .await
            .expect("serves");
        let mut written = Vec::new();
        replies
            .read_to_end(&mut written)
            .await
            .expect("read replies");
        let mut reader = BufReader::new(&written[..]);
        let mut bodies = Vec::new();
        while let Some(body) = read_frame(&mut reader).await.expect("frame") {
            bodies.push(String::from_utf8(body).expect("utf8"));
        }
        (end, bodies)
    }

    #[tokio::test]
    async fn eof_waits_for_late_replies_and_drop_stops_early() {
        let late = r#"{"rules": [{"method": "system/ping", "then": {"action": "late", "delay_ms": 50, "then": {"action": "allow"}}}]}"#;
        let ping = r#"{"jsonrpc":"2.0","id":1,"method":"system/ping","params":{"request_id":"p"}}"#;
        let (end, bodies) = run(late, frames(&[ping, "not json"])).await;
        assert_eq!(end, End::Eof);
        assert_eq!(bodies.len(), 2);
        assert!(
            bodies[0].contains("-32700"),
            "the parse error overtakes the late ping"
        );
        assert!(bodies[1].contains("\"allow\""));

        let drop = r#"{"rules": [{"method": "system/ping", "then": {"action": "drop"}}]}"#;
        let (end, bodies) = run(drop, frames(&["not json", ping, "not json"])).await;
        assert_eq!(end, End::Dropped);
        assert_eq!(bodies.len(), 1, "only the reply queued before the drop");
    }

    #[tokio::test]
    async fn bad_frames_are_errors() {
        let mut no_length = BufReader::new(&b"X-Other: 1\r\n\r\n{}"[..]);
        assert!(read_frame(&mut no_length).await.is_err());
        let mut short = BufReader::new(&b"Content-Length: 10\r\n\r\n{}"[..]);
        assert!(read_frame(&mut short).await.is_err());
    }

    #[test]
    fn the_blocking_reader_reads_the_same_frames() {
        let text = b"\r\ncontent-length: 2\nX-Other: 1\r\n\r\n{}Content-Length: 3\r\n\r\n[1]";
        let mut input = &text[..];
        assert_eq!(
            read_frame_blocking(&mut input).unwrap(),
            Some(b"{}".to_vec())
        );
        assert_eq!(
            read_frame_blocking(&mut input).unwrap(),
            Some(b"[1]".to_vec())
        );
        assert_eq!(read_frame_blocking(&mut input).unwrap(), None);
        let mut inside_header = &b"Content-Length: 2\r\n"[..];
        assert!(read_frame_blocking(&mut inside_header).is_err());
        let mut short = &b"Content-Length: 10\r\n\r\n{}"[..];
        assert!(read_frame_blocking(&mut short).is_err());
    }
}
