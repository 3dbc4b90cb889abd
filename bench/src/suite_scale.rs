//! The scale suite: acs-proxy over Streamable HTTP in front of a Streamable
//! HTTP upstream (`acs-proxy-bench serve-echo-http`: one process, no child
//! per session, so the proxy's own memory per session is what grows).
//!
//! It opens thousands of sessions, each on its own keep-alive connection,
//! `initialize` + `notifications/initialized`, and holds them idle while it
//! reads the proxy's resident set at checkpoints; then it puts a subset of
//! them under load (one call in flight per active session) while the rest
//! stay open. One run, bounded by the session and call counts.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;

use crate::context::{absolute, BenchArgs, Context};
use crate::http_client::{self, Connection, EchoCall, Endpoint, Session};
use crate::procfs::Tree;
use crate::report::PhaseResult;
use crate::service::{self, Service};
use crate::setup::{Listen, ProxySetup, Upstream};
use crate::suite_guardian::wait_for_addr_file;

/// Resident memory the proxy may use per idle session.
const TARGET_KB_PER_SESSION: f64 = 64.0;

/// Sessions being opened at once while ramping up.
const OPEN_CONCURRENCY: usize = 64;

/// Memory of one process at one moment.
#[derive(Debug, Clone, Copy)]
struct Memory {
    rss_kib: u64,
    hwm_kib: u64,
    fds: usize,
}

