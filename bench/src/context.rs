//! The benchmark's options and what they resolve to: binaries, servers,
//! peers, the work directory.

use std::path::{Path, PathBuf};

use clap::Args;

use crate::setup::{self, Server};

/// Options of a benchmark run.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Suites to run, in order: stdio, http, guardian, scale (and aggregate, reload and ws, when named).
    #[arg(long, value_delimiter = ',', default_values_t = ["stdio".to_owned(), "http".to_owned(), "guardian".to_owned(), "scale".to_owned()])]
    pub suites: Vec<String>,
    /// Rounds; each runs every scenario of a suite once, in an order that rotates per round.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// Sequential warm-up calls before measuring (not reported).
    #[arg(long, default_value_t = 500)]
    pub warmup: usize,
    /// Calls in the sequential phase (stdio and guardian suites).
    #[arg(long, default_value_t = 3000)]
    pub sequential: usize,
    /// Calls in each pipelined phase (stdio and guardian suites).
    #[arg(long, default_value_t = 20000)]
    pub pipelined: usize,
    /// Requests kept in flight in the concurrent phases.
    #[arg(long, value_delimiter = ',', default_values_t = [16usize, 64])]
    pub in_flight: Vec<usize>,
    /// Calls in the sequential phase of the http suite.
    #[arg(long, default_value_t = 1000)]
    pub http_sequential: usize,
    /// Calls in each concurrent phase of the http suite.
    #[arg(long, default_value_t = 5000)]
    pub http_calls: usize,
    /// Gateways of the http suite: bare-relay (the floor), acs-proxy, supergateway, mcp-proxy.
    #[arg(long, value_delimiter = ',', default_values_t = ["bare-relay".to_owned(), "acs-proxy".to_owned(), "supergateway".to_owned(), "mcp-proxy".to_owned()])]
    pub gateways: Vec<String>,
    /// Idle sessions held at once in the scale suite.
    #[arg(long, default_value_t = 5000)]
    pub idle_sessions: usize,
    /// Sessions under load in the scale suite (taken from the idle ones).
    #[arg(long, default_value_t = 500)]
    pub active_sessions: usize,
    /// Calls spread over the active sessions in the scale suite.
    #[arg(long, default_value_t = 20000)]
    pub scale_calls: usize,
    /// Size of one tools/call request, in bytes.
    #[arg(long, default_value_t = 200)]
    pub request_bytes: usize,
    /// Calls per run of the reload suite.
    #[arg(long, default_value_t = 5000)]
    pub reload_calls: usize,
    /// Calls per second in the reload suite.
    #[arg(long, default_value_t = 1000)]
    pub reload_rate: u32,
    /// How often the reload suite rewrites the policy and sends SIGHUP.
    #[arg(long, default_value_t = 250)]
    pub reload_every_ms: u64,
    /// The embedded Guardian's policy in the stdio, http and scale suites:
    /// `rules` (`--rules` TOML rules) or `rego` (the example library in
    /// examples/policies).
    #[arg(long, default_value = "rules")]
    pub policy: String,
    /// Policy rules in the proxy's configuration (embedded Guardian).
    #[arg(long, default_value_t = 20)]
    pub rules: usize,
    /// The guardian suite's Guardian decides every request twice, on two
    /// Guardians with their own state: its work on the shared core
    /// doubled, to see how much of acs-proxy's figures depends on it.
    #[arg(long)]
    pub guardian_twice: bool,
    /// Servers to run: demo, everything.
    #[arg(long, value_delimiter = ',', default_values_t = ["demo".to_owned(), "everything".to_owned()])]
    pub servers: Vec<String>,
    /// The acs-proxy binary (default: <target dir>/release/acs-proxy).
    #[arg(long)]
    pub proxy: Option<PathBuf>,
    /// The demo server binary (default: <target dir>/release/acs-proxy-demo-server).
    #[arg(long)]
    pub demo_server: Option<PathBuf>,
    /// The bare relay of the floor scenario (default: acs-proxy-bare-relay
    /// beside this binary). Give it with `--proxy` when measuring another
    /// build, so both sides of the floor come from the same build.
    #[arg(long)]
    pub bare_relay: Option<PathBuf>,
    /// server-everything's stdio entry point (default: tests/peers/node_modules/...).
    #[arg(long)]
    pub everything: Option<PathBuf>,
    /// Where bench/install-peers put supergateway and mcp-proxy (default: bench/peers).
    #[arg(long)]
    pub bench_peers: Option<PathBuf>,
    /// The node binary for server-everything and supergateway.
    #[arg(long, default_value = "node")]
    pub node: String,
    /// Run every spawned command under `taskset -c CPUS` (e.g. 0).
    #[arg(long)]
    pub pin: Option<String>,
    /// Where configs, audit logs and stderr logs go (default: <target dir>/bench-e2e).
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// Keep each run's audit log instead of deleting it after counting.
    #[arg(long)]
    pub keep_audit: bool,
    /// A label for what was measured (default: `git describe --dirty`).
    #[arg(long)]
    pub label: Option<String>,
    /// Also write the markdown report here.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

