//! The ws suite: the load generator speaks MCP over a WebSocket (subprotocol
//! `mcp`, one JSON-RPC message per text frame) to acs-proxy, which spawns the
//! stdio server, with the stdio suite's governance. One session on one
//! socket: sequential calls, then calls pipelined with a fixed number in
//! flight.
//!
//! Neither the bare relay nor the bridges serve WebSocket, so the figures are
//! absolute: what a build of the gateway costs on this transport, for
//! setting builds against each other (`--proxy`), not against a floor.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use futures_util::{SinkExt as _, StreamExt as _};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::client::PhaseRun;
use crate::context::{absolute, BenchArgs, Context};
use crate::http_client::{answer_of, EchoCall, PROTOCOL_VERSION};
use crate::procfs::Tree;
use crate::report::{PhaseResult, RunResult};
use crate::service;
use crate::setup::{Decider, Listen, ProxySetup, Server, Upstream};
use crate::stats::{median, range};
use crate::suite_http::{governance_parameters, load_parameters, phases, start_gateway, Phase};
use crate::suite_stdio::{count_lines, verify_audit};

/// The client's end of the gateway's WebSocket.
type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How long the client waits for any one message before giving up.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs the suite and returns its report section.
pub fn run(args: &BenchArgs, context: &Context) -> Result<String, String> {
    if matches!(args.embedded()?, Decider::Rego) {
        return Err("the ws suite measures the TOML rules (--policy rules)".into());
    }
    let phases = phases(args);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    let mut runs: Vec<Vec<RunResult>> = vec![Vec::new(); context.servers.len()];
    for round in 0..args.rounds {
        for (s, server) in context.servers.iter().enumerate() {
            let result = run_one(args, context, &runtime, server, round, &phases)?;
            eprintln!(
                "round {}/{} ws {:<10} {}",
                round + 1,
                args.rounds,
                server.key,
                result.summary()
            );
            runs[s].push(result);
        }
    }
    Ok(markdown(args, context, &phases, &runs))
}

/// acs-proxy in front of one server: start, connect, initialize, warm up,
/// the phases, stop.
fn run_one(
    args: &BenchArgs,
    context: &Context,
    runtime: &tokio::runtime::Runtime,
    server: &Server,
    round: usize,
    phases: &[Phase],
) -> Result<RunResult, String> {
    let tag = format!("ws-{}-r{round}", server.key);
    let addr = service::free_addr()?;
    let audit = context.work.join(format!("audit-{tag}.jsonl"));
    let _ = std::fs::remove_file(&audit);
    let config = context.work.join(format!("proxy-{tag}.toml"));
    let setup = ProxySetup {
        name: server.key.into(),
        listen: Listen::Ws {
            address: addr.to_string(),
        },
        upstream: Upstream::Command(server.command.clone()),
        decider: args.embedded()?,
        audit: audit.clone(),
    };
    std::fs::write(&config, setup.config()).map_err(|e| format!("{}: {e}", config.display()))?;
    let log = context.work.join(format!("stderr-{tag}.log"));
    let fail = |what: String| format!("{tag}: {what} (log in {})", log.display());
    let command = vec![
        absolute(&context.proxy),
        "--config".into(),
        absolute(&config),
    ];
    let process = start_gateway(context, "acs-proxy", command, addr, &log).map_err(&fail)?;
    let echo = EchoCall::new(server.argument, args.request_bytes);
    let url = format!("ws://{addr}/mcp");
    let mut socket = runtime
        .block_on(async {
            let mut socket = connect(&url).await?;
            initialize(&mut socket).await?;
            let warm = run_phase(&mut socket, &echo, args.warmup, 1, 1).await?;
            if warm.errors > 0 {
                return Err(format!("{} errors in the warm-up", warm.errors));
            }
            Ok::<_, String>(socket)
        })
        .map_err(&fail)?;
    // The stdio server exists once the session is initialized.
    let tree = Tree::of(process.pid());
    let mut next_id = 1 + args.warmup as u64;
    let mut results = Vec::new();
    for (_, in_flight, calls) in phases {
        let before = tree.cpu();
        let phase = runtime
            .block_on(run_phase(&mut socket, &echo, *calls, *in_flight, next_id))
            .map_err(&fail)?;
        let after = tree.cpu();
        next_id += *calls as u64;
        results.push(PhaseResult::new(phase, before, after));
    }
    let _ = runtime.block_on(socket.close(None));
    let (root_rss_kib, tree_rss_kib) = tree.peak_rss_kib();
    process.stop(Duration::from_secs(10));
    let entries = count_lines(&audit).map_err(|e| fail(format!("audit log: {e}")))?;
    if round == 0 {
        verify_audit(&context.proxy, &audit).map_err(&fail)?;
    }
    if !args.keep_audit {
        let _ = std::fs::remove_file(&audit);
    }
    Ok(RunResult {
        phases: results,
        root_rss_kib,
        tree_rss_kib,
        audit_entries: Some(entries),
        calls: args.warmup + phases.iter().map(|(_, _, calls)| calls).sum::<usize>(),
        guardian: Vec::new(),
    })
}

