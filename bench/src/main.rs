//! `acs-proxy-bench`: end-to-end load against MCP servers, directly, through
//! `acs-proxy` and through the stdio→HTTP bridges users pick today.
//!
//! Five suites, each interleaving its scenarios round by round and
//! reporting medians over rounds:
//!
//! - `stdio`: the load generator spawns the server (direct) or the proxy
//!   (proxied) and speaks MCP over its stdin/stdout;
//! - `http`: Streamable HTTP → stdio server, through acs-proxy (full
//!   governance), `supergateway` and `mcp-proxy`;
//! - `guardian`: stdio → stdio with the embedded Guardian and a remote ACS
//!   Guardian over HTTP and over stdio, its own service time measured on
//!   its side, beside the bare relay asking the same Guardian (the floor of
//!   its figure);
//! - `scale`: thousands of idle HTTP sessions held at once, then hundreds
//!   active;
//! - `aggregate`: stdio → the demo server as a plain route and as one of
//!   three upstreams of a virtual server (`[[aggregate]]`).
//! - `reload` (not in the default set): 1,000 calls/s with and without
//!   policy reloads, the latency each call sees;
//! - `ws` (not in the default set): MCP over WebSocket → stdio server
//!   through acs-proxy, the one gateway here that serves it.
//!
//! ```text
//! cargo build --release --workspace
//! cargo run --release -p acs-proxy-bench -- --rounds 3 --out target/bench-e2e.md
//! ```

mod client;
mod client_floor;
mod context;
mod echo_http;
mod exchange_floor;
mod gateway;
mod http_client;
mod procfs;
mod report;
mod run_log;
mod service;
mod setup;
mod stats;
mod suite_aggregate;
mod suite_guardian;
mod suite_http;
mod suite_reload;
mod suite_scale;
mod suite_stdio;
mod suite_ws;
mod timed_guardian;

use std::net::SocketAddr;
use std::path::PathBuf;

use base64::Engine as _;
use clap::{Parser, Subcommand};

use context::{BenchArgs, Context};

/// End-to-end MCP benchmark: direct, through acs-proxy, through other gateways.
#[derive(Parser, Debug)]
#[command(name = "acs-proxy-bench", version)]
struct Args {
    #[command(subcommand)]
    helper: Option<Helper>,
    #[command(flatten)]
    bench: BenchArgs,
}

