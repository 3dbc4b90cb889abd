//! Per-run figures, their medians over rounds, and the markdown report.

use std::fmt::Write as _;

use crate::client::PhaseRun;
use crate::procfs::CpuSample;
use crate::stats::{median, percentile, range};
use crate::timed_guardian::ServiceTimes;

/// How the load generator reaches the server in one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// The server alone.
    Direct,
    /// `acs-proxy-bare-relay` in front of it: the gateway's transports,
    /// nothing else; the floor governance is measured against.
    BareRelay,
    /// acs-proxy with full governance.
    Governed,
}

impl Scenario {
    /// Every scenario, in the order the report lists them.
    pub const ALL: [Scenario; 3] = [Scenario::Direct, Scenario::BareRelay, Scenario::Governed];

    /// Its name in file names, progress lines and the report.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Direct => "direct",
            Scenario::BareRelay => "bare-relay",
            Scenario::Governed => "acs-proxy",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// One phase of one run.
#[derive(Debug, Clone)]
pub struct PhaseResult {
    pub p50_us: f64,
    pub p99_us: f64,
    pub mean_us: f64,
    pub calls_per_s: f64,
    /// CPU of the spawned process (the proxy, or the direct server) per call.
    pub root_cpu_us: f64,
    /// CPU of the spawned process and its children per call.
    pub tree_cpu_us: f64,
    /// Context switches of the spawned process's threads per call.
    pub switches: f64,
    pub errors: usize,
}

impl PhaseResult {
    /// Summarizes a phase given the CPU samples taken around it.
    pub fn new(run: PhaseRun, before: CpuSample, after: CpuSample) -> Self {
        let mut latencies = run.latencies_ns;
        latencies.sort_unstable();
        let calls = latencies.len();
        let per_call = |ns: u64| ns as f64 / 1000.0 / calls.max(1) as f64;
        PhaseResult {
            p50_us: percentile(&latencies, 50.0) as f64 / 1000.0,
            p99_us: percentile(&latencies, 99.0) as f64 / 1000.0,
            mean_us: latencies.iter().sum::<u64>() as f64 / 1000.0 / calls.max(1) as f64,
            calls_per_s: calls as f64 / run.wall.as_secs_f64(),
            root_cpu_us: per_call(after.root_ns.saturating_sub(before.root_ns)),
            tree_cpu_us: per_call(after.tree_ns.saturating_sub(before.tree_ns)),
            switches: after.root_switches.saturating_sub(before.root_switches) as f64
                / calls.max(1) as f64,
            errors: run.errors,
        }
    }
}

/// One run of one scenario.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub phases: Vec<PhaseResult>,
    /// VmHWM of the spawned process, KiB.
    pub root_rss_kib: u64,
    /// Sum of VmHWM over the spawned process and its children, KiB.
    pub tree_rss_kib: u64,
    /// Lines in the proxy's audit log (proxied runs).
    pub audit_entries: Option<u64>,
    /// Every tools/call of the run, warm-up included.
    pub calls: usize,
    /// Per phase, the remote Guardian's own service times (remote runs).
    pub guardian: Vec<ServiceTimes>,
}

impl RunResult {
    /// A one-line progress summary.
    pub fn summary(&self) -> String {
        let mut line = String::new();
        for phase in &self.phases {
            let _ = write!(
                line,
                "[p50 {:.1} p99 {:.1} µs, {:.0}/s, cpu {:.1}/{:.1} µs, {:.1} cs] ",
                phase.p50_us,
                phase.p99_us,
                phase.calls_per_s,
                phase.root_cpu_us,
                phase.tree_cpu_us,
                phase.switches
            );
        }
        let _ = write!(line, "rss {:.1} MB", self.root_rss_kib as f64 / 1024.0);
        if let Some(entries) = self.audit_entries {
            let _ = write!(line, ", {entries} audit entries");
        }
        line
    }
}

/// Every run, by server and path, in round order.
pub struct Report {
    servers: Vec<String>,
    phases: Vec<String>,
    /// `runs[server][scenario.index()]`, one per round.
    runs: Vec<[Vec<RunResult>; 3]>,
    pub parameters: String,
    pub notes: Vec<String>,
}

