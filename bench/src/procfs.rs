//! CPU time and peak memory of a process tree, read from /proc (Linux).

use std::collections::HashMap;
use std::fs;

/// A process and everything it spawned, as found at one moment.
#[derive(Debug, Clone)]
pub struct Tree {
    /// The spawned process (the proxy, or the server when run directly).
    pub root: u32,
    /// Its descendants (the server behind the proxy).
    pub descendants: Vec<u32>,
}

/// CPU time consumed so far, in nanoseconds, and context switches.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuSample {
    /// The root process.
    pub root_ns: u64,
    /// The root and its descendants.
    pub tree_ns: u64,
    /// Voluntary + involuntary context switches of the root's live threads.
    pub root_switches: u64,
}

impl Tree {
    /// `root` and its descendants as they are now.
    pub fn of(root: u32) -> Tree {
        Tree {
            root,
            descendants: descendants(root),
        }
    }

    /// CPU time of the root and of the whole tree so far.
    pub fn cpu(&self) -> CpuSample {
        let root_ns = cpu_ns(self.root);
        let rest: u64 = self.descendants.iter().map(|&pid| cpu_ns(pid)).sum();
        CpuSample {
            root_ns,
            tree_ns: root_ns + rest,
            root_switches: context_switches(self.root),
        }
    }

    /// Peak resident set (VmHWM) of the root and the sum over the tree, in KiB.
    pub fn peak_rss_kib(&self) -> (u64, u64) {
        let root = vm_hwm_kib(self.root).unwrap_or(0);
        let rest: u64 = self
            .descendants
            .iter()
            .filter_map(|&pid| vm_hwm_kib(pid))
            .sum();
        (root, root + rest)
    }
}

/// CPU time (user + system) of every thread of `pid`, in nanoseconds.
///
/// Summed from each thread's `schedstat` (nanosecond resolution). Threads
/// that exited are no longer listed there, so the larger of that sum and
/// the process's `stat` utime + stime (10 ms ticks, exited threads
/// included) is returned.
pub fn cpu_ns(pid: u32) -> u64 {
    let mut threads = 0u64;
    if let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            let path = task.path().join("schedstat");
            if let Ok(text) = fs::read_to_string(path) {
                threads += text
                    .split_whitespace()
                    .next()
                    .and_then(|ns| ns.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    threads.max(stat_cpu_ns(pid).unwrap_or(0))
}

/// Context switches (voluntary + involuntary) summed over the live
/// threads of `pid`: each is a thread going to sleep or being preempted,
/// so the count per call shows how often a message changes threads.
pub fn context_switches(pid: u32) -> u64 {
    let mut total = 0;
    if let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            let Ok(status) = fs::read_to_string(task.path().join("status")) else {
                continue;
            };
            total += status
                .lines()
                .filter(|line| line.contains("ctxt_switches:"))
                .filter_map(|line| line.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>();
        }
    }
    total
}

/// utime + stime from `/proc/<pid>/stat`, in nanoseconds (ticks of 10 ms,
/// USER_HZ being 100 on Linux).
fn stat_cpu_ns(pid: u32) -> Option<u64> {
    let fields = stat_fields(pid)?;
    // After the command: state is field 3, utime 14, stime 15 (1-based).
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) * 10_000_000)
}

/// The fields of `/proc/<pid>/stat` after the `(comm)` field.
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &text[text.rfind(')')? + 1..];
    Some(after.split_whitespace().map(str::to_owned).collect())
}

/// VmHWM (peak resident set) of `pid`, in KiB.
pub fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
}

/// Every process below `root`, found by scanning `/proc/*/stat` for parents.
fn descendants(root: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    if let Ok(entries) = fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let parent = stat_fields(pid)
                .and_then(|fields| fields.get(1).and_then(|ppid| ppid.parse::<u32>().ok()));
            if let Some(parent) = parent {
                children.entry(parent).or_default().push(pid);
            }
        }
    }
    let mut found = Vec::new();
    let mut queue = vec![root];
    while let Some(pid) = queue.pop() {
        for &child in children.get(&pid).map(Vec::as_slice).unwrap_or_default() {
            found.push(child);
            queue.push(child);
        }
    }
    found
}

/// A one-line description of the machine: CPUs, model, memory.
pub fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        cpuinfo
            .lines()
            .find(|line| line.starts_with(name))
            .and_then(|line| line.split_once(':'))
            .map(|(_, value)| value.trim().to_owned())
            .unwrap_or_else(|| "unknown".into())
    };
    let meminfo = fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_gib = meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0 / 1024.0);
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "{cpus} CPUs ({}, {} MHz), {mem_gib:.1} GiB RAM, Linux {}",
        field("model name"),
        field("cpu MHz"),
        kernel.trim()
    )
}

/// The 1, 5 and 15 minute load averages, as /proc/loadavg spells them.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".into())
}
