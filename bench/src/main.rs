//! `acs-proxy-bench`: end-to-end load against MCP servers over stdio, each
//! directly and through `acs-proxy`, interleaved round by round.
//!
//! Every run spawns the command, does `initialize` +
//! `notifications/initialized`, warms up, then issues `tools/call` echo
//! requests: sequentially, then with 16 and 64 in flight (pipelined by id).
//! Per phase it records p50/p99 latency, calls/s and the CPU time of the
//! spawned process and its children (from /proc); per run the peak RSS
//! (VmHWM). Scenarios alternate direct/proxied (the order flips every
//! round) and the report gives medians over rounds, plus per-round paired
//! differences proxied − direct.
//!
//! ```text
//! cargo build --release --workspace
//! cargo run --release -p acs-proxy-bench -- --rounds 5 --out target/bench-e2e.md
//! ```

mod client;
mod procfs;
mod report;
mod setup;
mod stats;

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;

use client::Peer;
use procfs::Tree;
use report::{PhaseResult, Report, RunResult};
use setup::Server;

/// End-to-end MCP-over-stdio benchmark: direct vs through acs-proxy.
#[derive(Parser, Debug)]
#[command(name = "acs-proxy-bench", version)]
struct Args {
    /// Rounds; each runs every scenario once (direct/proxied order flips per round).
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Sequential warm-up calls before measuring (not reported).
    #[arg(long, default_value_t = 500)]
    warmup: usize,
    /// Calls in the sequential phase.
    #[arg(long, default_value_t = 3000)]
    sequential: usize,
    /// Calls in each pipelined phase.
    #[arg(long, default_value_t = 20000)]
    pipelined: usize,
    /// Requests kept in flight in the pipelined phases.
    #[arg(long, value_delimiter = ',', default_values_t = [16usize, 64])]
    in_flight: Vec<usize>,
    /// Size of one tools/call request line, in bytes.
    #[arg(long, default_value_t = 200)]
    request_bytes: usize,
    /// Policy rules in the proxy's configuration.
    #[arg(long, default_value_t = 20)]
    rules: usize,
    /// Servers to run: demo, everything.
    #[arg(long, value_delimiter = ',', default_values_t = ["demo".to_owned(), "everything".to_owned()])]
    servers: Vec<String>,
    /// The acs-proxy binary (default: <target dir>/release/acs-proxy).
    #[arg(long)]
    proxy: Option<PathBuf>,
    /// The demo server binary (default: <target dir>/release/acs-proxy-demo-server).
    #[arg(long)]
    demo_server: Option<PathBuf>,
    /// server-everything's stdio entry point (default: tests/peers/node_modules/...).
    #[arg(long)]
    everything: Option<PathBuf>,
    /// The node binary for server-everything.
    #[arg(long, default_value = "node")]
    node: String,
    /// Run every spawned command under `taskset -c CPUS` (e.g. 0).
    #[arg(long)]
    pin: Option<String>,
    /// Where configs, audit logs and stderr logs go (default: <target dir>/bench-e2e).
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Keep each run's audit log instead of deleting it after counting.
    #[arg(long)]
    keep_audit: bool,
    /// A label for what was measured (default: `git describe --dirty`).
    #[arg(long)]
    label: Option<String>,
    /// Also write the markdown report here.
    #[arg(long)]
    out: Option<PathBuf>,
}

fn main() {
    let args = Args::parse();
    match run(&args) {
        Ok(markdown) => {
            println!("{markdown}");
            if let Some(out) = &args.out {
                if let Err(err) = std::fs::write(out, &markdown) {
                    eprintln!("acs-proxy-bench: cannot write {}: {err}", out.display());
                    std::process::exit(1);
                }
                eprintln!("acs-proxy-bench: report written to {}", out.display());
            }
        }
        Err(err) => {
            eprintln!("acs-proxy-bench: {err}");
            std::process::exit(1);
        }
    }
}