/// The targets of the performance issue measurable over stdio.
const TARGET_ADDED_P50_US: f64 = 30.0;
const TARGET_ADDED_P99_US: f64 = 300.0;
const TARGET_PROXY_CPU_US: f64 = 40.0;
const TARGET_THROUGHPUT_RATIO: f64 = 0.9;
const TARGET_RSS_MB: f64 = 20.0;
/// What governance may add over the bare relay (stdio, sequential p50 and
/// proxy CPU at 16 in flight).
const TARGET_GOVERNANCE_P50_US: f64 = 15.0;
const TARGET_GOVERNANCE_CPU_US: f64 = 15.0;

impl Report {
    pub fn new(servers: Vec<String>, phases: Vec<String>) -> Self {
        let runs = servers
            .iter()
            .map(|_| [Vec::new(), Vec::new(), Vec::new()])
            .collect();
        Report {
            servers,
            phases,
            runs,
            parameters: String::new(),
            notes: Vec::new(),
        }
    }

    pub fn add(&mut self, server: usize, scenario: Scenario, run: RunResult) {
        self.runs[server][scenario.index()].push(run);
    }

    fn runs(&self, server: usize, scenario: Scenario) -> &[RunResult] {
        &self.runs[server][scenario.index()]
    }

    /// Median over rounds of `metric` for one server, scenario and phase.
    fn med(
        &self,
        server: usize,
        scenario: Scenario,
        phase: usize,
        metric: fn(&PhaseResult) -> f64,
    ) -> f64 {
        median(
            self.runs(server, scenario)
                .iter()
                .map(|run| metric(&run.phases[phase])),
        )
    }

    /// Median over rounds of `combine(over, base)` of `metric`, paired by
    /// round, so slow and fast rounds of the machine cancel out.
    fn paired_median(
        &self,
        server: usize,
        (over, base): (Scenario, Scenario),
        phase: usize,
        metric: fn(&PhaseResult) -> f64,
        combine: fn(f64, f64) -> f64,
    ) -> f64 {
        median(
            self.runs(server, base)
                .iter()
                .zip(self.runs(server, over))
                .map(|(b, o)| combine(metric(&o.phases[phase]), metric(&b.phases[phase]))),
        )
    }

    /// Whether every scenario of `pair` ran for `server`.
    fn has(&self, server: usize, (over, base): (Scenario, Scenario)) -> bool {
        !self.runs(server, over).is_empty() && !self.runs(server, base).is_empty()
    }

    pub fn markdown(&self) -> String {
        let mut md = String::new();
        let rounds = self.runs.first().map_or(0, |r| r[0].len());
        let _ = writeln!(md, "\n## stdio suite: direct, bare relay and acs-proxy\n");
        let _ = writeln!(md, "- parameters: {}", self.parameters);
        for note in &self.notes {
            let _ = writeln!(md, "- note: {note}");
        }
        let _ = writeln!(
            md,
            "\nFigures are medians over {rounds} rounds. \"CPU/call\" is CPU time (user + system, \
             from /proc) divided by calls: *process* is the spawned command (the relay in front \
             of the server, or the server when direct), *tree* adds its children (the server \
             behind the relay). The bare relay is acs-proxy's transports with nothing between \
             them: what acs-proxy adds beyond it is what governance costs."
        );
        self.scenarios_table(&mut md);
        self.pairs_table(&mut md);
        self.memory_table(&mut md);
        self.targets(&mut md);
        md
    }

