//! HTTP/1.1 written by hand, for the two ways real servers close a
//! connection the client still keeps in its pool:
//!
//! - [`Closing::AfterAnswer`] (`--close-after-answer`): every connection is
//!   closed once its first answer is written, as an HTTP/1.0-style server
//!   or a server behind a proxy that does not keep connections alive does;
//!   with `--close-delay-ms` the close comes that much later, and a request
//!   sent meanwhile is never read, as when the close takes that long to
//!   cross the network;
//! - [`Closing::Idle`] (`--keep-alive-ms`): a connection that waits longer
//!   than the keep-alive time for its next request is closed.
//!
//! Neither says so with `Connection: close`: the client learns only when
//! the socket closes, possibly just after it sent the next request there.
//! That is the race a pooled client must survive, and it is why this is not
//! hyper: hyper announces `Connection: close` whenever it closes a
//! connection after a response.
//!
//! One request at a time per connection: a request line, headers, a body
//! of `Content-Length` bytes (chunked bodies are refused with 411). The
//! answer is the same as [`crate::http`]'s: 200 with the JSON-RPC reply,
//! 405 for other methods, `drop` closes without a response and `silent`
//! never answers.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::guardian::Guardian;
use crate::reply::Reply;

/// The largest request head accepted; real heads are a few hundred bytes.
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// When the server closes a connection, without announcing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closing {
    /// After the first answer on it is written, once this delay has passed
    /// (nothing more is read meanwhile).
    AfterAnswer(Duration),
    /// Once it has waited this long for its next request.
    Idle(Duration),
}

/// Serves `guardian` on `listener`, closing connections as `closing` says,
/// until the task is dropped.
pub async fn run(listener: TcpListener, guardian: Arc<Guardian>, closing: Closing) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(serve_connection(stream, Arc::clone(&guardian), closing));
            }
            Err(err) => {
                crate::log(&format!("accept failed: {err}"));
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// A request as far as the Guardian cares: its method and body.
struct Request {
    post: bool,
    body: Vec<u8>,
}

/// Why a connection ends without (another) answer.
enum End {
    /// The client closed it, or the idle time passed.
    Quiet,
    /// The client sent something this server does not take; answer with
    /// this status and close.
    Refuse(&'static str),
}

/// Answers requests on one connection until it is closed. Returning drops
/// the stream, which closes the socket (with a reset if the client's next
/// request is already waiting unread, as a real server's close would).
async fn serve_connection(mut stream: TcpStream, guardian: Arc<Guardian>, closing: Closing) {
    let mut buffer = Vec::new();
    loop {
        let request = match read_request(&mut stream, &mut buffer, closing).await {
            Ok(request) => request,
            Err(End::Quiet) => return,
            Err(End::Refuse(status)) => {
                let _ = write_response(&mut stream, status, "text/plain", b"").await;
                return;
            }
        };
        if !request.post {
            let body = b"POST a JSON-RPC request\n";
            let status = "405 Method Not Allowed";
            if write_response(&mut stream, status, "text/plain", body)
                .await
                .is_err()
            {
                return;
            }
        } else {
            let outcome = guardian.handle(&request.body);
            if !outcome.delay.is_zero() {
                tokio::time::sleep(outcome.delay).await;
            }
            match outcome.reply {
                Reply::Send(bytes) => {
                    let sent = write_response(&mut stream, "200 OK", "application/json", &bytes);
                    if sent.await.is_err() {
                        return;
                    }
                }
                Reply::Drop => return,
                Reply::Silent => std::future::pending::<()>().await,
            }
        }
        if let Closing::AfterAnswer(delay) = closing {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            // FIN after the answer, and no `Connection: close` before it.
            let _ = stream.shutdown().await;
            return;
        }
    }
}

/// Reads one request. With [`Closing::Idle`], waiting longer than the
/// keep-alive time for its first byte ends the connection.
async fn read_request(
    stream: &mut TcpStream,
    buffer: &mut Vec<u8>,
    closing: Closing,
) -> Result<Request, End> {
    if buffer.is_empty() {
        let first = read_more(stream, buffer);
        let read = match closing {
            Closing::Idle(idle) => tokio::time::timeout(idle, first)
                .await
                .map_err(|_| End::Quiet)?,
            Closing::AfterAnswer(_) => first.await,
        };
        read?;
    }
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        if buffer.len() > MAX_HEAD_BYTES {
            return Err(End::Refuse("431 Request Header Fields Too Large"));
        }
        read_more(stream, buffer).await?;
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let post = lines
        .next()
        .is_some_and(|line| line.split(' ').next() == Some("POST"));
    let mut length = 0usize;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(End::Refuse("411 Length Required"));
        }
        if name.eq_ignore_ascii_case("content-length") {
            length = value.parse().map_err(|_| End::Refuse("400 Bad Request"))?;
        }
    }
    if length > crate::http::MAX_BODY_BYTES {
        return Err(End::Refuse("413 Content Too Large"));
    }
    while buffer.len() < head_end + length {
        read_more(stream, buffer).await?;
    }
    let body = buffer[head_end..head_end + length].to_vec();
    buffer.drain(..head_end + length);
    Ok(Request { post, body })
}

/// Appends what the socket has to `buffer`; end of stream or an error
/// ends the connection.
async fn read_more(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Result<(), End> {
    let mut chunk = [0u8; 16 * 1024];
    match stream.read(&mut chunk).await {
        Ok(0) | Err(_) => Err(End::Quiet),
        Ok(read) => {
            buffer.extend_from_slice(&chunk[..read]);
            Ok(())
        }
    }
}

/// Writes a complete response in one write: status line, the two headers
/// a client needs, the body.
async fn write_response(
    stream: &mut TcpStream,
    status: &str,
    content_type: &str,
    body: &[u8],
) -> std::io::Result<()> {
    let mut response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    response.extend_from_slice(body);
    stream.write_all(&response).await?;
    stream.flush().await
}
