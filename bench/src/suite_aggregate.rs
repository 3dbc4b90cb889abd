//! The aggregate suite: what routing through a virtual server costs. The
//! load generator spawns acs-proxy over stdio in front of the demo server,
//! once as a plain route and once as an `[[aggregate]]` of three demo
//! servers (`a`, `b`, `c`; the calls go to `b__echo`), with the same
//! governance as the stdio suite; and the plain route a second time, as a
//! control: what that second run differs from the first by in the same
//! round is the harness's own noise, against which the virtual server's
//! difference is read. The three take turns, their order rotating every
//! round; the tables give medians over rounds.

use std::fmt::Write as _;
use std::time::Duration;

use crate::context::{absolute, BenchArgs, Context};
use crate::procfs::Tree;
use crate::report::PhaseResult;
use crate::run_log::RunLog;
use crate::setup::{policy_rules, Server};
use crate::stats::median;

/// The ways the same call reaches the demo server in one round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// `[[upstream]]` alone.
    Single,
    /// One of three upstreams of an `[[aggregate]]`.
    Aggregate,
    /// `[[upstream]]` alone once more: the control.
    SingleAgain,
}

/// Every route, in the order of the first round.
const ROUTES: [Route; 3] = [Route::Single, Route::Aggregate, Route::SingleAgain];

impl Route {
    fn name(self) -> &'static str {
        match self {
            Route::Single => "one route",
            Route::Aggregate => "virtual server of 3",
            Route::SingleAgain => "one route, again",
        }
    }

    fn tool(self) -> &'static str {
        match self {
            Route::Single | Route::SingleAgain => "echo",
            Route::Aggregate => "b__echo",
        }
    }

    /// Names the run's files apart from the other route calling `echo`.
    fn tag(self) -> &'static str {
        match self {
            Route::Single => "echo",
            Route::Aggregate => "b__echo",
            Route::SingleAgain => "echo-again",
        }
    }
}

/// Runs the suite and returns its report section.
pub fn run(args: &BenchArgs, context: &Context) -> Result<String, String> {
    let server = context
        .servers
        .iter()
        .find(|s| s.key == "demo")
        .ok_or("the aggregate suite needs the demo server (--servers demo)")?;
    let mut phases = vec![("sequential".to_owned(), 1usize, args.sequential)];
    for &n in &args.in_flight {
        phases.push((format!("{n} in flight"), n, args.pipelined));
    }
    // results[route][phase] = one PhaseResult per round.
    let mut results: [Vec<Vec<PhaseResult>>; 3] = Default::default();
    for runs in &mut results {
        *runs = vec![Vec::new(); phases.len()];
    }
    for round in 0..args.rounds {
        for turn in 0..ROUTES.len() {
            let route = ROUTES[(turn + round) % ROUTES.len()];
            let tag = format!("aggregate-{}-r{round}", route.tag());
            let run = run_one(args, context, server, route, &tag, &phases)?;
            eprintln!(
                "round {}/{} {:<20} p50 {:.1} µs seq",
                round + 1,
                args.rounds,
                route.name(),
                run[0].p50_us
            );
            for (phase, result) in run.into_iter().enumerate() {
                results[route as usize][phase].push(result);
            }
        }
    }
    Ok(markdown(args, &phases, &results))
}

fn markdown(
    args: &BenchArgs,
    phases: &[(String, usize, usize)],
    results: &[Vec<Vec<PhaseResult>>; 3],
) -> String {
    let mut out = String::from("\n## aggregate suite\n\n");
    let _ = writeln!(
        out,
        "{} rounds; per run: {} warm-up calls, {} sequential calls, {} calls at each of {:?} in flight; \
         embedded Guardian, {} rules, tools_call = \"both\", audit fsync = \"batch\"\n",
        args.rounds, args.warmup, args.sequential, args.pipelined, args.in_flight, args.rules
    );
    out.push_str("| phase | route | p50 µs | p99 µs | calls/s | proxy CPU/call µs |\n|---|---|---:|---:|---:|---:|\n");
    for (index, (phase, _, _)) in phases.iter().enumerate() {
        for route in ROUTES {
            let runs = &results[route as usize][index];
            let _ = writeln!(
                out,
                "| {phase} | {} | {:.1} | {:.1} | {:.0} | {:.1} |",
                route.name(),
                median(runs.iter().map(|r| r.p50_us)),
                median(runs.iter().map(|r| r.p99_us)),
                median(runs.iter().map(|r| r.calls_per_s)),
                median(runs.iter().map(|r| r.root_cpu_us)),
            );
        }
    }
    out.push_str(
        "\nPaired per round: the virtual server minus the one route of the same round, beside \
         the control (the one route's second run minus its first), whose differences are the \
         harness's noise:\n\n\
         | phase | added p50 µs: median (min – max) | control p50 µs | \
         added CPU/call µs: median (min – max) | control CPU/call µs |\n\
         |---|---|---|---|---|\n",
    );
    for (index, (phase, _, _)) in phases.iter().enumerate() {
        let added = |route: Route, of: fn(&PhaseResult) -> f64| -> Vec<f64> {
            paired(
                &results[Route::Single as usize][index],
                &results[route as usize][index],
                of,
            )
        };
        let _ = writeln!(
            out,
            "| {phase} | {} | {} | {} | {} |",
            spread(&added(Route::Aggregate, |r| r.p50_us)),
            spread(&added(Route::SingleAgain, |r| r.p50_us)),
            spread(&added(Route::Aggregate, |r| r.root_cpu_us)),
            spread(&added(Route::SingleAgain, |r| r.root_cpu_us)),
        );
    }
    out
}