    fn scenarios_table(&self, md: &mut String) {
        let _ = writeln!(md, "\n### Per scenario\n");
        let _ = writeln!(
            md,
            "| server | path | phase | p50 µs | p99 µs | mean µs | calls/s | CPU/call process µs | CPU/call tree µs | ctx switches/call process | errors |"
        );
        let _ = writeln!(md, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        for (s, title) in self.servers.iter().enumerate() {
            for scenario in Scenario::ALL {
                if self.runs(s, scenario).is_empty() {
                    continue;
                }
                for (p, phase) in self.phases.iter().enumerate() {
                    let errors: usize = self
                        .runs(s, scenario)
                        .iter()
                        .map(|run| run.phases[p].errors)
                        .sum();
                    let _ = writeln!(
                        md,
                        "| {title} | {} | {phase} | {:.1} | {:.1} | {:.1} | {:.0} | {:.1} | {:.1} | {:.1} | {errors} |",
                        scenario.name(),
                        self.med(s, scenario, p, |r| r.p50_us),
                        self.med(s, scenario, p, |r| r.p99_us),
                        self.med(s, scenario, p, |r| r.mean_us),
                        self.med(s, scenario, p, |r| r.calls_per_s),
                        self.med(s, scenario, p, |r| r.root_cpu_us),
                        self.med(s, scenario, p, |r| r.tree_cpu_us),
                        self.med(s, scenario, p, |r| r.switches),
                    );
                }
            }
        }
    }

    /// The bare relay and acs-proxy against the server alone, and acs-proxy
    /// against the bare relay: the floor, the whole cost, and governance.
    fn pairs_table(&self, md: &mut String) {
        let _ = writeln!(md, "\n### Paired per round (medians)\n");
        let _ = writeln!(
            md,
            "| server | comparison | phase | p50 ratio | p99 ratio | throughput ratio | added p50 µs | added p99 µs | added process CPU/call µs | added tree CPU/call µs |"
        );
        let _ = writeln!(md, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|");
        let pairs = [
            (Scenario::BareRelay, Scenario::Direct),
            (Scenario::Governed, Scenario::Direct),
            (Scenario::Governed, Scenario::BareRelay),
        ];
        for (s, title) in self.servers.iter().enumerate() {
            for pair in pairs {
                if !self.has(s, pair) {
                    continue;
                }
                for (p, phase) in self.phases.iter().enumerate() {
                    let _ = writeln!(
                        md,
                        "| {title} | {} vs {} | {phase} | {:.2} | {:.2} | {:.2} | {:.1} | {:.1} | {:.1} | {:.1} |",
                        pair.0.name(),
                        pair.1.name(),
                        self.paired_median(s, pair, p, |r| r.p50_us, ratio),
                        self.paired_median(s, pair, p, |r| r.p99_us, ratio),
                        self.paired_median(s, pair, p, |r| r.calls_per_s, ratio),
                        self.paired_median(s, pair, p, |r| r.p50_us, difference),
                        self.paired_median(s, pair, p, |r| r.p99_us, difference),
                        self.paired_median(s, pair, p, process_cpu, difference),
                        self.paired_median(s, pair, p, |r| r.tree_cpu_us, difference),
                    );
                }
            }
        }
    }

    fn memory_table(&self, md: &mut String) {
        let _ = writeln!(md, "\n### Memory and audit\n");
        let _ = writeln!(
            md,
            "| server | path | peak RSS process MB (min–max) | peak RSS tree MB | audit entries per run | entries per tools/call |"
        );
        let _ = writeln!(md, "|---|---|---:|---:|---:|---:|");
        for (s, title) in self.servers.iter().enumerate() {
            for scenario in Scenario::ALL {
                let runs = self.runs(s, scenario);
                if runs.is_empty() {
                    continue;
                }
                let rss = |run: &RunResult| run.root_rss_kib as f64 / 1024.0;
                let (lo, hi) = range(runs.iter().map(rss));
                let entries = median(
                    runs.iter()
                        .filter_map(|r| r.audit_entries.map(|e| e as f64)),
                );
                let per_call = median(
                    runs.iter()
                        .filter_map(|r| r.audit_entries.map(|e| e as f64 / r.calls as f64)),
                );
                let _ = writeln!(
                    md,
                    "| {title} | {} | {:.1} ({lo:.1}–{hi:.1}) | {:.1} | {} | {} |",
                    scenario.name(),
                    median(runs.iter().map(rss)),
                    median(runs.iter().map(|r| r.tree_rss_kib as f64 / 1024.0)),
                    dash_or(entries, 0),
                    dash_or(per_call, 2),
                );
            }
        }
    }

    /// The stdio targets, read on the demo server (the fastest peer, so the
    /// proxy's own cost is what shows).
    fn targets(&self, md: &mut String) {
        let Some(s) = self.servers.iter().position(|t| t.starts_with("demo")) else {
            return;
        };
        let whole = (Scenario::Governed, Scenario::Direct);
        if !self.has(s, whole) {
            return;
        }
        let seq = 0;
        let first_pipelined = self.phases.iter().position(|p| p.starts_with("16 "));
        let mut rows = Vec::new();
        let added_p50 = self.paired_median(s, whole, seq, |r| r.p50_us, difference);
        rows.push(Target::at_most(
            "added p50 per tools/call round trip",
            TARGET_ADDED_P50_US,
            added_p50,
            "µs (sequential)",
        ));
        let added_p99 = self.paired_median(s, whole, seq, |r| r.p99_us, difference);
        rows.push(Target::at_most(
            "added p99 per tools/call round trip",
            TARGET_ADDED_P99_US,
            added_p99,
            "µs (sequential)",
        ));
        let cpu_seq = self.med(s, Scenario::Governed, seq, process_cpu);
        rows.push(Target::at_most(
            "proxy CPU per call",
            TARGET_PROXY_CPU_US,
            cpu_seq,
            "µs (sequential)",
        ));
        if let Some(p) = first_pipelined {
            let cpu = self.med(s, Scenario::Governed, p, process_cpu);
            rows.push(Target::at_most(
                "proxy CPU per call",
                TARGET_PROXY_CPU_US,
                cpu,
                "µs (16 in flight)",
            ));
            let throughput = self.paired_median(s, whole, p, |r| r.calls_per_s, ratio);
            rows.push(Target::at_least(
                "throughput at 16 in flight vs direct",
                TARGET_THROUGHPUT_RATIO,
                throughput,
                "×",
            ));
        }
        let governance = (Scenario::Governed, Scenario::BareRelay);
        if self.has(s, governance) {
            let added = self.paired_median(s, governance, seq, |r| r.p50_us, difference);
            rows.push(Target::at_most(
                "governance: added p50 over the bare relay",
                TARGET_GOVERNANCE_P50_US,
                added,
                "µs (sequential)",
            ));
            if let Some(p) = first_pipelined {
                let cpu = self.paired_median(s, governance, p, process_cpu, difference);
                rows.push(Target::at_most(
                    "governance: proxy CPU per call beyond the bare relay",
                    TARGET_GOVERNANCE_CPU_US,
                    cpu,
                    "µs (16 in flight)",
                ));
            }
        }
        let rss = median(
            self.runs(s, Scenario::Governed)
                .iter()
                .map(|r| r.root_rss_kib as f64 / 1024.0),
        );
        rows.push(Target::at_most(
            "proxy peak RSS, one stdio session",
            TARGET_RSS_MB,
            rss,
            "MB",
        ));
        let _ = writeln!(md, "\n### Targets (stdio, demo server)\n");
        let _ = writeln!(md, "| target | goal | measured | status |");
        let _ = writeln!(md, "|---|---|---|---|");
        for row in rows {
            let status = if row.met { "met" } else { "**not met**" };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {status} |",
                row.name, row.goal, row.measured
            );
        }
    }
}

/// One row of the targets table.
struct Target {
    name: &'static str,
    goal: String,
    measured: String,
    met: bool,
}

impl Target {
    fn at_most(name: &'static str, goal: f64, measured: f64, unit: &str) -> Self {
        Target {
            name,
            goal: format!("≤ {goal} {}", unit_only(unit)),
            measured: format!("{measured:.1} {unit}"),
            met: measured <= goal,
        }
    }

    fn at_least(name: &'static str, goal: f64, measured: f64, unit: &str) -> Self {
        Target {
            name,
            goal: format!("≥ {goal}{unit}"),
            measured: format!("{measured:.2}{unit}"),
            met: measured >= goal,
        }
    }
}

/// `µs` of `µs (sequential)`.
fn unit_only(unit: &str) -> &str {
    unit.split_whitespace().next().unwrap_or(unit)
}

fn dash_or(value: f64, decimals: usize) -> String {
    if value.is_nan() {
        "–".into()
    } else {
        format!("{value:.decimals$}")
    }
}

fn process_cpu(r: &PhaseResult) -> f64 {
    r.root_cpu_us
}

fn ratio(over: f64, base: f64) -> f64 {
    over / base
}

fn difference(over: f64, base: f64) -> f64 {
    over - base
}
