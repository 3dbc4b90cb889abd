//! The exchange floor of the remote-Guardian figures: what one request and
//! its reply cost between two processes on the suite's core when nothing is
//! decided, signed or checked on either side.
//!
//! A client (`acs-proxy-bench exchange-floor`, pinned like everything else)
//! sends bodies of the size acs-proxy's own requests had through
//! acs-proxy's own Guardian transports (`HttpTransport`, `StdioTransport`:
//! the pooled keep-alive `POST`, the `Content-Length` frames matched by id),
//! to the suite's Guardian server with `--echo-reply-bytes` (its HTTP
//! server or its frame loop, answering a prepared reply of the size the
//! Guardian's replies had). Each sequential call through acs-proxy makes two
//! such exchanges, so twice this round trip is a floor under what acs-proxy
//! adds beyond the Guardian's service time, before any hook, signature or
//! audit entry.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use acs_proxy::guardian::remote::transport::{
    GuardianTransport, HttpTransport, StdioTransport, TlsSettings,
};
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::context::Context;
use crate::service::Service;
use crate::stats::percentile;
use crate::timed_guardian::{fetch_stats, StatsAt};

/// The body limit the stdio transport is given (acs-proxy's default).
const MAX_FRAME: usize = 16 * 1024 * 1024;

/// What one run of the floor client measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Floor {
    /// Round trip of one exchange, as the client saw it: median.
    pub p50_us: f64,
    /// Round trip of one exchange: 99th percentile.
    pub p99_us: f64,
    /// The client process's CPU per exchange (its transport, its wake-ups).
    pub client_cpu_us: f64,
    /// The Guardian server's process CPU per exchange.
    pub guardian_cpu_us: f64,
    /// The request body sent.
    pub request_bytes: usize,
    /// The reply body received.
    pub reply_bytes: usize,
}

/// Where the floor client finds its Guardian.
pub enum Peer {
    /// An echoing Guardian listening at this `http://` URL.
    Http(String),
    /// Spawn this echoing Guardian command over stdio; it writes its
    /// `/stats` address to the file.
    Stdio(Vec<String>, std::path::PathBuf),
}

/// How many exchanges and of what size.
#[derive(Clone)]
pub struct Load {
    /// Exchanges before the measured ones.
    pub warmup: usize,
    /// Exchanges measured, one at a time.
    pub exchanges: usize,
    /// The size of each request body.
    pub request_bytes: usize,
    /// Used by [`measure`] for the echoing Guardian it starts.
    pub reply_bytes: usize,
}

/// A JSON-RPC batch of two requests, `id` first (as acs-proxy writes its
/// own), padded to about `bytes`.
pub fn request_body(bytes: usize) -> Vec<u8> {
    batch(bytes, |id, pad| {
        format!(
            r#"{{"id":"floor-{id}","jsonrpc":"2.0","method":"floor","params":{{"pad":"{pad}"}}}}"#
        )
    })
}

/// The batch of two results answering [`request_body`], padded to about
/// `bytes`.
pub fn reply_body(bytes: usize) -> Vec<u8> {
    batch(bytes, |id, pad| {
        format!(r#"{{"id":"floor-{id}","jsonrpc":"2.0","result":{{"pad":"{pad}"}}}}"#)
    })
}

fn batch(bytes: usize, element: impl Fn(u32, &str) -> String) -> Vec<u8> {
    let bare = element(1, "").len() * 2 + 3;
    let pad = "x".repeat(bytes.saturating_sub(bare) / 2);
    format!("[{},{}]", element(1, &pad), element(2, &pad)).into_bytes()
}

/// The floor client: runs `load` against `peer` on a one-thread runtime,
/// as acs-proxy runs a stdio session, and returns what it measured.
pub fn run_client(peer: Peer, load: &Load) -> Result<Floor, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    runtime.block_on(exchange(peer, load))
}