fn run(args: &Args) -> Result<String, String> {
    let root = setup::workspace_root();
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let proxy = args
        .proxy
        .clone()
        .unwrap_or_else(|| target.join("release/acs-proxy"));
    let demo = args
        .demo_server
        .clone()
        .unwrap_or_else(|| target.join("release/acs-proxy-demo-server"));
    let everything = args.everything.clone().unwrap_or_else(|| {
        root.join("tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
    });
    let work = args
        .work_dir
        .clone()
        .unwrap_or_else(|| target.join("bench-e2e"));
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    for binary in [&proxy, &demo] {
        if !binary.exists() {
            return Err(format!(
                "{} not found: run `cargo build --release --workspace` first",
                binary.display()
            ));
        }
    }
    let pin = match &args.pin {
        Some(cpus) if setup::runnable("taskset") => Some(cpus.as_str()),
        Some(_) => {
            eprintln!("acs-proxy-bench: taskset is not available; running unpinned");
            None
        }
        None => None,
    };

    let mut notes = Vec::new();
    let mut servers = Vec::new();
    for key in &args.servers {
        match key.as_str() {
            "demo" => servers.push(Server {
                key: "demo",
                title: "demo server (Rust echo)",
                command: vec![absolute(&demo)],
                argument: "text",
            }),
            "everything" if !everything.exists() => notes.push(format!(
                "server-everything skipped: {} is absent (run .ci/install-peers)",
                everything.display()
            )),
            "everything" if !setup::runnable(&args.node) => notes.push(format!(
                "server-everything skipped: `{}` cannot be run",
                args.node
            )),
            "everything" => servers.push(Server {
                key: "everything",
                title: "server-everything (Node)",
                command: vec![args.node.clone(), absolute(&everything), "stdio".into()],
                argument: "message",
            }),
            other => return Err(format!("unknown server {other:?} (demo, everything)")),
        }
    }
    for note in &notes {
        eprintln!("acs-proxy-bench: {note}");
    }

    let mut phases = vec![("sequential".to_owned(), 1usize, args.sequential)];
    for &n in &args.in_flight {
        phases.push((format!("{n} in flight"), n, args.pipelined));
    }

    let mut report = Report::new(
        servers.iter().map(|s| s.title.to_owned()).collect(),
        phases.iter().map(|(name, _, _)| name.clone()).collect(),
    );
    report.machine = procfs::machine();
    report.label = args
        .label
        .clone()
        .or_else(|| setup::revision(&root))
        .unwrap_or_else(|| "unknown revision".into());
    report.notes = notes;
    let load_before = procfs::load_average();
    report.parameters = format!(
        "{} rounds; per run: {} warm-up calls, {} sequential calls, {} calls at each of {:?} in flight; \
         {}-byte tools/call requests; proxy: embedded Guardian, {} rules (none match echo), \
         tools_call = \"both\", inventory on, audit fsync = \"batch\" in {}{}",
        args.rounds,
        args.warmup,
        args.sequential,
        args.pipelined,
        args.in_flight,
        args.request_bytes,
        args.rules,
        work.display(),
        pin.map_or(String::new(), |cpus| format!("; spawned commands pinned with taskset -c {cpus}")),
    );

    for round in 0..args.rounds {
        for (index, server) in servers.iter().enumerate() {
            let order = if round % 2 == 0 {
                [false, true]
            } else {
                [true, false]
            };
            for proxied in order {
                let result = run_one(args, &proxy, server, proxied, round, &work, &phases, pin)?;
                eprintln!(
                    "round {}/{} {:<10} {:<8} {}",
                    round + 1,
                    args.rounds,
                    server.key,
                    if proxied { "proxied" } else { "direct" },
                    result.summary()
                );
                report.add(index, proxied, result);
            }
        }
    }
    report.notes.push(format!(
        "load average (1/5/15 min) before the run: {load_before}; after: {} \
         (other work on this shared machine adds noise; rounds are interleaved to spread it)",
        procfs::load_average()
    ));
    Ok(report.markdown())
}

/// One run: spawn, initialize, warm up, the phases, then shut down.
#[allow(clippy::too_many_arguments)]
fn run_one(
    args: &Args,
    proxy: &Path,
    server: &Server,
    proxied: bool,
    round: usize,
    work: &Path,
    phases: &[(String, usize, usize)],
    pin: Option<&str>,
) -> Result<RunResult, String> {
    let tag = format!(
        "{}-{}-r{round}",
        server.key,
        if proxied { "proxied" } else { "direct" }
    );
    let audit = work.join(format!("audit-{tag}.jsonl"));
    let _ = std::fs::remove_file(&audit);
    let command = if proxied {
        let config = work.join(format!("proxy-{}.toml", server.key));
        std::fs::write(&config, setup::proxy_config(server, args.rules, &audit))
            .map_err(|e| format!("{}: {e}", config.display()))?;
        vec![
            absolute(proxy),
            "--config".into(),
            absolute(&config),
            "--audit".into(),
            absolute(&audit),
        ]
    } else {
        server.command.clone()
    };
    let command = setup::pinned(command, pin);
    let stderr_log = work.join(format!("stderr-{tag}.log"));
    let fail = |what: String| format!("{tag}: {what} (stderr in {})", stderr_log.display());
    let mut peer = Peer::spawn(
        &command,
        &[("ACS_PROXY_LOG", "warn")],
        &stderr_log,
        server.argument,
        args.request_bytes,
        Duration::from_secs(600),
    )
    .map_err(|e| fail(format!("cannot start {command:?}: {e}")))?;
    peer.initialize().map_err(&fail)?;
    peer.run_phase(args.warmup, 1).map_err(&fail)?;
    // The server behind the proxy is running by now.
    let tree = Tree::of(peer.pid());
    let mut results = Vec::new();
    for (_, in_flight, calls) in phases {
        let before = tree.cpu();
        let phase = peer.run_phase(*calls, *in_flight).map_err(&fail)?;
        let after = tree.cpu();
        results.push(PhaseResult::new(phase, before, after));
    }
    let (root_rss_kib, tree_rss_kib) = tree.peak_rss_kib();
    let exit = peer.finish(Duration::from_secs(15)).map_err(&fail)?;
    if !exit.success() {
        return Err(fail(format!("exited with {exit}")));
    }
    let audit_entries = if proxied {
        let entries = count_lines(&audit).map_err(|e| fail(format!("audit log: {e}")))?;
        if round == 0 {
            verify_audit(proxy, &audit).map_err(&fail)?;
        }
        if !args.keep_audit {
            let _ = std::fs::remove_file(&audit);
        }
        Some(entries)
    } else {
        None
    };
    Ok(RunResult {
        phases: results,
        root_rss_kib,
        tree_rss_kib,
        audit_entries,
        calls: args.warmup + phases.iter().map(|(_, _, calls)| calls).sum::<usize>(),
    })
}

fn count_lines(path: &Path) -> std::io::Result<u64> {
    let bytes = std::fs::read(path)?;
    Ok(bytes.iter().filter(|&&b| b == b'\n').count() as u64)
}

/// `acs-proxy audit verify` on a run's log: every chain must check out.
fn verify_audit(proxy: &Path, audit: &Path) -> Result<(), String> {
    let output = std::process::Command::new(proxy)
        .args(["audit", "verify"])
        .arg(audit)
        .output()
        .map_err(|e| format!("audit verify: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "audit verify failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

fn absolute(path: &Path) -> String {
    std::path::absolute(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}
