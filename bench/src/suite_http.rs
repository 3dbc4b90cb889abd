//! The http suite: the load generator speaks Streamable HTTP to a gateway
//! that spawns the stdio server: acs-proxy with full governance,
//! supergateway and mcp-proxy. Gateways take turns, the order rotating
//! every round; each run starts the gateway afresh.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use crate::client::PhaseRun;
use crate::context::{BenchArgs, Context};
use crate::gateway::{Gateway, Kind};
use crate::http_client::{self, Connection, EchoCall, Endpoint, Session};
use crate::procfs::Tree;
use crate::report::{PhaseResult, RunResult};
use crate::service::{self, Service};
use crate::setup::Server;
use crate::stats::{median, range};
use crate::suite_stdio::{count_lines, verify_audit};

/// acs-proxy's throughput over each bridge's at 16 in flight.
const TARGET_RATIO_AT_16: f64 = 5.0;
/// What full governance may cost over HTTP: proxy CPU per call at 16 in
/// flight, and sequential p50 added over the bare relay.
const TARGET_CPU_AT_16_US: f64 = 60.0;
const TARGET_GOVERNANCE_P50_US: f64 = 20.0;

/// A phase: its name, requests in flight, calls.
pub type Phase = (String, usize, usize);

/// The load of a suite over a network transport, for its parameters line.
pub fn load_parameters(args: &BenchArgs) -> String {
    format!(
        "{} rounds; per run: {} sequential warm-up calls, {} sequential calls, {} calls at each of {:?} in flight",
        args.rounds, args.warmup, args.http_sequential, args.http_calls, args.in_flight,
    )
}

/// The request size and acs-proxy's governance, for a parameters line.
pub fn governance_parameters(args: &BenchArgs) -> String {
    format!(
        "{}-byte tools/call requests; acs-proxy: embedded Guardian, {}, tools_call = \"both\", inventory on, audit fsync = \"batch\"",
        args.request_bytes,
        args.policy_label(),
    )
}

/// The phases of a suite over a network transport: `--http-sequential`
/// calls one at a time, then `--http-calls` at each of `--in-flight`.
pub fn phases(args: &BenchArgs) -> Vec<Phase> {
    let mut phases: Vec<Phase> = vec![("sequential".into(), 1, args.http_sequential)];
    for &n in &args.in_flight {
        phases.push((format!("{n} in flight"), n, args.http_calls));
    }
    phases
}

/// Runs the suite and returns its report section.
pub fn run(args: &BenchArgs, context: &Context) -> Result<String, String> {
    service::raise_fd_limit();
    let (gateways, notes) = Gateway::resolve(args, context)?;
    for note in &notes {
        eprintln!("acs-proxy-bench: {note}");
    }
    let phases = phases(args);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    let mut runs: Vec<Vec<Vec<RunResult>>> =
        vec![vec![Vec::new(); gateways.len()]; context.servers.len()];
    for round in 0..args.rounds {
        for (s, server) in context.servers.iter().enumerate() {
            for turn in 0..gateways.len() {
                let g = (turn + round) % gateways.len();
                let gateway = &gateways[g];
                let result = run_one(args, context, &runtime, server, gateway, round, &phases)?;
                eprintln!(
                    "round {}/{} {:<10} {:<12} {}",
                    round + 1,
                    args.rounds,
                    server.key,
                    gateway.title(),
                    result.summary()
                );
                runs[s][g].push(result);
            }
        }
    }
    let report = HttpReport {
        servers: &context.servers,
        gateways: &gateways,
        phases: &phases,
        runs: &runs,
    };
    let mut md = report.markdown();
    let _ = writeln!(
        md,
        "\n- parameters: {}, \
         one keep-alive HTTP/1.1 connection per in-flight request, all in one MCP session; {}; \
         supergateway --stateful (one child per session); mcp-proxy (one child for all sessions){}",
        load_parameters(args),
        governance_parameters(args),
        context.pin.as_ref().map_or(String::new(), |cpus| format!(
            "; gateways pinned with taskset -c {cpus}"
        )),
    );
    for note in notes {
        let _ = writeln!(md, "- note: {note}");
    }
    Ok(md)
}