async fn exchange(peer: Peer, load: &Load) -> Result<Floor, String> {
    let (transport, stats): (Arc<dyn GuardianTransport>, StatsAt) = match peer {
        Peer::Http(url) => {
            let transport = HttpTransport::new(&url, TlsSettings::default())
                .map_err(|e| format!("{url}: {e}"))?;
            // The echoing Guardian serves `/stats` on the same listener.
            let addr = transport
                .uri()
                .authority()
                .and_then(|authority| authority.as_str().parse().ok())
                .ok_or_else(|| format!("{url}: not http://IP:PORT/..."))?;
            (Arc::new(transport), StatsAt::Addr(addr))
        }
        Peer::Stdio(command, addr_file) => {
            let transport = StdioTransport::spawn(&command, &Default::default(), MAX_FRAME)
                .map_err(|e| format!("stdio Guardian: {e}"))?;
            (Arc::new(transport), StatsAt::File(addr_file))
        }
    };
    let body = Bytes::from(request_body(load.request_bytes));
    for _ in 0..load.warmup {
        call(&*transport, &body).await?;
    }
    let stats_addr = stats.resolve()?;
    fetch_stats(stats_addr)?;
    let pid = std::process::id();
    let cpu_before = crate::procfs::cpu_ns(pid);
    let mut round_trips = Vec::with_capacity(load.exchanges);
    let mut reply_bytes = 0;
    for _ in 0..load.exchanges {
        let started = Instant::now();
        reply_bytes = call(&*transport, &body).await?;
        round_trips.push(started.elapsed().as_nanos() as u64);
    }
    let client_cpu = crate::procfs::cpu_ns(pid).saturating_sub(cpu_before);
    let guardian = fetch_stats(stats_addr)?;
    round_trips.sort_unstable();
    let per_exchange = |ns: u64| ns as f64 / 1000.0 / load.exchanges.max(1) as f64;
    Ok(Floor {
        p50_us: percentile(&round_trips, 50.0) as f64 / 1000.0,
        p99_us: percentile(&round_trips, 99.0) as f64 / 1000.0,
        client_cpu_us: per_exchange(client_cpu),
        guardian_cpu_us: per_exchange(guardian.process_cpu_ns),
        request_bytes: body.len(),
        reply_bytes,
    })
}

async fn call(transport: &dyn GuardianTransport, body: &Bytes) -> Result<usize, String> {
    let reply = tokio::time::timeout(Duration::from_secs(5), transport.call(body.clone()))
        .await
        .map_err(|_| "the echoing Guardian did not answer within 5 s".to_owned())?
        .map_err(|e| format!("exchange: {e}"))?;
    Ok(reply.len())
}

/// Measures the floor over HTTP and over stdio, each with its own load,
/// each client and Guardian a process of their own on the suite's core;
/// returns `[HTTP, stdio]`.
pub fn measure(
    context: &Context,
    loads: [&Load; 2],
    secret_b64: &str,
) -> Result<[Floor; 2], String> {
    let guardian = |extra: &[&str], addr_file: &Path, reply_bytes: usize| {
        let mut command = vec![
            crate::context::absolute(&context.bench),
            "serve-guardian".into(),
            "--addr-file".into(),
            crate::context::absolute(addr_file),
            "--secret-b64".into(),
            secret_b64.to_owned(),
            "--echo-reply-bytes".into(),
            reply_bytes.to_string(),
        ];
        command.extend(extra.iter().map(|s| (*s).to_owned()));
        context.pinned(command)
    };
    let http_addr_file = context.work.join("floor-http-addr");
    let _ = std::fs::remove_file(&http_addr_file);
    let _server = Service::spawn(
        "echoing Guardian",
        &guardian(&[], &http_addr_file, loads[0].reply_bytes),
        &[],
        &context.work.join("stderr-floor-guardian.log"),
    )?;
    let addr = crate::suite_guardian::wait_for_addr_file(&http_addr_file, Duration::from_secs(30))?;
    let http = client(
        context,
        loads[0],
        &["--url".into(), format!("http://{addr}/acs")],
    )?;
    let stdio_addr_file = context.work.join("floor-stdio-addr");
    let _ = std::fs::remove_file(&stdio_addr_file);
    let mut stdio_args = vec![
        "--stats-addr-file".to_owned(),
        crate::context::absolute(&stdio_addr_file),
        "--".to_owned(),
    ];
    stdio_args.extend(guardian(
        &["--stdio"],
        &stdio_addr_file,
        loads[1].reply_bytes,
    ));
    let stdio = client(context, loads[1], &stdio_args)?;
    Ok([http, stdio])
}

/// Runs the floor client as a pinned process and reads its JSON answer.
fn client(context: &Context, load: &Load, peer: &[String]) -> Result<Floor, String> {
    let mut args = vec![
        "--warmup".into(),
        load.warmup.to_string(),
        "--exchanges".into(),
        load.exchanges.to_string(),
        "--request-bytes".into(),
        load.request_bytes.to_string(),
    ];
    args.extend(peer.iter().cloned());
    context.run_helper("exchange-floor", &args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_json_rpc_batches_of_about_the_asked_size() {
        for bytes in [200, 1500, 4000] {
            let request: serde_json::Value = serde_json::from_slice(&request_body(bytes)).unwrap();
            let reply: serde_json::Value = serde_json::from_slice(&reply_body(bytes)).unwrap();
            assert_eq!(request[1]["id"], "floor-2");
            assert_eq!(reply[1]["id"], "floor-2");
            assert!(reply[0]["result"].is_object());
            let len = request_body(bytes).len();
            assert!(len.abs_diff(bytes) <= 2, "{len} for {bytes}");
        }
    }
}
