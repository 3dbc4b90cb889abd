//! The stdio suite: the load generator spawns the server (direct) or
//! acs-proxy in front of it (proxied) and speaks MCP over stdin/stdout.
//! Direct and proxied runs alternate, their order flipping every round.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::context::{absolute, BenchArgs, Context};
use crate::procfs::Tree;
use crate::report::{PhaseResult, Report, RunResult, Scenario};
use crate::run_log::RunLog;
use crate::setup::{Decider, Listen, ProxySetup, Server, Upstream};
use crate::timed_guardian::{fetch_stats, StatsAt};

/// Runs the suite and returns its report section.
pub fn run(args: &BenchArgs, context: &Context) -> Result<String, String> {
    let servers = &context.servers;
    let work = &context.work;
    let mut phases = vec![("sequential".to_owned(), 1usize, args.sequential)];
    for &n in &args.in_flight {
        phases.push((format!("{n} in flight"), n, args.pipelined));
    }

    let mut report = Report::new(
        servers.iter().map(|s| s.title.to_owned()).collect(),
        phases.iter().map(|(name, _, _)| name.clone()).collect(),
    );
    report.parameters = format!(
        "{} rounds; per run: {} warm-up calls, {} sequential calls, {} calls at each of {:?} in flight; \
         {}-byte tools/call requests; proxy: embedded Guardian, {}, \
         tools_call = \"both\", inventory on, audit fsync = \"batch\" in {}{}",
        args.rounds,
        args.warmup,
        args.sequential,
        args.pipelined,
        args.in_flight,
        args.request_bytes,
        args.policy_label(),
        work.display(),
        context.pin.as_ref().map_or(String::new(), |cpus| format!("; spawned commands pinned with taskset -c {cpus}")),
    );

    let embedded = args.embedded()?;
    for round in 0..args.rounds {
        for (index, server) in servers.iter().enumerate() {
            // Each scenario takes each place in the order in turn, so a
            // machine that slows down over a round weighs on all alike.
            let mut order = Scenario::ALL;
            order.rotate_left(round % Scenario::ALL.len());
            for scenario in order {
                let front = match scenario {
                    Scenario::Direct => Front::Nothing,
                    Scenario::BareRelay => Front::BareRelay,
                    Scenario::Governed => Front::Proxy(embedded.clone()),
                };
                let tag = format!("{}-{}-r{round}", server.key, scenario.name());
                let result = run_one(
                    args,
                    context,
                    server,
                    front,
                    &tag,
                    round == 0,
                    &phases,
                    None,
                )?;
                eprintln!(
                    "round {}/{} {:<10} {:<10} {}",
                    round + 1,
                    args.rounds,
                    server.key,
                    scenario.name(),
                    result.summary()
                );
                report.add(index, scenario, result);
            }
        }
    }
    Ok(report.markdown())
}

/// What stands between the load generator and the server in one run.
pub enum Front {
    /// The server alone.
    Nothing,
    /// `acs-proxy-bare-relay`, with the configuration acs-proxy would get.
    BareRelay,
    /// `acs-proxy-bare-relay --ask-guardian` with this remote Guardian: the
    /// relay asking it about every call, nothing else of governance.
    GuardianRelay(Decider),
    /// acs-proxy with full governance and this Guardian.
    Proxy(Decider),
}

/// One run: spawn, initialize, warm up, the phases, then shut down.
///
/// With `guardian`, the timed Guardian's service times are read around
/// every phase.
#[allow(clippy::too_many_arguments)]
pub fn run_one(
    args: &BenchArgs,
    context: &Context,
    server: &Server,
    front: Front,
    tag: &str,
    verify: bool,
    phases: &[(String, usize, usize)],
    guardian: Option<StatsAt>,
) -> Result<RunResult, String> {
    let (proxy, work) = (&context.proxy, &context.work);
    let proxied = matches!(front, Front::Proxy(_));
    let audit = work.join(format!("audit-{tag}.jsonl"));
    let _ = std::fs::remove_file(&audit);
    let command = match front {
        Front::Nothing => server.command.clone(),
        // The bare relay reads only the listener and the upstream of the
        // same configuration.
        Front::BareRelay => {
            let config =
                write_config(context, server, &audit, tag, Decider::Embedded { rules: 0 })?;
            vec![
                absolute(&context.bare_relay),
                "--config".into(),
                absolute(&config),
            ]
        }
        Front::GuardianRelay(decider) => {
            let config = write_config(context, server, &audit, tag, decider)?;
            vec![
                absolute(&context.bare_relay),
                "--config".into(),
                absolute(&config),
                "--ask-guardian".into(),
            ]
        }
        Front::Proxy(decider) => {
            let config = write_config(context, server, &audit, tag, decider)?;
            vec![
                absolute(proxy),
                "--config".into(),
                absolute(&config),
                "--audit".into(),
                absolute(&audit),
            ]
        }
    };
    let command = context.pinned(command);
    let log = RunLog::new(context, tag);
    let fail = |what: String| log.fail(what);
    let mut peer = log.spawn(args, &command, server.argument)?;
    peer.initialize().map_err(&fail)?;
    peer.run_phase(args.warmup, 1).map_err(&fail)?;
    // A Guardian the proxy spawned has written its address by now.
    let guardian = guardian.map(|at| at.resolve()).transpose().map_err(&fail)?;
    // The server behind the proxy is running by now.
    let tree = Tree::of(peer.pid());
    let mut results = Vec::new();
    let mut guardian_times = Vec::new();
    for (_, in_flight, calls) in phases {
        if let Some(addr) = guardian {
            fetch_stats(addr).map_err(&fail)?;
        }
        let before = tree.cpu();
        let phase = peer.run_phase(*calls, *in_flight).map_err(&fail)?;
        let after = tree.cpu();
        if let Some(addr) = guardian {
            guardian_times.push(fetch_stats(addr).map_err(&fail)?);
        }
        results.push(PhaseResult::new(phase, before, after));
    }
    let (root_rss_kib, tree_rss_kib) = tree.peak_rss_kib();
    let exit = peer.finish(Duration::from_secs(15)).map_err(&fail)?;
    if !exit.success() {
        return Err(fail(format!("exited with {exit}")));
    }
    let audit_entries = if proxied {
        let entries = count_lines(&audit).map_err(|e| fail(format!("audit log: {e}")))?;
        if verify {
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
        guardian: guardian_times,
    })
}

/// Writes the proxy configuration of a run in front of `server` over stdio.
fn write_config(
    context: &Context,
    server: &Server,
    audit: &Path,
    tag: &str,
    decider: Decider,
) -> Result<PathBuf, String> {
    let config = context.work.join(format!("proxy-{tag}.toml"));
    let setup = ProxySetup {
        name: server.key.into(),
        listen: Listen::Stdio,
        upstream: Upstream::Command(server.command.clone()),
        decider,
        audit: audit.to_owned(),
    };
    std::fs::write(&config, setup.config()).map_err(|e| format!("{}: {e}", config.display()))?;
    Ok(config)
}

pub fn count_lines(path: &Path) -> std::io::Result<u64> {
    let bytes = std::fs::read(path)?;
    Ok(bytes.iter().filter(|&&b| b == b'\n').count() as u64)
}

/// `acs-proxy audit verify` on a run's log: every chain must check out.
pub fn verify_audit(proxy: &Path, audit: &Path) -> Result<(), String> {
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