/// Starts a gateway's `command`, pinned like every spawned process, logging
/// at `warn` to `log`, and waits until it accepts connections on `addr`.
pub fn start_gateway(
    context: &Context,
    name: &str,
    command: Vec<String>,
    addr: SocketAddr,
    log: &Path,
) -> Result<Service, String> {
    let mut process = Service::spawn(
        name,
        &context.pinned(command),
        &[("ACS_PROXY_LOG", "warn")],
        log,
    )?;
    process.wait_ready(addr, Duration::from_secs(60))?;
    Ok(process)
}

/// One gateway in front of one server: start, initialize, warm up, the
/// phases, stop.
fn run_one(
    args: &BenchArgs,
    context: &Context,
    runtime: &tokio::runtime::Runtime,
    server: &Server,
    gateway: &Gateway,
    round: usize,
    phases: &[Phase],
) -> Result<RunResult, String> {
    let tag = format!("http-{}-{}-r{round}", server.key, gateway.title());
    let addr = service::free_addr()?;
    let launch = gateway.launch(args, server, &addr.to_string(), &context.work, &tag)?;
    let log = context.work.join(format!("stderr-{tag}.log"));
    let fail = |what: String| format!("{tag}: {what} (log in {})", log.display());
    let process = start_gateway(context, gateway.title(), launch.command.clone(), addr, &log)
        .map_err(&fail)?;
    let endpoint = Endpoint {
        addr,
        path: launch.path.into(),
    };
    let echo = EchoCall::new(server.argument, args.request_bytes);
    let (session, mut next_id) = runtime
        .block_on(async {
            let mut connection = Connection::open(addr).await?;
            let session =
                Session::initialize(&endpoint, &mut connection, "acs-proxy-bench").await?;
            let sessions = [session];
            let warm = http_client::run_phase(
                &sessions,
                std::slice::from_mut(&mut connection),
                &echo,
                args.warmup,
                1,
            )
            .await?;
            check_errors("warm-up", &warm)?;
            let [session] = sessions;
            Ok::<_, String>((session, 1 + args.warmup as u64))
        })
        .map_err(&fail)?;
    // Every child (the stdio server) exists once the session is initialized.
    let tree = Tree::of(process.pid());
    let sessions = [session];
    let mut results = Vec::new();
    for (_, in_flight, calls) in phases {
        let mut connections = runtime
            .block_on(async {
                let mut connections = Vec::with_capacity(*in_flight);
                for _ in 0..*in_flight {
                    connections.push(Connection::open(addr).await?);
                }
                Ok::<_, String>(connections)
            })
            .map_err(&fail)?;
        let before = tree.cpu();
        let phase = runtime
            .block_on(http_client::run_phase(
                &sessions,
                &mut connections,
                &echo,
                *calls,
                next_id,
            ))
            .map_err(&fail)?;
        let after = tree.cpu();
        next_id += *calls as u64;
        drop(connections);
        results.push(PhaseResult::new(phase, before, after));
    }
    let (root_rss_kib, tree_rss_kib) = tree.peak_rss_kib();
    process.stop(Duration::from_secs(10));
    let audit_entries = match &launch.audit {
        Some(audit) => {
            let entries = count_lines(audit).map_err(|e| fail(format!("audit log: {e}")))?;
            if round == 0 {
                verify_audit(&context.proxy, audit).map_err(&fail)?;
            }
            if !args.keep_audit {
                let _ = std::fs::remove_file(audit);
            }
            Some(entries)
        }
        None => None,
    };
    Ok(RunResult {
        phases: results,
        root_rss_kib,
        tree_rss_kib,
        audit_entries,
        calls: args.warmup + phases.iter().map(|(_, _, calls)| calls).sum::<usize>(),
        guardian: Vec::new(),
    })
}

fn check_errors(what: &str, run: &PhaseRun) -> Result<(), String> {
    if run.errors == 0 {
        Ok(())
    } else {
        Err(format!(
            "{what}: {} calls answered with an error",
            run.errors
        ))
    }
}

/// Every run of the suite: `runs[server][gateway]`, one per round.
struct HttpReport<'a> {
    servers: &'a [Server],
    gateways: &'a [Gateway],
    phases: &'a [Phase],
    runs: &'a [Vec<Vec<RunResult>>],
}