/// Servers the suites start as separate processes.
#[derive(Subcommand, Debug)]
enum Helper {
    /// A stateless MCP echo server over Streamable HTTP (the scale suite's upstream).
    ServeEchoHttp {
        #[arg(long, default_value = "127.0.0.1:0")]
        addr: SocketAddr,
        /// Where to write the bound address once listening.
        #[arg(long)]
        addr_file: PathBuf,
    },
    /// The test Guardian over HTTP or stdio, timing its own service of each request.
    ServeGuardian {
        #[arg(long, default_value = "127.0.0.1:0")]
        addr: SocketAddr,
        #[arg(long)]
        addr_file: PathBuf,
        /// The shared secret, standard base64.
        #[arg(long)]
        secret_b64: String,
        /// Serve ACS on stdin/stdout (the listener then serves `/stats` only).
        #[arg(long)]
        stdio: bool,
        /// Decide nothing: answer every request at once with a prepared
        /// reply of about this many bytes (the exchange floor's peer).
        #[arg(long)]
        echo_reply_bytes: Option<usize>,
        /// Decide every request twice, on a second Guardian with its own
        /// state, and answer with the first's reply.
        #[arg(long, conflicts_with = "echo_reply_bytes")]
        decide_twice: bool,
    },
    /// Times sequential exchanges through acs-proxy's Guardian transports
    /// with an echoing Guardian; prints what it measured as JSON.
    ExchangeFloor {
        /// An echoing Guardian at this `http://` URL.
        #[arg(long, conflicts_with = "command")]
        url: Option<String>,
        /// Where the stdio Guardian writes its `/stats` address.
        #[arg(long, requires = "command")]
        stats_addr_file: Option<PathBuf>,
        #[arg(long, default_value_t = 500)]
        warmup: usize,
        #[arg(long, default_value_t = 3000)]
        exchanges: usize,
        #[arg(long, default_value_t = 2000)]
        request_bytes: usize,
        /// The echoing Guardian to spawn over stdio, after `--`.
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// Times sequential calls' decisions through acs-proxy's own remote
    /// Guardian client, built from a proxy configuration; prints what it
    /// measured as JSON.
    ClientFloor {
        /// The proxy configuration whose `[guardian]` to use.
        #[arg(long)]
        config: PathBuf,
        /// The Guardian serves `/stats` here.
        #[arg(long)]
        stats_addr: Option<SocketAddr>,
        /// The Guardian writes its `/stats` address to this file.
        #[arg(long)]
        stats_addr_file: Option<PathBuf>,
        #[arg(long, default_value_t = 500)]
        warmup: usize,
        #[arg(long, default_value_t = 3000)]
        calls: usize,
        /// The size of the `tools/call` request the hooks are about.
        #[arg(long, default_value_t = 200)]
        request_bytes: usize,
    },
}

fn main() {
    let args = Args::parse();
    let outcome = match args.helper {
        Some(Helper::ServeEchoHttp { addr, addr_file }) => {
            echo_http::serve(addr, &addr_file).map(|()| None)
        }
        Some(Helper::ServeGuardian {
            addr,
            addr_file,
            secret_b64,
            stdio,
            echo_reply_bytes,
            decide_twice,
        }) => {
            let answering = match (echo_reply_bytes, decide_twice) {
                (Some(bytes), _) => {
                    timed_guardian::Answering::Echo(exchange_floor::reply_body(bytes))
                }
                (None, false) => timed_guardian::Answering::Decide,
                (None, true) => timed_guardian::Answering::DecideTwice,
            };
            base64::engine::general_purpose::STANDARD
                .decode(secret_b64.trim())
                .map_err(|e| format!("--secret-b64: {e}"))
                .and_then(|secret| {
                    timed_guardian::serve(addr, &addr_file, secret, stdio, answering)
                })
                .map(|()| None)
        }
        Some(Helper::ExchangeFloor {
            url,
            stats_addr_file,
            warmup,
            exchanges,
            request_bytes,
            command,
        }) => floor_client(url, stats_addr_file, command)
            .and_then(|peer| {
                let load = exchange_floor::Load {
                    warmup,
                    exchanges,
                    request_bytes,
                    reply_bytes: 0,
                };
                exchange_floor::run_client(peer, &load)
            })
            .and_then(|floor| serde_json::to_string(&floor).map_err(|e| e.to_string()))
            .map(|json| {
                println!("{json}");
                None
            }),
        Some(Helper::ClientFloor {
            config,
            stats_addr,
            stats_addr_file,
            warmup,
            calls,
            request_bytes,
        }) => client_floor::stats_at(stats_addr, stats_addr_file)
            .and_then(|stats| {
                let load = client_floor::Load {
                    warmup,
                    calls,
                    request_bytes,
                };
                client_floor::run_client(&config, stats, &load)
            })
            .and_then(|floor| serde_json::to_string(&floor).map_err(|e| e.to_string()))
            .map(|json| {
                println!("{json}");
                None
            }),
        None => run(&args.bench).map(Some),
    };
    match outcome {
        Ok(Some(markdown)) => {
            println!("{markdown}");
            if let Some(out) = &args.bench.out {
                if let Err(err) = std::fs::write(out, &markdown) {
                    eprintln!("acs-proxy-bench: cannot write {}: {err}", out.display());
                    std::process::exit(1);
                }
                eprintln!("acs-proxy-bench: report written to {}", out.display());
            }
        }
        Ok(None) => {}
        Err(err) => {
            eprintln!("acs-proxy-bench: {err}");
            std::process::exit(1);
        }
    }
}

/// The peer `exchange-floor` was pointed at.
fn floor_client(
    url: Option<String>,
    stats_addr_file: Option<PathBuf>,
    command: Vec<String>,
) -> Result<exchange_floor::Peer, String> {
    match (url, stats_addr_file) {
        (Some(url), _) => Ok(exchange_floor::Peer::Http(url)),
        (None, Some(file)) if !command.is_empty() => Ok(exchange_floor::Peer::Stdio(command, file)),
        _ => Err("exchange-floor: give --url, or --stats-addr-file and a command after --".into()),
    }
}

/// Runs the chosen suites and joins their reports.
fn run(args: &BenchArgs) -> Result<String, String> {
    let context = Context::new(args)?;
    let mut markdown = context.header();
    for suite in &args.suites {
        let load_before = procfs::load_average();
        let outcome = match suite.as_str() {
            "stdio" => suite_stdio::run(args, &context),
            "http" => suite_http::run(args, &context),
            "guardian" => suite_guardian::run(args, &context),
            "scale" => suite_scale::run(args, &context),
            "ws" => suite_ws::run(args, &context),
            "aggregate" => suite_aggregate::run(args, &context),
            "reload" => suite_reload::run(args, &context),
            other => {
                return Err(format!(
                    "unknown suite {other:?} (stdio, http, guardian, scale, aggregate, reload, ws)"
                ))
            }
        };
        // A failed suite is reported, and the suites after it still run.
        let section = outcome.unwrap_or_else(|err| {
            eprintln!("acs-proxy-bench: {suite} suite failed: {err}");
            format!("\n## {suite} suite\n\n**failed**: {err}\n")
        });
        eprint!("{section}");
        markdown.push_str(&section);
        markdown.push_str(&format!(
            "\n- load average (1/5/15 min) before the suite: {load_before}; after: {}\n",
            procfs::load_average()
        ));
    }
    Ok(markdown)
}
