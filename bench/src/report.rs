//! Per-run figures, their medians over rounds, and the markdown report.

use std::fmt::Write as _;

use crate::client::PhaseRun;
use crate::procfs::CpuSample;
use crate::stats::{median, percentile, range};
use crate::timed_guardian::ServiceTimes;

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
    /// `runs[server][proxied as usize]`, one per round.
    runs: Vec<[Vec<RunResult>; 2]>,
    pub parameters: String,
    pub notes: Vec<String>,
}

/// The targets of the performance issue measurable over stdio.
const TARGET_ADDED_P50_US: f64 = 30.0;
const TARGET_ADDED_P99_US: f64 = 300.0;
const TARGET_PROXY_CPU_US: f64 = 40.0;
const TARGET_THROUGHPUT_RATIO: f64 = 0.9;
const TARGET_RSS_MB: f64 = 20.0;

impl Report {
    pub fn new(servers: Vec<String>, phases: Vec<String>) -> Self {
        let runs = servers.iter().map(|_| [Vec::new(), Vec::new()]).collect();
        Report {
            servers,
            phases,
            runs,
            parameters: String::new(),
            notes: Vec::new(),
        }
    }

    pub fn add(&mut self, server: usize, proxied: bool, run: RunResult) {
        self.runs[server][usize::from(proxied)].push(run);
    }

    /// Median over rounds of `metric` for one server, path and phase.
    fn med(
        &self,
        server: usize,
        proxied: bool,
        phase: usize,
        metric: fn(&PhaseResult) -> f64,
    ) -> f64 {
        median(
            self.runs[server][usize::from(proxied)]
                .iter()
                .map(|run| metric(&run.phases[phase])),
        )
    }

    /// Per-round `combine(proxied, direct)` of `metric`, paired by round.
    fn paired(
        &self,
        server: usize,
        phase: usize,
        metric: fn(&PhaseResult) -> f64,
        combine: fn(f64, f64) -> f64,
    ) -> Vec<f64> {
        let [direct, proxied] = &self.runs[server];
        direct
            .iter()
            .zip(proxied)
            .map(|(d, p)| combine(metric(&p.phases[phase]), metric(&d.phases[phase])))
            .collect()
    }

    fn paired_median(
        &self,
        server: usize,
        phase: usize,
        metric: fn(&PhaseResult) -> f64,
        combine: fn(f64, f64) -> f64,
    ) -> f64 {
        median(self.paired(server, phase, metric, combine))
    }

    pub fn markdown(&self) -> String {
        let mut md = String::new();
        let rounds = self.runs.first().map_or(0, |r| r[0].len());
        let _ = writeln!(md, "\n## stdio suite: direct vs through acs-proxy\n");
        let _ = writeln!(md, "- parameters: {}", self.parameters);
        for note in &self.notes {
            let _ = writeln!(md, "- note: {note}");
        }
        let _ = writeln!(
            md,
            "\nFigures are medians over {rounds} rounds. \"CPU/call\" is CPU time (user + system, \
             from /proc) divided by calls: *process* is the spawned command (the proxy when \
             proxied, the server when direct), *tree* adds its children (the server behind the proxy)."
        );

        let _ = writeln!(md, "\n### Per scenario\n");
        let _ = writeln!(
            md,
            "| server | path | phase | p50 µs | p99 µs | mean µs | calls/s | CPU/call process µs | CPU/call tree µs | ctx switches/call process | errors |"
        );
        let _ = writeln!(md, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        for (s, title) in self.servers.iter().enumerate() {
            for proxied in [false, true] {
                if self.runs[s][usize::from(proxied)].is_empty() {
                    continue;
                }
                for (p, phase) in self.phases.iter().enumerate() {
                    let errors: usize = self.runs[s][usize::from(proxied)]
                        .iter()
                        .map(|run| run.phases[p].errors)
                        .sum();
                    let _ = writeln!(
                        md,
                        "| {title} | {} | {phase} | {:.1} | {:.1} | {:.1} | {:.0} | {:.1} | {:.1} | {:.1} | {errors} |",
                        path_name(proxied),
                        self.med(s, proxied, p, |r| r.p50_us),
                        self.med(s, proxied, p, |r| r.p99_us),
                        self.med(s, proxied, p, |r| r.mean_us),
                        self.med(s, proxied, p, |r| r.calls_per_s),
                        self.med(s, proxied, p, |r| r.root_cpu_us),
                        self.med(s, proxied, p, |r| r.tree_cpu_us),
                        self.med(s, proxied, p, |r| r.switches),
                    );
                }
            }
        }

        let _ = writeln!(md, "\n### Proxied vs direct (paired per round, medians)\n");
        let _ = writeln!(
            md,
            "| server | phase | p50 ratio | p99 ratio | throughput ratio | added p50 µs | added p99 µs | proxy CPU/call µs | added tree CPU/call µs |"
        );
        let _ = writeln!(md, "|---|---|---:|---:|---:|---:|---:|---:|---:|");
        for (s, title) in self.servers.iter().enumerate() {
            if self.runs[s].iter().any(Vec::is_empty) {
                continue;
            }
            for (p, phase) in self.phases.iter().enumerate() {
                let _ = writeln!(
                    md,
                    "| {title} | {phase} | {:.2} | {:.2} | {:.2} | {:.1} | {:.1} | {:.1} | {:.1} |",
                    self.paired_median(s, p, |r| r.p50_us, ratio),
                    self.paired_median(s, p, |r| r.p99_us, ratio),
                    self.paired_median(s, p, |r| r.calls_per_s, ratio),
                    self.paired_median(s, p, |r| r.p50_us, difference),
                    self.paired_median(s, p, |r| r.p99_us, difference),
                    self.med(s, true, p, |r| r.root_cpu_us),
                    self.paired_median(s, p, |r| r.tree_cpu_us, difference),
                );
            }
        }

        let _ = writeln!(md, "\n### Memory and audit\n");
        let _ = writeln!(
            md,
            "| server | path | peak RSS process MB (min–max) | peak RSS tree MB | audit entries per run | entries per tools/call |"
        );
        let _ = writeln!(md, "|---|---|---:|---:|---:|---:|");
        for (s, title) in self.servers.iter().enumerate() {
            for proxied in [false, true] {
                let runs = &self.runs[s][usize::from(proxied)];
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
                    path_name(proxied),
                    median(runs.iter().map(rss)),
                    median(runs.iter().map(|r| r.tree_rss_kib as f64 / 1024.0)),
                    if entries.is_nan() {
                        "–".into()
                    } else {
                        format!("{entries:.0}")
                    },
                    if per_call.is_nan() {
                        "–".into()
                    } else {
                        format!("{per_call:.2}")
                    },
                );
            }
        }

        self.targets(&mut md);
        md
    }