impl HttpReport<'_> {
    fn med(&self, s: usize, g: usize, p: usize, metric: fn(&PhaseResult) -> f64) -> f64 {
        median(self.runs[s][g].iter().map(|run| metric(&run.phases[p])))
    }

    /// Median over rounds of `combine(acs-proxy's metric, gateway g's)`,
    /// paired by round.
    #[allow(clippy::too_many_arguments)]
    fn paired(
        &self,
        s: usize,
        acs: usize,
        g: usize,
        p: usize,
        metric: fn(&PhaseResult) -> f64,
        combine: fn(f64, f64) -> f64,
    ) -> f64 {
        median(
            self.runs[s][acs]
                .iter()
                .zip(&self.runs[s][g])
                .map(|(a, b)| combine(metric(&a.phases[p]), metric(&b.phases[p]))),
        )
    }

    fn ratio(
        &self,
        s: usize,
        acs: usize,
        g: usize,
        p: usize,
        metric: fn(&PhaseResult) -> f64,
    ) -> f64 {
        self.paired(s, acs, g, p, metric, |a, b| a / b)
    }

    fn difference(
        &self,
        s: usize,
        acs: usize,
        g: usize,
        p: usize,
        metric: fn(&PhaseResult) -> f64,
    ) -> f64 {
        self.paired(s, acs, g, p, metric, |a, b| a - b)
    }

    fn markdown(&self) -> String {
        let mut md =
            String::from("\n## http suite: Streamable HTTP → stdio server, acs-proxy vs bridges\n");
        let _ = writeln!(
            md,
            "\nFigures are medians over rounds. *Process* is the gateway; *tree* adds the stdio \
             server(s) it spawned.\n"
        );
        let _ = writeln!(md, "### Per scenario\n");
        let _ = writeln!(
            md,
            "| server | gateway | phase | p50 µs | p99 µs | mean µs | calls/s | CPU/call process µs | CPU/call tree µs | errors |"
        );
        let _ = writeln!(md, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|");
        for (s, server) in self.servers.iter().enumerate() {
            for (g, gateway) in self.gateways.iter().enumerate() {
                for (p, (phase, _, _)) in self.phases.iter().enumerate() {
                    let errors: usize = self.runs[s][g].iter().map(|r| r.phases[p].errors).sum();
                    let _ = writeln!(
                        md,
                        "| {} | {} | {phase} | {:.1} | {:.1} | {:.1} | {:.0} | {:.1} | {:.1} | {errors} |",
                        server.title,
                        gateway.title(),
                        self.med(s, g, p, |r| r.p50_us),
                        self.med(s, g, p, |r| r.p99_us),
                        self.med(s, g, p, |r| r.mean_us),
                        self.med(s, g, p, |r| r.calls_per_s),
                        self.med(s, g, p, |r| r.root_cpu_us),
                        self.med(s, g, p, |r| r.tree_cpu_us),
                    );
                }
            }
        }
        let _ = writeln!(md, "\n### Memory\n");
        let _ = writeln!(
            md,
            "| server | gateway | peak RSS gateway MB (min–max) | peak RSS tree MB | audit entries per run |"
        );
        let _ = writeln!(md, "|---|---|---:|---:|---:|");
        for (s, server) in self.servers.iter().enumerate() {
            for (g, gateway) in self.gateways.iter().enumerate() {
                let runs = &self.runs[s][g];
                let rss = |run: &RunResult| run.root_rss_kib as f64 / 1024.0;
                let (lo, hi) = range(runs.iter().map(rss));
                let entries = median(
                    runs.iter()
                        .filter_map(|r| r.audit_entries.map(|e| e as f64)),
                );
                let _ = writeln!(
                    md,
                    "| {} | {} | {:.1} ({lo:.1}–{hi:.1}) | {:.1} | {} |",
                    server.title,
                    gateway.title(),
                    median(runs.iter().map(rss)),
                    median(runs.iter().map(|r| r.tree_rss_kib as f64 / 1024.0)),
                    if entries.is_nan() {
                        "–".into()
                    } else {
                        format!("{entries:.0}")
                    },
                );
            }
        }
        self.comparison(&mut md);
        md
    }

    /// acs-proxy against each bridge, paired per round, and the target.
    fn comparison(&self, md: &mut String) {
        let Some(acs) = self.gateways.iter().position(|g| g.kind == Kind::AcsProxy) else {
            return;
        };
        let _ = writeln!(
            md,
            "\n### acs-proxy vs each bridge (paired per round, medians)\n"
        );
        let _ = writeln!(
            md,
            "| server | bridge | phase | throughput acs-proxy ÷ bridge | p50 bridge ÷ acs-proxy | p99 bridge ÷ acs-proxy |"
        );
        let _ = writeln!(md, "|---|---|---|---:|---:|---:|");
        let mut targets = Vec::new();
        for (s, server) in self.servers.iter().enumerate() {
            for (g, gateway) in self.gateways.iter().enumerate() {
                if g == acs || gateway.kind == Kind::BareRelay {
                    continue;
                }
                for (p, (phase, in_flight, _)) in self.phases.iter().enumerate() {
                    let throughput = self.ratio(s, acs, g, p, |r| r.calls_per_s);
                    let _ = writeln!(
                        md,
                        "| {} | {} | {phase} | {throughput:.2}× | {:.2}× | {:.2}× |",
                        server.title,
                        gateway.title(),
                        1.0 / self.ratio(s, acs, g, p, |r| r.p50_us),
                        1.0 / self.ratio(s, acs, g, p, |r| r.p99_us),
                    );
                    if *in_flight == 16 {
                        targets.push((server.title, gateway.title(), throughput));
                    }
                }
            }
        }
        let governance = self.governance(md, acs);
        let _ = writeln!(md, "\n### Targets (http)\n");
        let _ = writeln!(md, "| target | goal | measured | status |");
        let _ = writeln!(md, "|---|---|---|---|");
        for (server, bridge, throughput) in targets {
            let met = throughput >= TARGET_RATIO_AT_16;
            let _ = writeln!(
                md,
                "| calls/s at 16 in flight, acs-proxy ÷ {bridge} ({server}) | ≥ {TARGET_RATIO_AT_16}× | {throughput:.2}× | {} |",
                status(met)
            );
        }
        for (server, added_p50, cpu_at_16) in governance {
            let _ = writeln!(
                md,
                "| sequential p50 added over the bare relay ({server}) | ≤ {TARGET_GOVERNANCE_P50_US} µs | {added_p50:.1} µs | {} |",
                status(added_p50 <= TARGET_GOVERNANCE_P50_US)
            );
            if let Some(cpu) = cpu_at_16 {
                let _ = writeln!(
                    md,
                    "| acs-proxy CPU per call at 16 in flight ({server}) | ≤ {TARGET_CPU_AT_16_US} µs | {cpu:.1} µs | {} |",
                    status(cpu <= TARGET_CPU_AT_16_US)
                );
            }
        }
    }

    /// acs-proxy against its bare relay, paired per round: what governance
    /// adds. Returns per server the sequential added p50 and acs-proxy's CPU
    /// per call at 16 in flight, for the targets.
    fn governance(&self, md: &mut String, acs: usize) -> Vec<(&str, f64, Option<f64>)> {
        let Some(bare) = self.gateways.iter().position(|g| g.kind == Kind::BareRelay) else {
            return Vec::new();
        };
        let _ = writeln!(
            md,
            "\n### What governance adds: acs-proxy vs its bare relay (paired per round, medians)\n"
        );
        let _ = writeln!(
            md,
            "| server | phase | added p50 µs | added p99 µs | added gateway CPU/call µs | throughput acs-proxy ÷ bare relay |"
        );
        let _ = writeln!(md, "|---|---|---:|---:|---:|---:|");
        let mut figures = Vec::new();
        for (s, server) in self.servers.iter().enumerate() {
            let mut sequential = f64::NAN;
            let mut cpu_at_16 = None;
            for (p, (phase, in_flight, _)) in self.phases.iter().enumerate() {
                let added_p50 = self.difference(s, acs, bare, p, |r| r.p50_us);
                let _ = writeln!(
                    md,
                    "| {} | {phase} | {added_p50:.1} | {:.1} | {:.1} | {:.2}× |",
                    server.title,
                    self.difference(s, acs, bare, p, |r| r.p99_us),
                    self.difference(s, acs, bare, p, |r| r.root_cpu_us),
                    self.ratio(s, acs, bare, p, |r| r.calls_per_s),
                );
                if p == 0 {
                    sequential = added_p50;
                }
                if *in_flight == 16 {
                    cpu_at_16 = Some(self.med(s, acs, p, |r| r.root_cpu_us));
                }
            }
            figures.push((server.title, sequential, cpu_at_16));
        }
        figures
    }
}

fn status(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "**not met**"
    }
}