impl BenchArgs {
    /// The embedded Guardian `--policy` names.
    pub fn embedded(&self) -> Result<setup::Decider, String> {
        match self.policy.as_str() {
            "rules" => Ok(setup::Decider::Embedded { rules: self.rules }),
            "rego" => Ok(setup::Decider::Rego),
            other => Err(format!("unknown --policy {other:?} (rules, rego)")),
        }
    }

    /// How `--policy` is described in a report.
    pub fn policy_label(&self) -> String {
        match self.policy.as_str() {
            "rego" => "the Rego example library (examples/policies), caller a developer".into(),
            _ => format!("{} rules (none match echo)", self.rules),
        }
    }
}

/// Resolved paths and servers shared by the suites.
pub struct Context {
    pub proxy: PathBuf,
    /// This benchmark's own binary (it serves the echo upstream and the Guardian).
    pub bench: PathBuf,
    /// `acs-proxy-bare-relay`, built beside this binary: the floor scenario.
    pub bare_relay: PathBuf,
    pub bench_peers: PathBuf,
    pub work: PathBuf,
    pub servers: Vec<Server>,
    pub pin: Option<String>,
    pub label: String,
    pub notes: Vec<String>,
}

impl Context {
    /// Checks the binaries and resolves every default.
    pub fn new(args: &BenchArgs) -> Result<Context, String> {
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
            root.join(
                "tests/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
            )
        });
        let work = args
            .work_dir
            .clone()
            .unwrap_or_else(|| target.join("bench-e2e"));
        // The configs written here name their audit logs under `work`, and
        // the proxy reads a config's relative paths against its directory.
        let work = std::path::absolute(&work).unwrap_or(work);
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
            Some(cpus) if setup::runnable("taskset") => Some(cpus.clone()),
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
        let bench = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let bare_relay = args
            .bare_relay
            .clone()
            .unwrap_or_else(|| bench.with_file_name("acs-proxy-bare-relay"));
        if !bare_relay.exists() {
            return Err(format!(
                "{} not found: run `cargo build --release --workspace` first",
                bare_relay.display()
            ));
        }
        Ok(Context {
            proxy,
            bench,
            bare_relay,
            bench_peers: args
                .bench_peers
                .clone()
                .unwrap_or_else(|| root.join("bench/peers")),
            work,
            servers,
            pin,
            label: args
                .label
                .clone()
                .or_else(|| setup::revision(&root))
                .unwrap_or_else(|| "unknown revision".into()),
            notes,
        })
    }

    /// The report's title block: what was measured, on what.
    pub fn header(&self) -> String {
        let mut md = String::from("# acs-proxy end-to-end benchmark\n\n");
        md.push_str(&format!("- measured: {}\n", self.label));
        md.push_str(&format!(
            "- binaries: {} (gateway), {} (bare relay)\n",
            self.proxy.display(),
            self.bare_relay.display()
        ));
        md.push_str(&format!("- machine: {}\n", crate::procfs::machine()));
        for note in &self.notes {
            md.push_str(&format!("- note: {note}\n"));
        }
        md
    }

    /// `command` under `taskset` when pinning was asked for.
    pub fn pinned(&self, command: Vec<String>) -> Vec<String> {
        setup::pinned(command, self.pin.as_deref())
    }

    /// Runs this benchmark's `helper` subcommand with `args`, pinned like
    /// everything else, and reads the JSON it prints.
    pub fn run_helper<T: serde::de::DeserializeOwned>(
        &self,
        helper: &str,
        args: &[String],
    ) -> Result<T, String> {
        let mut command = vec![absolute(&self.bench), helper.to_owned()];
        command.extend(args.iter().cloned());
        let command = self.pinned(command);
        let (program, args) = command.split_first().ok_or("empty command")?;
        let output = std::process::Command::new(program)
            .args(args)
            .stderr(std::process::Stdio::inherit())
            .output()
            .map_err(|e| format!("{program}: {e}"))?;
        if !output.status.success() {
            return Err(format!("{helper} failed: {}", output.status));
        }
        serde_json::from_slice(&output.stdout).map_err(|e| format!("{helper} answer: {e}"))
    }
}

/// `path` made absolute (configs are read from another directory).
pub fn absolute(path: &Path) -> String {
    std::path::absolute(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}
