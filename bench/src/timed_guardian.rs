//! `acs-proxy-bench serve-guardian`: the workspace's test Guardian
//! (`acs-test-guardian`, allow-everything script with batches on) served
//! over HTTP/1.1, or with `--stdio` over its stdin/stdout (Content-Length
//! frames, as acs-proxy spawns a stdio Guardian), timing its own service of
//! every request: from the whole body read to the signed reply ready.
//! `GET /stats` on the HTTP listener (also opened in stdio mode, for this
//! alone) returns those times since the previous `GET /stats` and starts a
//! new window, so the remote-Guardian suite can subtract the Guardian's own
//! time from the proxy's. It also returns the CPU the whole Guardian
//! process spent in the window: its transport (HTTP server or frames,
//! wake-ups) beside the timed service, which on a shared core sits on
//! every call's path as well, and the bytes of the requests and replies.
//!
//! With `--echo-reply-bytes` it decides nothing: every request gets the
//! same prepared reply at once (see [`crate::exchange_floor`]), so what a
//! client measures against it is the exchange itself, the floor under any
//! Guardian's answer.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use acs_test_guardian::guardian::{Config, Guardian, Transport};
use acs_test_guardian::reply::Reply;
use acs_test_guardian::script::Script;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;

use crate::stats::percentile;

/// The Guardian's service times over one window, as `GET /stats` answers.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct ServiceTimes {
    /// POSTs served (a batch counts once).
    pub requests: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    /// Sum over the window.
    pub total_ns: u64,
    /// CPU (user + system) of the Guardian process over the window.
    #[serde(default)]
    pub process_cpu_ns: u64,
    /// Bytes of the request bodies over the window.
    #[serde(default)]
    pub request_bytes: u64,
    /// Bytes of the reply bodies over the window.
    #[serde(default)]
    pub reply_bytes: u64,
}

impl ServiceTimes {
    /// The mean request and reply body of the window, in bytes.
    pub fn mean_bodies(&self) -> Option<(usize, usize)> {
        let per_request = |total: u64| usize::try_from(total / self.requests).ok();
        if self.requests == 0 {
            return None;
        }
        Some((
            per_request(self.request_bytes)?,
            per_request(self.reply_bytes)?,
        ))
    }
}

/// How the Guardian answers.
pub enum Answering {
    /// Decides every request with the test Guardian.
    Decide,
    /// Answers every request with this prepared reply, deciding nothing.
    Echo(Vec<u8>),
    /// Decides every request on two test Guardians, each with its own
    /// sessions and chains, and answers with the first's reply: the
    /// Guardian's work doubled, the replies unchanged.
    DecideTwice,
}

/// The Guardian and the service times of the current window.
struct Timed {
    guardian: Guardian,
    /// The second Guardian of [`Answering::DecideTwice`].
    second: Option<Guardian>,
    answering: Answering,
    times: Mutex<Vec<u64>>,
    /// Request and reply bytes of the current window.
    bytes: Mutex<(u64, u64)>,
    /// The process's CPU time when the window began.
    cpu_at_start: Mutex<u64>,
}

