//! `acs-proxy`: the command line.
//!
//! `run` (the default) serves MCP traffic; `audit verify` checks a log's
//! hash chains; `audit repair` truncates a torn final line after a crash;
//! `audit export` writes a log as JSONL or OCSF events;
//! `config check` validates a `proxy.toml` without starting anything;
//! `pins show|diff|approve` reviews the tool pin file;
//! `policy test` and `policy eval` check a policy before it guards anything.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use acs_proxy::admin::{self, Health};
use acs_proxy::audit::{self, AuditLog, AuditSettings, OnFailure};
use acs_proxy::config::{Config, GuardianMode, ListenTransport};
use acs_proxy::enforce::integrity::review::{self as pins, PinsCommand};
use acs_proxy::enforce::integrity::Integrity;
use acs_proxy::guardian::embedded::{reload, EmbeddedGuardian};
use acs_proxy::guardian::remote::{self, RemoteGuardian};
use acs_proxy::guardian::Guardian;
use acs_proxy::policy_tool;
use acs_proxy::relay::{run_stdio, stop_on_signal, RelaySessions, SessionExit};
use acs_proxy::telemetry;
use acs_proxy::transport::client_tls::TlsSettings;
use acs_proxy::transport::http::server::{Server, ServerSettings};
use clap::{Args, Parser, Subcommand};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

/// An MCP gateway that enforces Agent Control Standard decisions inline.
#[derive(Parser, Debug)]
#[command(name = "acs-proxy", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve MCP traffic (the default).
    Run(RunArgs),
    /// Work with audit logs.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Work with configuration files.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Review and approve the tool pin file (`[integrity] pins`).
    #[command(subcommand)]
    Pins(PinsCommand),
    /// Test and try out policies.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Exit 0 when `/healthz` answers at ADDRESS (for container health checks).
    Healthcheck {
        /// The `[metrics] address`, e.g. 127.0.0.1:9464.
        address: String,
    },
}

#[derive(Args, Debug, Default)]
struct RunArgs {
    /// The configuration file.
    #[arg(long, short, env = "ACS_PROXY_CONFIG")]
    config: Option<PathBuf>,
    /// Audit log path (overrides `[audit] path`).
    #[arg(long)]
    audit: Option<PathBuf>,
    /// The upstream server to spawn, after `--` (overrides `[[upstream]]`).
    #[arg(last = true)]
    upstream: Vec<String>,
}

#[derive(Subcommand, Debug)]
enum AuditCommand {
    /// Check every hash chain in a log; exits non-zero naming the first bad line.
    Verify {
        /// The JSONL audit log.
        file: PathBuf,
    },
    /// Write a log's entries to stdout as JSONL or as OCSF events.
    Export(audit::export::ExportArgs),
    /// Truncate a torn final line (left by a crash mid-write).
    Repair {
        /// The JSONL audit log.
        file: PathBuf,
    },
}

#[derive(Subcommand, Debug)]
enum ConfigCommand {
    /// Validate a configuration file, including its policy rules.
    Check {
        /// The configuration file.
        file: PathBuf,
    },
}

#[derive(Subcommand, Debug)]
enum PolicyCommand {
    /// Run the Rego `test_*` rules and the `*.fixture.json` cases under DIR.
    Test {
        /// The directory of policies, tests and fixtures.
        dir: PathBuf,
    },
    /// Decide one hook file with a configuration's policy.
    Eval {
        /// The configuration whose `[policy]` decides.
        #[arg(long, short)]
        config: PathBuf,
        /// The hook: an ACS request as JSON, optionally with `context`.
        hook: PathBuf,
    },
}