/// Runs the suite and returns its report section.
pub fn run(args: &BenchArgs, context: &Context) -> Result<String, String> {
    let fd_limit = service::raise_fd_limit();
    let needed = args.idle_sessions as u64 + 256;
    if fd_limit < needed {
        return Err(format!(
            "the scale suite needs {needed} open files per process; the limit is {fd_limit} (ulimit -n)"
        ));
    }
    let work = &context.work;
    let addr_file = work.join("echo-http-addr");
    let _ = std::fs::remove_file(&addr_file);
    let echo = Service::spawn(
        "HTTP echo upstream",
        &context.pinned(vec![
            absolute(&context.bench),
            "serve-echo-http".into(),
            "--addr-file".into(),
            absolute(&addr_file),
        ]),
        &[],
        &work.join("stderr-echo-http.log"),
    )?;
    let upstream = wait_for_addr_file(&addr_file, Duration::from_secs(30))?;
    let addr = service::free_addr()?;
    let audit = work.join("audit-scale.jsonl");
    let _ = std::fs::remove_file(&audit);
    let config = work.join("proxy-scale.toml");
    let setup = ProxySetup {
        name: "echo".into(),
        listen: Listen::Http {
            address: addr.to_string(),
            max_sessions: args.idle_sessions + 16,
        },
        upstream: Upstream::Url(format!("http://{upstream}/mcp")),
        decider: args.embedded()?,
        audit: audit.clone(),
    };
    std::fs::write(&config, setup.config()).map_err(|e| format!("{}: {e}", config.display()))?;
    setup.write_tokens()?;
    let log = work.join("stderr-scale.log");
    let mut proxy = Service::spawn(
        "acs-proxy",
        &context.pinned(vec![
            absolute(&context.proxy),
            "--config".into(),
            absolute(&config),
        ]),
        &[("ACS_PROXY_LOG", "warn")],
        &log,
    )?;
    proxy.wait_ready(addr, Duration::from_secs(30))?;
    let pid = proxy.pid();
    let fail = |what: String| format!("scale: {what} (log in {})", log.display());
    let endpoint = Endpoint {
        addr,
        path: "/mcp".into(),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;

    let baseline = memory(pid);
    let checkpoints: Vec<usize> = [
        args.idle_sessions / 10,
        args.idle_sessions / 2,
        args.idle_sessions,
    ]
    .into_iter()
    .filter(|&n| n > 0)
    .collect();
    let mut at_checkpoints = Vec::new();
    let mut sessions: Vec<Session> = Vec::with_capacity(args.idle_sessions);
    let mut connections: Vec<Connection> = Vec::with_capacity(args.idle_sessions);
    let ramp_start = Instant::now();
    for &target in &checkpoints {
        let opened = runtime
            .block_on(open_sessions(&endpoint, target - sessions.len()))
            .map_err(&fail)?;
        for (session, connection) in opened {
            sessions.push(session);
            connections.push(connection);
        }
        // Let the per-session set-up (inventory, audit) settle.
        std::thread::sleep(Duration::from_secs(2));
        at_checkpoints.push((sessions.len(), memory(pid)));
    }
    let ramp = ramp_start.elapsed();
    let echo_memory = others(&proxy, &echo);

    let active = args.active_sessions.min(sessions.len());
    let tree = Tree::of(pid);
    let before = tree.cpu();
    let phase = runtime
        .block_on(http_client::run_phase(
            &sessions[..active],
            &mut connections[..active],
            &EchoCall::new("text", args.request_bytes),
            args.scale_calls,
            1,
        ))
        .map_err(&fail)?;
    let after = tree.cpu();
    let under_load = memory(pid);
    let reconnects: usize = connections.iter().map(|c| c.reconnects).sum();
    let load = PhaseResult::new(phase, before, after);
    drop(connections);
    let stopped = Instant::now();
    proxy.stop(Duration::from_secs(60));
    let stop_time = stopped.elapsed();
    let entries = crate::suite_stdio::count_lines(&audit).unwrap_or(0);
    if !args.keep_audit {
        let _ = std::fs::remove_file(&audit);
    }

    let mut md = String::from("\n## scale suite: idle and active Streamable HTTP sessions\n\n");
    let _ = writeln!(
        md,
        "| idle sessions held | proxy RSS MB | RSS over the 0-session baseline MB | KB per session | proxy open fds |"
    );
    let _ = writeln!(md, "|---:|---:|---:|---:|---:|");
    let _ = writeln!(
        md,
        "| 0 | {:.1} | – | – | {} |",
        mb(baseline.rss_kib),
        baseline.fds
    );
    let mut per_session_at_full = f64::NAN;
    for (count, mem) in &at_checkpoints {
        let grown = mem.rss_kib.saturating_sub(baseline.rss_kib);
        let per_session = grown as f64 * 1.024 / *count as f64;
        per_session_at_full = per_session;
        let _ = writeln!(
            md,
            "| {count} | {:.1} | {:.1} | {per_session:.1} | {} |",
            mb(mem.rss_kib),
            mb(grown),
            mem.fds
        );
    }
    let _ = writeln!(
        md,
        "\nRamp: {} sessions opened in {:.1} s ({} at a time, 2 s settle per checkpoint). \
         Peak RSS (VmHWM) after the ramp: {:.1} MB. {}",
        sessions.len(),
        ramp.as_secs_f64(),
        OPEN_CONCURRENCY,
        mb(at_checkpoints.last().map_or(0, |(_, m)| m.hwm_kib)),
        echo_memory
    );
    let _ = writeln!(md, "\n| load | calls | calls/s | p50 µs | p99 µs | mean µs | proxy CPU/call µs | errors | proxy RSS after MB |");
    let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let _ = writeln!(
        md,
        "| {active} active sessions (one call in flight each), {} more idle | {} | {:.0} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {:.1} |",
        sessions.len() - active,
        args.scale_calls,
        load.calls_per_s,
        load.p50_us,
        load.p99_us,
        load.mean_us,
        load.root_cpu_us,
        load.errors,
        mb(under_load.rss_kib),
    );
    let _ = writeln!(md, "\n### Target (scale)\n");
    let _ = writeln!(md, "| target | goal | measured | status |");
    let _ = writeln!(md, "|---|---|---|---|");
    let _ = writeln!(
        md,
        "| proxy RSS per idle HTTP session ({} sessions) | ≤ {TARGET_KB_PER_SESSION} KB | {per_session_at_full:.1} KB | {} |",
        sessions.len(),
        if per_session_at_full <= TARGET_KB_PER_SESSION { "met" } else { "**not met**" }
    );
    let _ = writeln!(
        md,
        "\n- parameters: upstream = `acs-proxy-bench serve-echo-http` (stateless Streamable HTTP, JSON answers) at {upstream}; \
         proxy: embedded Guardian, {}, tools_call = \"both\", inventory on, audit fsync = \"batch\", max_sessions = {}; \
         each session on its own keep-alive connection ({reconnects} reopened after the proxy closed them while idle); \
         {} audit entries; SIGTERM to exit took {:.1} s; open-file limit {fd_limit}",
        args.policy_label(),
        args.idle_sessions + 16,
        entries,
        stop_time.as_secs_f64(),
    );
    Ok(md)
}

/// Opens `count` sessions, each on its own connection, `OPEN_CONCURRENCY`
/// at a time.
async fn open_sessions(
    endpoint: &Endpoint,
    count: usize,
) -> Result<Vec<(Session, Connection)>, String> {
    let opened: Vec<Result<(Session, Connection), String>> = futures_util::stream::iter(0..count)
        .map(|_| async move {
            let mut connection = Connection::open(endpoint.addr).await?;
            let session =
                Session::initialize(endpoint, &mut connection, "acs-proxy-bench-scale").await?;
            Ok((session, connection))
        })
        .buffer_unordered(OPEN_CONCURRENCY)
        .collect()
        .await;
    opened.into_iter().collect()
}

/// VmRSS, VmHWM and open file descriptors of `pid`.
fn memory(pid: u32) -> Memory {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|kib| kib.parse().ok())
            .unwrap_or(0)
    };
    Memory {
        rss_kib: field("VmRSS:"),
        hwm_kib: field("VmHWM:"),
        fds: std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |dir| dir.count()),
    }
}

/// What else holds memory: the proxy's children (none expected) and the
/// upstream process.
fn others(proxy: &Service, echo: &Service) -> String {
    let children = Tree::of(proxy.pid()).descendants.len();
    let echo = memory(echo.pid());
    format!(
        "The proxy has {children} child processes; the upstream (a separate process) holds {:.1} MB RSS.",
        mb(echo.rss_kib)
    )
}

fn mb(kib: u64) -> f64 {
    kib as f64 / 1024.0
}
