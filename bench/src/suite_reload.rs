//! The reload suite: calls at a steady 1,000 per second through acs-proxy
//! over stdio, in front of the demo server, with a 1,000-rule policy; in
//! the `reloading` scenario the config file is rewritten (alternating two
//! versions of the policy, so every reload compiles a new one) and the
//! proxy sent `SIGHUP` every `--reload-every-ms`. The calls' latencies
//! with and without reloads side by side show what a reload costs a call
//! in flight.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::context::{absolute, BenchArgs, Context};
use crate::run_log::RunLog;
use crate::setup::{Decider, Listen, ProxySetup, Upstream};
use crate::stats::{median, percentile};

/// Rules in the policy that is reloaded.
const RULES: usize = 1000;

/// One run's latencies, in microseconds, and what happened around them.
struct Run {
    p50_us: f64,
    p99_us: f64,
    max_us: f64,
    calls: usize,
    errors: usize,
    reloads: usize,
}

/// Runs the suite and returns its report section.
pub fn run(args: &BenchArgs, context: &Context) -> Result<String, String> {
    let server = context
        .servers
        .iter()
        .find(|server| server.key == "demo")
        .ok_or("the reload suite needs the demo server (--servers demo)")?;
    let interval = Duration::from_secs(1) / args.reload_rate.max(1);
    let mut steady = Vec::new();
    let mut reloading = Vec::new();
    for round in 0..args.rounds {
        let order = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for reloads in order {
            let tag = format!("reload-{}-r{round}", if reloads { "on" } else { "off" });
            let result = run_one(args, context, &server.command, interval, reloads, &tag)?;
            eprintln!(
                "round {}/{} {:<10} p50 {:.1} p99 {:.1} max {:.1} µs, {} calls, {} errors, {} reloads",
                round + 1,
                args.rounds,
                if reloads { "reloading" } else { "steady" },
                result.p50_us,
                result.p99_us,
                result.max_us,
                result.calls,
                result.errors,
                result.reloads
            );
            if reloads {
                reloading.push(result);
            } else {
                steady.push(result);
            }
        }
    }
    let mut md = String::from("\n## reload suite\n\n");
    let _ = writeln!(
        md,
        "{} rounds; per run: {} calls at {}/s, one at a time, through acs-proxy over stdio to the demo \
         server; embedded Guardian with {RULES} rules (none match echo), tools_call = \"both\", \
         audit fsync = \"batch\"; reloading: the config file rewritten (two versions in turn) and \
         SIGHUP every {} ms. Medians over rounds; max is the largest over all rounds.\n",
        args.rounds, args.reload_calls, args.reload_rate, args.reload_every_ms
    );
    md.push_str("| scenario | p50 µs | p99 µs | max µs | calls | failed calls | reloads |\n");
    md.push_str("|---|---|---|---|---|---|---|\n");
    for (name, runs) in [("steady", &steady), ("reloading", &reloading)] {
        let _ = writeln!(
            md,
            "| {name} | {:.1} | {:.1} | {:.1} | {} | {} | {} |",
            median(runs.iter().map(|r| r.p50_us)),
            median(runs.iter().map(|r| r.p99_us)),
            runs.iter().map(|r| r.max_us).fold(0.0, f64::max),
            runs.iter().map(|r| r.calls).sum::<usize>(),
            runs.iter().map(|r| r.errors).sum::<usize>(),
            runs.iter().map(|r| r.reloads).sum::<usize>(),
        );
    }
    Ok(md)
}

/// One run: spawn the proxy, warm up, then the paced calls, reloading
/// alongside when `reloads`.
fn run_one(
    args: &BenchArgs,
    context: &Context,
    server: &[String],
    interval: Duration,
    reloads: bool,
    tag: &str,
) -> Result<Run, String> {
    let work = &context.work;
    let audit = work.join(format!("audit-{tag}.jsonl"));
    let _ = std::fs::remove_file(&audit);
    let config = work.join(format!("proxy-{tag}.toml"));
    let versions = [
        config_text(server, &audit, "v1"),
        config_text(server, &audit, "v2"),
    ];
    std::fs::write(&config, &versions[0]).map_err(|e| format!("{}: {e}", config.display()))?;
    let command = context.pinned(vec![
        absolute(&context.proxy),
        "--config".into(),
        absolute(&config),
    ]);
    let log = RunLog::new(context, tag);
    let fail = |what: String| log.fail(what);
    let mut peer = log.spawn(args, &command, "text")?;
    peer.initialize().map_err(&fail)?;
    peer.run_phase(args.warmup, 1).map_err(&fail)?;

    let done = Arc::new(AtomicBool::new(false));
    let reloaded = Arc::new(AtomicUsize::new(0));
    let reloader = reloads.then(|| {
        let (done, reloaded) = (done.clone(), reloaded.clone());
        let (config, pid) = (config.clone(), Pid::from_raw(peer.pid() as i32));
        let every = Duration::from_millis(args.reload_every_ms);
        thread::spawn(move || reload_loop(&config, &versions, pid, every, &done, &reloaded))
    });
    let phase = peer.run_paced(args.reload_calls, interval);
    done.store(true, Ordering::Release);
    if let Some(reloader) = reloader {
        reloader
            .join()
            .map_err(|_| fail("the reloader panicked".into()))?
            .map_err(&fail)?;
    }
    let phase = phase.map_err(&fail)?;
    let exit = peer.finish(Duration::from_secs(15)).map_err(&fail)?;
    if !exit.success() {
        return Err(fail(format!("exited with {exit}")));
    }
    if !args.keep_audit {
        let _ = std::fs::remove_file(&audit);
    }
    let mut latencies = phase.latencies_ns;
    latencies.sort_unstable();
    let us = |ns: u64| ns as f64 / 1000.0;
    Ok(Run {
        p50_us: us(percentile(&latencies, 50.0)),
        p99_us: us(percentile(&latencies, 99.0)),
        max_us: us(latencies.last().copied().unwrap_or(0)),
        calls: latencies.len(),
        errors: phase.errors,
        reloads: reloaded.load(Ordering::Acquire),
    })
}

/// Every `every`, replaces the config file with the next version (written
/// beside it, then renamed over it) and sends `SIGHUP`, until `done`.
fn reload_loop(
    config: &Path,
    versions: &[String; 2],
    pid: Pid,
    every: Duration,
    done: &AtomicBool,
    reloaded: &AtomicUsize,
) -> Result<(), String> {
    let staged = config.with_extension("toml.new");
    let mut next = 1;
    while !done.load(Ordering::Acquire) {
        thread::sleep(every);
        std::fs::write(&staged, &versions[next])
            .map_err(|e| format!("{}: {e}", staged.display()))?;
        std::fs::rename(&staged, config).map_err(|e| format!("{}: {e}", config.display()))?;
        kill(pid, Signal::SIGHUP).map_err(|e| format!("SIGHUP: {e}"))?;
        reloaded.fetch_add(1, Ordering::AcqRel);
        next = 1 - next;
    }
    Ok(())
}

/// The proxy's config with the 1,000-rule policy; `version` goes into one
/// rule's reasoning, so the two versions differ without deciding echo.
fn config_text(server: &[String], audit: &Path, version: &str) -> String {
    let setup = ProxySetup {
        name: "demo".into(),
        listen: Listen::Stdio,
        upstream: Upstream::Command(server.to_vec()),
        decider: Decider::Embedded { rules: RULES },
        audit: audit.to_owned(),
    };
    setup.config().replacen(
        "reasoning = \"rule 3\"",
        &format!("reasoning = \"rule 3 ({version})\""),
        1,
    )
}