/// Opens the WebSocket, asking for the `mcp` subprotocol the gateway requires.
async fn connect(url: &str) -> Result<Socket, String> {
    let mut request = url
        .into_client_request()
        .map_err(|e| format!("{url}: {e}"))?;
    request
        .headers_mut()
        .insert("sec-websocket-protocol", HeaderValue::from_static("mcp"));
    let (socket, _) = tokio_tungstenite::connect_async(request)
        .await
        .map_err(|e| format!("WebSocket upgrade at {url}: {e}"))?;
    Ok(socket)
}

/// `initialize` (id 0) and `notifications/initialized`.
async fn initialize(socket: &mut Socket) -> Result<(), String> {
    let initialize = format!(
        r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{PROTOCOL_VERSION}","capabilities":{{}},"clientInfo":{{"name":"acs-proxy-bench","version":"0.1.0"}}}}}}"#
    );
    send(socket, initialize).await?;
    loop {
        let text = next_text(socket).await?;
        match answer_of(text.as_bytes()) {
            Some((0, true)) => break,
            Some((0, false)) => return Err(format!("initialize refused: {text}")),
            _ => continue,
        }
    }
    send(
        socket,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned(),
    )
    .await
}

/// `calls` echo calls with up to `in_flight` unanswered at once, ids from
/// `first_id`; every round trip is timed from its send to its answer.
async fn run_phase(
    socket: &mut Socket,
    echo: &EchoCall,
    calls: usize,
    in_flight: usize,
    first_id: u64,
) -> Result<PhaseRun, String> {
    let mut sent_at: HashMap<u64, Instant> = HashMap::with_capacity(in_flight);
    let mut latencies_ns = Vec::with_capacity(calls);
    let mut errors = 0;
    let mut sent = 0usize;
    let start = Instant::now();
    while latencies_ns.len() < calls {
        while sent < calls && sent_at.len() < in_flight {
            let id = first_id + sent as u64;
            let body = String::from_utf8_lossy(&echo.body(id)).into_owned();
            sent_at.insert(id, Instant::now());
            send(socket, body).await?;
            sent += 1;
        }
        let text = next_text(socket).await?;
        let Some((id, ok)) = answer_of(text.as_bytes()) else {
            continue;
        };
        let Some(at) = sent_at.remove(&id) else {
            continue;
        };
        latencies_ns.push(at.elapsed().as_nanos() as u64);
        if !ok {
            errors += 1;
        }
    }
    Ok(PhaseRun {
        latencies_ns,
        wall: start.elapsed(),
        errors,
    })
}

async fn send(socket: &mut Socket, text: String) -> Result<(), String> {
    socket
        .send(Message::text(text))
        .await
        .map_err(|e| format!("WebSocket send: {e}"))
}

/// The next text frame, skipping pings and pongs.
async fn next_text(socket: &mut Socket) -> Result<String, String> {
    loop {
        let next = tokio::time::timeout(ANSWER_TIMEOUT, socket.next())
            .await
            .map_err(|_| format!("no message within {ANSWER_TIMEOUT:?}"))?;
        match next {
            Some(Ok(Message::Text(text))) => return Ok(text.as_str().to_owned()),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            Some(Ok(other)) => return Err(format!("unexpected frame {other:?}")),
            Some(Err(e)) => return Err(format!("WebSocket: {e}")),
            None => return Err("the gateway closed the WebSocket".into()),
        }
    }
}

/// The suite's report: medians over rounds per server and phase.
fn markdown(
    args: &BenchArgs,
    context: &Context,
    phases: &[Phase],
    runs: &[Vec<RunResult>],
) -> String {
    let mut md = String::from("## ws suite: MCP over WebSocket → stdio server, acs-proxy\n\n");
    md.push_str(
        "| server | phase | p50 µs | p99 µs | mean µs | calls/s | CPU/call process µs | CPU/call tree µs | CPU/call process, min – max over rounds | errors |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---|---:|\n",
    );
    for (server, server_runs) in context.servers.iter().zip(runs) {
        for (p, (name, _, _)) in phases.iter().enumerate() {
            let of = |pick: fn(&PhaseResult) -> f64| -> Vec<f64> {
                server_runs.iter().map(|run| pick(&run.phases[p])).collect()
            };
            let cpu = of(|phase| phase.root_cpu_us);
            let (low, high) = range(cpu.iter().copied());
            let errors: usize = server_runs.iter().map(|run| run.phases[p].errors).sum();
            let _ = writeln!(
                md,
                "| {} | {name} | {:.1} | {:.1} | {:.1} | {:.0} | {:.1} | {:.1} | {low:.1} – {high:.1} | {errors} |",
                server.title,
                median(of(|phase| phase.p50_us)),
                median(of(|phase| phase.p99_us)),
                median(of(|phase| phase.mean_us)),
                median(of(|phase| phase.calls_per_s)),
                median(cpu.iter().copied()),
                median(of(|phase| phase.tree_cpu_us)),
            );
        }
    }
    let _ = writeln!(
        md,
        "\n- parameters: {}, one WebSocket (subprotocol `mcp`) for the one MCP session; {}{}",
        load_parameters(args),
        governance_parameters(args),
        context.pin.as_ref().map_or(String::new(), |cpus| format!(
            "; acs-proxy pinned with taskset -c {cpus}"
        )),
    );
    md
}
