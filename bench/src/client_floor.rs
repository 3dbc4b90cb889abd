//! The ACS client floor of the remote-Guardian figures: what acs-proxy's
//! own ACS client costs one sequential `tools/call` when nothing else of
//! the gateway runs around it.
//!
//! A client process (`acs-proxy-bench client-floor`, pinned like everything
//! else) builds acs-proxy's `RemoteGuardian` from the configuration the
//! suite's remote run used (`guardian::remote::from_config`: the same
//! transport, secret, key id and settings; over stdio it spawns the same
//! Guardian command) and asks it what acs-proxy asks per call with
//! `[guardian] batch = true`: the request's two hooks
//! (`protocols/MCP/tools/call`, `steps/toolCallRequest`) as one batch, then
//! the answer's two (`protocols/MCP/tools/call`, `steps/toolCallResult`).
//! Each batch is signed, sent, verified and read by acs-proxy's code,
//! against the suite's deciding Guardian. There is no relay, MCP server,
//! policy or audit log, so what a call costs here beyond the Guardian's
//! service time is the part of acs-proxy's remote-Guardian figure that its
//! ACS client sets by itself, with the caches the Guardian's service leaves
//! behind, as in the suite's runs.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Instant;

use acs_proxy::config::Config;
use acs_proxy::guardian::remote::RemoteGuardian;
use acs_proxy::guardian::Guardian;
use acs_proxy_bench::guardian_call::{metadata, Call, MCP_VERSION};
use serde::{Deserialize, Serialize};

use crate::context::Context;
use crate::stats::percentile;
use crate::timed_guardian::{fetch_stats, StatsAt};

/// What one run of the client floor measured, per sequential call (two
/// batches).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClientFloor {
    /// A call's two decisions as the client saw them: median.
    pub p50_us: f64,
    /// A call's two decisions: 99th percentile.
    pub p99_us: f64,
    /// The Guardian's timed service per call (mean, both batches).
    pub service_us: f64,
    /// `p50_us` less `service_us`: the ACS client's share of a call.
    pub beyond_service_us: f64,
    /// The client process's CPU per call.
    pub client_cpu_us: f64,
    /// The Guardian process's CPU per call.
    pub guardian_cpu_us: f64,
    /// The mean request body, in bytes.
    pub request_bytes: usize,
    /// The mean reply body, in bytes.
    pub reply_bytes: usize,
}

/// How many calls, and the size of the `tools/call` they are about.
pub struct Load {
    /// Calls before the measured ones.
    pub warmup: usize,
    /// Calls measured, one at a time.
    pub calls: usize,
    /// The size of the `tools/call` request line.
    pub request_bytes: usize,
}

/// The client: runs `load` through the remote Guardian `config` describes,
/// on a one-thread runtime as acs-proxy runs a stdio session; the
/// Guardian's `/stats` are at `stats`.
pub fn run_client(config: &Path, stats: StatsAt, load: &Load) -> Result<ClientFloor, String> {
    let config = Config::load(config).map_err(|e| format!("{}: {e}", config.display()))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    runtime.block_on(async {
        let guardian = acs_proxy::guardian::remote::from_config(&config)
            .map_err(|e| format!("remote Guardian: {e}"))?;
        measure_calls(&guardian, stats, load).await
    })
}

async fn measure_calls(
    guardian: &RemoteGuardian,
    stats: StatsAt,
    load: &Load,
) -> Result<ClientFloor, String> {
    let metadata = metadata();
    guardian
        .hello(&metadata, Some(MCP_VERSION))
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    let call = Call::new(load.request_bytes)?;
    for _ in 0..load.warmup {
        call.decide(guardian, &metadata).await?;
    }
    let stats_addr = stats.resolve()?;
    fetch_stats(stats_addr)?;
    let pid = std::process::id();
    let cpu_before = crate::procfs::cpu_ns(pid);
    let mut times = Vec::with_capacity(load.calls);
    for _ in 0..load.calls {
        let started = Instant::now();
        call.decide(guardian, &metadata).await?;
        times.push(started.elapsed().as_nanos() as u64);
    }
    let client_cpu = crate::procfs::cpu_ns(pid).saturating_sub(cpu_before);
    let service = fetch_stats(stats_addr)?;
    times.sort_unstable();
    let per_call = |ns: u64| ns as f64 / 1000.0 / load.calls.max(1) as f64;
    let p50_us = percentile(&times, 50.0) as f64 / 1000.0;
    let service_us = per_call(service.total_ns);
    let (request_bytes, reply_bytes) = service.mean_bodies().unwrap_or_default();
    Ok(ClientFloor {
        p50_us,
        p99_us: percentile(&times, 99.0) as f64 / 1000.0,
        service_us,
        beyond_service_us: p50_us - service_us,
        client_cpu_us: per_call(client_cpu),
        guardian_cpu_us: per_call(service.process_cpu_ns),
        request_bytes,
        reply_bytes,
    })
}

/// Measures the client floor over HTTP and over stdio with the suite's own
/// remote configurations (`configs`: `[HTTP, stdio]`); the HTTP Guardian
/// serves `/stats` at `http_stats`, the stdio one writes its address to
/// `stdio_stats_file`. Returns `[HTTP, stdio]`.
pub fn measure(
    context: &Context,
    load: &Load,
    configs: [&Path; 2],
    http_stats: SocketAddr,
    stdio_stats_file: &Path,
) -> Result<[ClientFloor; 2], String> {
    let http = client(
        context,
        load,
        configs[0],
        &["--stats-addr".into(), http_stats.to_string()],
    )?;
    let _ = std::fs::remove_file(stdio_stats_file);
    let stdio = client(
        context,
        load,
        configs[1],
        &[
            "--stats-addr-file".into(),
            crate::context::absolute(stdio_stats_file),
        ],
    )?;
    Ok([http, stdio])
}

/// Runs the client floor as a pinned process and reads its JSON answer.
fn client(
    context: &Context,
    load: &Load,
    config: &Path,
    stats: &[String],
) -> Result<ClientFloor, String> {
    let mut args = vec![
        "--config".into(),
        crate::context::absolute(config),
        "--warmup".into(),
        load.warmup.to_string(),
        "--calls".into(),
        load.calls.to_string(),
        "--request-bytes".into(),
        load.request_bytes.to_string(),
    ];
    args.extend(stats.iter().cloned());
    context.run_helper("client-floor", &args)
}

/// Where `client-floor` finds the Guardian's `/stats`.
pub fn stats_at(addr: Option<SocketAddr>, file: Option<PathBuf>) -> Result<StatsAt, String> {
    match (addr, file) {
        (Some(addr), None) => Ok(StatsAt::Addr(addr)),
        (None, Some(file)) => Ok(StatsAt::File(file)),
        _ => Err("client-floor: give one of --stats-addr and --stats-addr-file".into()),
    }
}