    /// The stdio targets, read on the demo server (the fastest peer, so the
    /// proxy's own cost is what shows).
    fn targets(&self, md: &mut String) {
        let Some(s) = self.servers.iter().position(|t| t.starts_with("demo")) else {
            return;
        };
        if self.runs[s].iter().any(Vec::is_empty) {
            return;
        }
        let seq = 0;
        let first_pipelined = self.phases.iter().position(|p| p.starts_with("16 "));
        let mut rows: Vec<(String, String, String, bool)> = Vec::new();
        let added_p50 = self.paired_median(s, seq, |r| r.p50_us, difference);
        rows.push((
            "added p50 per tools/call round trip".into(),
            format!("≤ {TARGET_ADDED_P50_US} µs"),
            format!("{added_p50:.1} µs (sequential)"),
            added_p50 <= TARGET_ADDED_P50_US,
        ));
        let added_p99 = self.paired_median(s, seq, |r| r.p99_us, difference);
        rows.push((
            "added p99 per tools/call round trip".into(),
            format!("≤ {TARGET_ADDED_P99_US} µs"),
            format!("{added_p99:.1} µs (sequential)"),
            added_p99 <= TARGET_ADDED_P99_US,
        ));
        let cpu_seq = self.med(s, true, seq, |r| r.root_cpu_us);
        rows.push((
            "proxy CPU per call".into(),
            format!("≤ {TARGET_PROXY_CPU_US} µs"),
            format!("{cpu_seq:.1} µs (sequential)"),
            cpu_seq <= TARGET_PROXY_CPU_US,
        ));
        if let Some(p) = first_pipelined {
            let cpu = self.med(s, true, p, |r| r.root_cpu_us);
            rows.push((
                "proxy CPU per call".into(),
                format!("≤ {TARGET_PROXY_CPU_US} µs"),
                format!("{cpu:.1} µs (16 in flight)"),
                cpu <= TARGET_PROXY_CPU_US,
            ));
            let throughput = self.paired_median(s, p, |r| r.calls_per_s, ratio);
            rows.push((
                "throughput at 16 in flight vs direct".into(),
                format!("≥ {TARGET_THROUGHPUT_RATIO}×"),
                format!("{throughput:.2}×"),
                throughput >= TARGET_THROUGHPUT_RATIO,
            ));
        }
        let rss = median(
            self.runs[s][1]
                .iter()
                .map(|r| r.root_rss_kib as f64 / 1024.0),
        );
        rows.push((
            "proxy peak RSS, one stdio session".into(),
            format!("≤ {TARGET_RSS_MB} MB"),
            format!("{rss:.1} MB"),
            rss <= TARGET_RSS_MB,
        ));
        let _ = writeln!(md, "\n### Targets (stdio, demo server)\n");
        let _ = writeln!(md, "| target | goal | measured | status |");
        let _ = writeln!(md, "|---|---|---|---|");
        for (name, goal, measured, met) in rows {
            let status = if met { "met" } else { "**not met**" };
            let _ = writeln!(md, "| {name} | {goal} | {measured} | {status} |");
        }
    }
}

fn path_name(proxied: bool) -> &'static str {
    if proxied {
        "proxied"
    } else {
        "direct"
    }
}

fn ratio(proxied: f64, direct: f64) -> f64 {
    proxied / direct
}

fn difference(proxied: f64, direct: f64) -> f64 {
    proxied - direct
}
