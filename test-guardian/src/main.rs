//! `acs-test-guardian`: a scriptable ACS v0.1.0 Guardian test double.
//! See README.md for the command line, the script format and the record file.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use acs_test_guardian::closing::Closing;
use acs_test_guardian::guardian::{Config, Guardian, Transport};
use acs_test_guardian::record::Recorder;
use acs_test_guardian::script::Script;
use acs_test_guardian::{http, log, stdio};
use anyhow::{bail, Context as _};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use clap::{ArgGroup, Parser};

/// A scriptable ACS v0.1.0 Guardian for integration tests.
#[derive(Debug, Parser)]
#[command(name = "acs-test-guardian", version)]
#[command(group(ArgGroup::new("transport").required(true).args(["http", "stdio"])))]
#[command(group(ArgGroup::new("secret").required(true).args(["secret_file", "secret_b64"])))]
struct Cli {
    /// Serve HTTP on this address (e.g. 127.0.0.1:0); every POST is one request.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,

    /// With --http: write the bound address (HOST:PORT) to FILE once listening.
    #[arg(long, value_name = "FILE", requires = "http")]
    addr_file: Option<PathBuf>,

    /// With --http: close every connection right after its first answer,
    /// without `Connection: close` (as an HTTP/1.0-style server does).
    #[arg(long, requires = "http", conflicts_with = "keep_alive_ms")]
    close_after_answer: bool,

    /// With --close-after-answer: close MS milliseconds after the answer,
    /// reading nothing meanwhile (a request sent then is lost, as when the
    /// close takes that long to cross the network).
    #[arg(long, value_name = "MS", requires = "close_after_answer")]
    close_delay_ms: Option<u64>,

    /// With --http: close a connection once it has waited MS milliseconds
    /// for its next request, without notice.
    #[arg(long, value_name = "MS", requires = "http")]
    keep_alive_ms: Option<u64>,

    /// Serve Content-Length-framed requests on stdin/stdout.
    #[arg(long)]
    stdio: bool,

    /// The shared secret: the raw bytes of FILE, trailing whitespace stripped.
    #[arg(long, value_name = "FILE")]
    secret_file: Option<PathBuf>,

    /// The shared secret, as standard base64.
    #[arg(long, value_name = "B64")]
    secret_b64: Option<String>,

    /// The decision script (JSON); without it every request is allowed.
    #[arg(long, value_name = "FILE")]
    script: Option<PathBuf>,

    /// Append one JSON line per request received to FILE.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,

    /// key_id for replies when neither the request nor its session named one.
    #[arg(long, value_name = "ID", default_value = "default")]
    key_id: String,

    /// Log one line per request to stderr.
    #[arg(long)]
    verbose: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            log(&format!("error: {err:#}"));
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let secret = read_secret(&cli)?;
    let script = match &cli.script {
        Some(path) => Script::load(path)?,
        None => Script::default(),
    };
    let recorder = cli.record.as_deref().map(Recorder::open).transpose()?;
    let transport = if cli.stdio {
        Transport::Stdio
    } else {
        Transport::Http
    };
    let guardian = Arc::new(Guardian::new(Config {
        secret,
        script,
        transport,
        default_key_id: cli.key_id.clone(),
        recorder,
        verbose: cli.verbose,
    }));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let closing = match (cli.close_after_answer, cli.keep_alive_ms) {
        (true, _) => Some(Closing::AfterAnswer(Duration::from_millis(
            cli.close_delay_ms.unwrap_or(0),
        ))),
        (false, Some(ms)) => Some(Closing::Idle(Duration::from_millis(ms))),
        (false, None) => None,
    };
    runtime.block_on(async move {
        match cli.http {
            Some(addr) => http::serve(guardian, addr, cli.addr_file, closing).await,
            None => stdio::serve(guardian).await,
        }
    })
}

/// The secret from --secret-file (trailing whitespace stripped) or --secret-b64.
fn read_secret(cli: &Cli) -> anyhow::Result<Vec<u8>> {
    let secret = match (&cli.secret_file, &cli.secret_b64) {
        (Some(path), _) => {
            let mut bytes = std::fs::read(path)
                .with_context(|| format!("reading secret {}", path.display()))?;
            while bytes.last().is_some_and(u8::is_ascii_whitespace) {
                bytes.pop();
            }
            bytes
        }
        (None, Some(b64)) => STANDARD
            .decode(b64.trim())
            .context("--secret-b64 is not base64")?,
        (None, None) => bail!("one of --secret-file or --secret-b64 is required"),
    };
    if secret.is_empty() {
        bail!("the secret is empty");
    }
    Ok(secret)
}