fn main() -> ExitCode {
    init_logging();
    let cli = Cli::parse();
    match cli.command {
        None => run(cli.run),
        Some(Command::Run(args)) => run(args),
        Some(Command::Audit(AuditCommand::Verify { file })) => verify(&file),
        Some(Command::Audit(AuditCommand::Repair { file })) => repair(&file),
        Some(Command::Audit(AuditCommand::Export(args))) => audit::export::run(&args),
        Some(Command::Config(ConfigCommand::Check { file })) => check(&file),
        Some(Command::Pins(command)) => pins::run(&command),
        Some(Command::Policy(PolicyCommand::Test { dir })) => policy_test(&dir),
        Some(Command::Policy(PolicyCommand::Eval { config, hook })) => policy_eval(&config, &hook),
        Some(Command::Healthcheck { address }) => match admin::probe(&address) {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("acs-proxy: unhealthy: {err}");
                ExitCode::FAILURE
            }
        },
    }
}

/// Logs go to stderr: in stdio mode stdout belongs to the agent.
///
/// A log line that cannot be written is dropped. The formatter's own
/// report of such a failure goes through `eprintln!`, which panics when
/// stderr fails too (a full disk, a file size limit), and would take down
/// whichever task was logging, the audit writer included.
fn init_logging() {
    let filter =
        EnvFilter::try_from_env("ACS_PROXY_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .log_internal_errors(false)
        .init();
}

fn load_config(args: &RunArgs) -> Result<Config, String> {
    let mut config = match (&args.config, args.upstream.is_empty()) {
        (Some(path), _) => Config::load(path).map_err(|e| e.to_string())?,
        (None, false) => Config::for_command(args.upstream.clone()).map_err(|e| e.to_string())?,
        (None, true) => {
            return Err(
                "nothing to run: pass --config FILE, or the server command after `--`".into(),
            )
        }
    };
    if args.config.is_some() && !args.upstream.is_empty() {
        if let Some(upstream) = config.upstreams.first_mut() {
            upstream.command = args.upstream.clone();
        }
    }
    if let Some(path) = &args.audit {
        config.audit.path = path.clone();
    }
    Ok(config)
}

fn run(args: RunArgs) -> ExitCode {
    let config = match load_config(&args) {
        Ok(config) => Arc::new(config),
        Err(err) => {
            eprintln!("acs-proxy: {err}");
            return ExitCode::from(2);
        }
    };
    // One stdio session gains nothing from a second worker: its tasks would
    // only bounce between the two threads, a wake-up each time (see
    // BENCHMARKS.md, "Where the time goes"). Network listeners serve many
    // sessions at once and keep the multi-thread runtime.
    let mut builder = if config.listen.transport == ListenTransport::Stdio {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("acs-proxy: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(serve(config));
    // A blocking-pool thread may still be reading the agent's stdin (when it
    // is a terminal or a file) and cannot be interrupted; everything that
    // matters has been flushed by now, so do not wait for it.
    runtime.shutdown_background();
    match outcome {
        Ok(code) => code,
        Err(err) => {
            eprintln!("acs-proxy: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(config: Arc<Config>) -> Result<ExitCode, String> {
    survive_file_size_limit();
    config.metrics.apply();
    start_tracing(&config)?;
    let outcome = serve_traced(config).await;
    telemetry::shutdown().await;
    outcome
}

/// Switches OpenTelemetry tracing on when `[telemetry]` or the `OTEL_*`
/// variables ask for it.
fn start_tracing(config: &Config) -> Result<(), String> {
    let tls = TlsSettings::default()
        .client_config()
        .map_err(|e| format!("telemetry: {e}"))?;
    let http = reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .build()
        .map_err(|e| format!("telemetry: the OTLP/HTTP client: {e}"))?;
    if let Some(settings) = telemetry::init(&config.telemetry, http).map_err(|e| e.to_string())? {
        tracing::info!(
            protocol = ?settings.protocol,
            service = %settings.service_name,
            "OpenTelemetry traces are exported over OTLP"
        );
    }
    Ok(())
}

async fn serve_traced(config: Arc<Config>) -> Result<ExitCode, String> {
    let settings = AuditSettings {
        path: config.audit.path.clone(),
        fsync: config.audit.fsync,
    };
    let audit = AuditLog::open(&settings).map_err(|e| e.to_string())?;
    if config.audit.on_failure == OnFailure::Allow {
        tracing::warn!(
            "[audit] on_failure = \"allow\": while the audit log cannot be written, \
             traffic passes unrecorded"
        );
    }
    let health = Health::new();
    health.watch_audit(audit.clone());
    if let Some(address) = config.metrics.address {
        let bound = admin::serve(address, health.clone())
            .await
            .map_err(|e| format!("cannot serve metrics on {address}: {e}"))?;
        tracing::info!(%bound, "metrics, /healthz and /readyz are served");
    }
    if config.integrity.is_active() {
        // A malformed pin file fails the start, not the first list.
        Integrity::shared(&config.integrity).map_err(|e| e.to_string())?;
    }
    acs_proxy::relay::aggregate::probe::check(&config)
        .await
        .map_err(|e| e.to_string())?;
    let guardian = guardian(&config, &health)?;
    if config.listen.transport != ListenTransport::Stdio {
        return serve_network(config, guardian, audit, health).await;
    }
    let exit = run_stdio(config, guardian, audit, health)
        .await
        .map_err(|e| e.to_string())?;
    Ok(match exit {
        SessionExit::ClientClosed | SessionExit::Stopped => ExitCode::SUCCESS,
        SessionExit::ServerExited(exit) => {
            eprintln!(
                "acs-proxy: {}; pending requests were failed",
                exit.describe()
            );
            ExitCode::from(3)
        }
    })
}

/// A write past `RLIMIT_FSIZE` raises SIGXFSZ, whose default action kills
/// the process; with a handler installed the write fails with EFBIG
/// instead, and the audit log treats it like a full disk.
fn survive_file_size_limit() {
    let file_size_exceeded = tokio::signal::unix::SignalKind::from_raw(nix::libc::SIGXFSZ);
    // The handler stays installed for the life of the process, so the
    // stream itself can go.
    if let Err(err) = tokio::signal::unix::signal(file_size_exceeded) {
        tracing::warn!(%err, "cannot handle SIGXFSZ; a file size limit would end the process");
    }
}

/// The network deployment (`[listen] transport = "http"` or `"ws"`): every
/// agent session gets its own upstream and audit chain. Serves until
/// SIGTERM/SIGINT, then stops accepting, ends every session (each seals
/// its chain), waits for them up to a deadline and flushes the audit log.
async fn serve_network(
    config: Arc<Config>,
    guardian: Arc<dyn Guardian>,
    audit: AuditLog,
    health: Arc<Health>,
) -> Result<ExitCode, String> {
    let stop = CancellationToken::new();
    tokio::spawn(stop_on_signal(stop.clone()));
    let cancel_sessions = CancellationToken::new();
    let sessions = Arc::new(RelaySessions::new(
        config.clone(),
        guardian,
        audit.clone(),
        cancel_sessions.clone(),
    ));
    let server = Server::bind(
        ServerSettings::from_config(&config),
        sessions,
        Some(audit.clone()),
    )
    .await?;
    let address = server.local_addr();
    // A stable line on stderr: scripts and tests read the bound address here.
    eprintln!(
        "acs-proxy: listening on {}://{address} ({})",
        server.scheme(),
        server.endpoints().join(", ")
    );
    health.set_upstream_up(true);
    let report = server.run(stop, cancel_sessions).await;
    health.set_upstream_up(false);
    if report.unfinished_sessions > 0 {
        tracing::warn!(
            sessions = report.unfinished_sessions,
            "sessions were still ending at the shutdown deadline"
        );
    }
    if let Err(err) = audit.flush().await {
        tracing::error!(%err, "the audit log could not be flushed");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// The Guardian `[guardian]` names; a remote one is pinged in the
/// background so `/readyz` reflects whether it answers.
fn guardian(config: &Config, health: &Arc<Health>) -> Result<Arc<dyn Guardian>, String> {
    match config.guardian.mode {
        GuardianMode::Embedded => {
            let embedded = Arc::new(EmbeddedGuardian::from_config(config));
            if let Some(path) = &config.source {
                tokio::spawn(reload::watch(
                    embedded.clone(),
                    path.clone(),
                    CancellationToken::new(),
                ));
            }
            Ok(embedded)
        }
        GuardianMode::Remote => {
            let remote = Arc::new(remote::from_config(config).map_err(|e| e.to_string())?);
            let interval = Duration::from_millis(config.guardian.ping_interval_ms.max(100));
            tokio::spawn(ping_loop(remote.clone(), health.clone(), interval));
            Ok(remote)
        }
    }
}

async fn ping_loop(guardian: Arc<RemoteGuardian>, health: Arc<Health>, interval: Duration) {
    loop {
        let up = guardian.ping().await;
        if let Err(err) = &up {
            tracing::warn!(%err, "the Guardian does not answer system/ping");
        }
        health.set_guardian_up(up.is_ok());
        tokio::time::sleep(interval).await;
    }
}

fn verify(file: &std::path::Path) -> ExitCode {
    match audit::verify_file(file) {
        Ok(report) => {
            println!("{report}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("acs-proxy: {}: {err}", file.display());
            ExitCode::FAILURE
        }
    }
}

fn repair(file: &std::path::Path) -> ExitCode {
    match audit::repair_torn_tail(file) {
        Ok(Some(removed)) => {
            println!("removed a torn final line ({removed} bytes)");
            ExitCode::SUCCESS
        }
        Ok(None) => {
            println!("nothing to repair");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("acs-proxy: {}: {err}", file.display());
            ExitCode::FAILURE
        }
    }
}

/// `config check`: validates FILE and lists its paths as resolved.
fn check(file: &std::path::Path) -> ExitCode {
    match Config::load(file) {
        Ok(config) => {
            let policy = match &config.rego {
                Some(rego) => format!(
                    "Rego policy: {} module(s), query {}",
                    rego.files().len(),
                    rego.query()
                ),
                None => format!("{} policy rule(s)", config.policy.rule_count()),
            };
            println!(
                "{}: ok ({} upstream(s), {policy})",
                file.display(),
                config.upstreams.len(),
            );
            // Resolved, so a path that reads differently from where the
            // agent starts the proxy is visible before it fails a run.
            for setting in config.path_settings() {
                println!("  {setting}");
            }
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("acs-proxy: {err}");
            ExitCode::from(2)
        }
    }
}

/// `policy test DIR`: one PASS / FAIL line per test, then the totals;
/// exits 1 when any failed.
fn policy_test(dir: &std::path::Path) -> ExitCode {
    match policy_tool::test_directory(dir) {
        Ok(report) => {
            for line in &report.lines {
                println!("{line}");
            }
            println!("{} passed, {} failed", report.passed(), report.failed());
            if report.failed() == 0 && report.passed() > 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(err) => {
            eprintln!("acs-proxy: {err}");
            ExitCode::from(2)
        }
    }
}

/// `policy eval --config F HOOK`: the decision as JSON and what decided
/// it; exits 1 when the policy could not decide.
fn policy_eval(config: &std::path::Path, hook: &std::path::Path) -> ExitCode {
    let explained = match policy_tool::eval(config, hook) {
        Ok(explained) => explained,
        Err(err) => {
            eprintln!("acs-proxy: {err}");
            return ExitCode::from(2);
        }
    };
    match &explained.result {
        Ok(decision) => {
            match serde_json::to_string_pretty(decision) {
                Ok(json) => println!("{json}"),
                Err(err) => eprintln!("acs-proxy: {err}"),
            }
            println!("decided by: {}", explained.decided_by);
            ExitCode::SUCCESS
        }
        Err(err) => {
            println!("decision failure: {err}");
            println!(
                "decided by: {} (the failure posture applies)",
                explained.decided_by
            );
            ExitCode::FAILURE
        }
    }
}