/// Serves on `addr` (or, with `stdio`, on stdin/stdout, with `addr` for
/// `/stats` only) until killed or stdin closes; writes the bound address
/// to `addr_file`.
pub fn serve(
    addr: SocketAddr,
    addr_file: &Path,
    secret: Vec<u8>,
    stdio: bool,
    answering: Answering,
) -> Result<(), String> {
    let second = match answering {
        Answering::DecideTwice => Some(allow_everything(secret.clone(), stdio)?),
        _ => None,
    };
    let timed = Arc::new(Timed {
        guardian: allow_everything(secret, stdio)?,
        second,
        answering,
        times: Mutex::new(Vec::with_capacity(1 << 20)),
        bytes: Mutex::new((0, 0)),
        cpu_at_start: Mutex::new(crate::procfs::cpu_ns(std::process::id())),
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    let listener = runtime
        .block_on(TcpListener::bind(addr))
        .map_err(|e| format!("bind {addr}: {e}"))?;
    let bound = listener.local_addr().map_err(|e| format!("{e}"))?;
    std::fs::write(addr_file, bound.to_string())
        .map_err(|e| format!("{}: {e}", addr_file.display()))?;
    let http = accept(listener, timed.clone());
    if !stdio {
        runtime.block_on(http);
        return Ok(());
    }
    // The frames are served by a plain loop on this thread, as a Guardian
    // serving one pipe would: tokio's stdin and stdout hand every read and
    // write to a blocking-pool thread, wake-ups the proxy's figure would be
    // charged with. `/stats` is served from a thread of its own.
    std::thread::spawn(move || runtime.block_on(http));
    serve_stdio(&timed)
}

async fn accept(listener: TcpListener, timed: Arc<Timed>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let timed = timed.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| answer(timed.clone(), request));
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Answers Content-Length frames on stdin, in order, until stdin closes;
/// each reply goes out in one write.
fn serve_stdio(timed: &Timed) -> Result<(), String> {
    use std::io::Write as _;
    use std::os::fd::AsFd as _;
    let mut input = std::io::stdin().lock();
    // A duplicate of stdout as a plain file: unbuffered, so a frame is one
    // write, where `Stdout` would split it at the header's line end.
    let mut output = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .map(std::fs::File::from)
        .map_err(|e| format!("stdout: {e}"))?;
    let mut frame = Vec::new();
    while let Some(body) = acs_test_guardian::stdio::read_frame_blocking(&mut input)
        .map_err(|e| format!("stdin: {e}"))?
    {
        let Reply::Send(bytes) = timed.time(&body) else {
            continue;
        };
        frame.clear();
        let _ = write!(frame, "Content-Length: {}\r\n\r\n", bytes.len());
        frame.extend_from_slice(&bytes);
        output
            .write_all(&frame)
            .map_err(|e| format!("stdout: {e}"))?;
    }
    Ok(())
}

/// The test Guardian allowing everything, batches on.
fn allow_everything(secret: Vec<u8>, stdio: bool) -> Result<Guardian, String> {
    let script = Script::parse(r#"{"batch": true}"#).map_err(|e| format!("script: {e}"))?;
    Ok(Guardian::new(Config {
        secret,
        script,
        transport: if stdio {
            Transport::Stdio
        } else {
            Transport::Http
        },
        default_key_id: "default".into(),
        recorder: None,
        verbose: false,
    }))
}

impl Timed {
    /// Decides one request body (or echoes), recording how long it took
    /// and the bytes that came and went.
    fn time(&self, body: &[u8]) -> Reply {
        let started = Instant::now();
        let reply = match &self.answering {
            Answering::Decide | Answering::DecideTwice => {
                if let Some(second) = &self.second {
                    std::hint::black_box(second.handle(body));
                }
                self.guardian.handle(body).reply
            }
            Answering::Echo(reply) => Reply::Send(reply.clone()),
        };
        let elapsed = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        if let Ok(mut times) = self.times.lock() {
            times.push(elapsed);
        }
        if let (Ok(mut bytes), Reply::Send(sent)) = (self.bytes.lock(), &reply) {
            bytes.0 += body.len() as u64;
            bytes.1 += sent.len() as u64;
        }
        reply
    }
}

async fn answer(
    timed: Arc<Timed>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if request.method() == Method::GET && request.uri().path() == "/stats" {
        return Ok(stats(&timed));
    }
    if request.method() != Method::POST {
        return Ok(reply(StatusCode::METHOD_NOT_ALLOWED, Bytes::new()));
    }
    let Ok(body) = request.into_body().collect().await.map(|b| b.to_bytes()) else {
        return Ok(reply(StatusCode::BAD_REQUEST, Bytes::new()));
    };
    match timed.time(&body) {
        Reply::Send(bytes) => Ok(reply(StatusCode::OK, Bytes::from(bytes))),
        // The allow-everything script never drops or stays silent.
        Reply::Drop | Reply::Silent => Ok(reply(StatusCode::INTERNAL_SERVER_ERROR, Bytes::new())),
    }
}

fn stats(timed: &Timed) -> Response<Full<Bytes>> {
    let mut window = match timed.times.lock() {
        Ok(mut times) => std::mem::take(&mut *times),
        Err(_) => Vec::new(),
    };
    window.sort_unstable();
    let cpu_now = crate::procfs::cpu_ns(std::process::id());
    let process_cpu_ns = match timed.cpu_at_start.lock() {
        Ok(mut start) => cpu_now.saturating_sub(std::mem::replace(&mut *start, cpu_now)),
        Err(_) => 0,
    };
    let (request_bytes, reply_bytes) = match timed.bytes.lock() {
        Ok(mut bytes) => std::mem::take(&mut *bytes),
        Err(_) => (0, 0),
    };
    let times = ServiceTimes {
        request_bytes,
        reply_bytes,
        requests: window.len() as u64,
        p50_ns: percentile(&window, 50.0),
        p99_ns: percentile(&window, 99.0),
        total_ns: window.iter().sum(),
        process_cpu_ns,
    };
    let body = serde_json::to_vec(&times).unwrap_or_default();
    reply(StatusCode::OK, Bytes::from(body))
}

fn reply(code: StatusCode, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = code;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// Where a timed Guardian's `/stats` is served.
pub enum StatsAt {
    /// A Guardian the suite started, at a known address.
    Addr(SocketAddr),
    /// A Guardian acs-proxy spawns over stdio, which writes its stats
    /// address to this file once it runs.
    File(std::path::PathBuf),
}

impl StatsAt {
    /// The address, waiting for a spawned Guardian to write it.
    pub fn resolve(&self) -> Result<SocketAddr, String> {
        match self {
            StatsAt::Addr(addr) => Ok(*addr),
            StatsAt::File(path) => {
                crate::suite_guardian::wait_for_addr_file(path, std::time::Duration::from_secs(30))
            }
        }
    }
}

/// Fetches and resets the service-time window of the Guardian at `addr`.
pub fn fetch_stats(addr: SocketAddr) -> Result<ServiceTimes, String> {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(addr).map_err(|e| format!("stats: {e}"))?;
    stream
        .write_all(b"GET /stats HTTP/1.1\r\nHost: guardian\r\nConnection: close\r\n\r\n")
        .map_err(|e| format!("stats: {e}"))?;
    let mut answer = Vec::new();
    stream
        .read_to_end(&mut answer)
        .map_err(|e| format!("stats: {e}"))?;
    let body = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|at| &answer[at + 4..])
        .ok_or("stats: no HTTP body")?;
    serde_json::from_slice(body).map_err(|e| format!("stats: {e}"))
}