/// `other`'s figure minus `base`'s, round by round.
fn paired(base: &[PhaseResult], other: &[PhaseResult], of: fn(&PhaseResult) -> f64) -> Vec<f64> {
    base.iter().zip(other).map(|(a, b)| of(b) - of(a)).collect()
}

/// `median (min – max; rounds above zero)` of per-round differences: with
/// no difference at all, about half the rounds come out above zero.
fn spread(values: &[f64]) -> String {
    let above = values.iter().filter(|v| **v > 0.0).count();
    format!(
        "{:+.1} ({}; {above}/{} above 0)",
        median(values.iter().copied()),
        signed_range(values),
        values.len()
    )
}

fn signed_range(values: &[f64]) -> String {
    let (low, high) = bounds(values);
    format!("{low:+.1} – {high:+.1}")
}

fn bounds(values: &[f64]) -> (f64, f64) {
    values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(low, high), v| {
            (low.min(*v), high.max(*v))
        })
}

/// One run: spawn the proxy with the route's configuration, initialize,
/// warm up, run the phases, shut down.
fn run_one(
    args: &BenchArgs,
    context: &Context,
    server: &Server,
    route: Route,
    tag: &str,
    phases: &[(String, usize, usize)],
) -> Result<Vec<PhaseResult>, String> {
    let work = &context.work;
    let audit = work.join(format!("audit-{tag}.jsonl"));
    let _ = std::fs::remove_file(&audit);
    let config = work.join(format!("proxy-{tag}.toml"));
    std::fs::write(&config, config_text(args, server, route, &audit))
        .map_err(|e| format!("{}: {e}", config.display()))?;
    let command = context.pinned(vec![
        absolute(&context.proxy),
        "--config".into(),
        absolute(&config),
    ]);
    let log = RunLog::new(context, tag);
    let fail = |what: String| log.fail(what);
    let mut peer = log
        .spawn(args, &command, server.argument)?
        .calling(route.tool());
    peer.initialize().map_err(&fail)?;
    peer.run_phase(args.warmup, 1).map_err(&fail)?;
    let tree = Tree::of(peer.pid());
    let mut results = Vec::new();
    for (_, in_flight, calls) in phases {
        let before = tree.cpu();
        let phase = peer.run_phase(*calls, *in_flight).map_err(&fail)?;
        let after = tree.cpu();
        if phase.errors > 0 {
            return Err(fail(format!("{} calls failed", phase.errors)));
        }
        results.push(PhaseResult::new(phase, before, after));
    }
    let exit = peer.finish(Duration::from_secs(15)).map_err(&fail)?;
    if !exit.success() {
        return Err(fail(format!("exited with {exit}")));
    }
    if !args.keep_audit {
        let _ = std::fs::remove_file(&audit);
    }
    Ok(results)
}

/// The proxy configuration of one route: the stdio suite's governance.
fn config_text(args: &BenchArgs, server: &Server, route: Route, audit: &std::path::Path) -> String {
    let command = server
        .command
        .iter()
        .map(|arg| format!("{arg:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    let upstreams = match route {
        Route::Single | Route::SingleAgain => {
            format!("[[upstream]]\nname = \"demo\"\ncommand = [{command}]\n")
        }
        Route::Aggregate => {
            let mut text = String::new();
            for name in ["a", "b", "c"] {
                let _ = writeln!(
                    text,
                    "[[upstream]]\nname = {name:?}\ncommand = [{command}]\n"
                );
            }
            text.push_str("[[aggregate]]\nname = \"all\"\nupstreams = [\"a\", \"b\", \"c\"]\n");
            text
        }
    };
    format!(
        "# Written by acs-proxy-bench.\n[listen]\ntransport = \"stdio\"\n\n{upstreams}\n\
         [guardian]\nmode = \"embedded\"\n\n[hooks]\ntools_call = \"both\"\n\n\
         [policy]\ndefault = \"allow\"\n{}\n[audit]\npath = {:?}\nfsync = \"batch\"\n",
        policy_rules(args.rules),
        audit.display().to_string()
    )
}
