//! `acs-proxy-bare-relay`: acs-proxy's own transports with nothing between
//! them, the floor the benchmark measures governance against.
//!
//! It reads the same configuration file as `acs-proxy` and serves the same
//! downstream (stdio, or the network listener with its session handling)
//! in front of the same upstream (spawned child or network client), all
//! through the library's transport code; but every frame is copied as it
//! is: no hooks, no Guardian, no audit, no metrics. What the full gateway
//! costs beyond this binary is what governance costs. It is a benchmark
//! tool, never shipped: a gateway that forwards unexamined traffic has no
//! place in the product's configuration.
//!
//! ```text
//! acs-proxy-bare-relay --config proxy.toml [--ask-guardian]
//! ```
//!
//! With `--ask-guardian` it is the floor of the remote-Guardian figures
//! instead: around every `tools/call` it relays it asks the remote Guardian
//! of the configuration's `[guardian]` what acs-proxy asks (the request's
//! two hooks as one batch before forwarding the request, the answer's two
//! before forwarding the answer), through acs-proxy's own remote Guardian
//! client, about a prepared call the size of the first one relayed (see
//! `acs_proxy_bench::guardian_call`). Relay and ACS client share one
//! process and its caches, as in the gateway; what the gateway costs beyond
//! this is its governance around the exchanges.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use acs_proxy::config::{Config, ListenTransport, UpstreamConfig};
use acs_proxy::guardian::remote::RemoteGuardian;
use acs_proxy::guardian::Guardian;
use acs_proxy::hooks::Metadata;
use acs_proxy::limits::LimitExceeded;
use acs_proxy::transport::connect::{connect_route, RouteClients};
use acs_proxy::transport::downstream::{Downstream, SessionHandle, SessionStarter};
use acs_proxy::transport::http::server::{Server, ServerSettings};
use acs_proxy::transport::stdio::StdioDownstream;
use acs_proxy::transport::upstream::Upstream;
use acs_proxy::transport::writer::FrameWriter;
use acs_proxy::transport::LineFrame;
use acs_proxy_bench::guardian_call::{self, Call, Half};
use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::{FutureExt, Stream, StreamExt};
use tokio_util::sync::CancellationToken;

fn main() -> ExitCode {
    let Some(path) = config_path() else {
        eprintln!("usage: acs-proxy-bare-relay --config FILE [--ask-guardian]");
        return ExitCode::from(2);
    };
    let ask_guardian = std::env::args().any(|arg| arg == "--ask-guardian");
    let config = match Config::load(&path) {
        Ok(config) => Arc::new(config),
        Err(err) => {
            eprintln!("acs-proxy-bare-relay: {err}");
            return ExitCode::from(2);
        }
    };
    // The same runtime choice as the gateway, so the floor is comparable.
    let mut builder = if config.listen.transport == ListenTransport::Stdio {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("acs-proxy-bare-relay: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(serve(config, ask_guardian));
    runtime.shutdown_background();
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("acs-proxy-bare-relay: {err}");
            ExitCode::FAILURE
        }
    }
}

/// `--config FILE` (or `--config=FILE`); other flags the gateway takes,
/// such as `--audit`, are accepted and ignored so one command line fits both.
fn config_path() -> Option<PathBuf> {
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--config" {
            return args.next().map(PathBuf::from);
        }
        if let Some(path) = arg.strip_prefix("--config=") {
            return Some(PathBuf::from(path));
        }
    }
    None
}

async fn serve(config: Arc<Config>, ask_guardian: bool) -> Result<(), String> {
    let asker = if ask_guardian {
        Some(Arc::new(Asker::new(&config).await?))
    } else {
        None
    };
    let relay = Arc::new(BareRelay::new(config.clone(), asker)?);
    if config.listen.transport == ListenTransport::Stdio {
        let stdio = StdioDownstream::open(relay.max_message_bytes, relay.queue);
        let downstream = Downstream {
            frames: stdio.reader.boxed(),
            writer: stdio.writer,
            transport: "stdio",
            upstream_headers: Vec::new(),
            identity: None,
            client_address: None,
        };
        let upstream = relay.connect().await?;
        relay_session(downstream, upstream, relay.asker.clone()).await;
        // Everything the server answered is on its way to the agent.
        let _ = stdio.writer_task.await;
        return Ok(());
    }
    let server = Server::bind(ServerSettings::from_config(&config), relay, None).await?;
    eprintln!(
        "acs-proxy-bare-relay: listening on {}://{} ({})",
        server.scheme(),
        server.local_addr(),
        server.endpoints().join(", ")
    );
    let stop = CancellationToken::new();
    tokio::spawn(stop_on_signal(stop.clone()));
    server.run(stop, CancellationToken::new()).await;
    Ok(())
}

/// The one upstream of the configuration, connected per session.
struct BareRelay {
    upstream: UpstreamConfig,
    routes: RouteClients,
    max_message_bytes: usize,
    queue: usize,
    asker: Option<Arc<Asker>>,
}

impl BareRelay {
    fn new(config: Arc<Config>, asker: Option<Arc<Asker>>) -> Result<Self, String> {
        let upstream = config
            .upstreams
            .first()
            .cloned()
            .ok_or("the configuration has no [[upstream]]")?;
        Ok(Self {
            upstream,
            routes: RouteClients::default(),
            max_message_bytes: config.limits.max_message_bytes,
            queue: config.limits.max_in_flight,
            asker,
        })
    }

    async fn connect(&self) -> Result<Upstream, String> {
        connect_route(
            &self.upstream,
            &self.routes,
            self.max_message_bytes,
            self.queue,
        )
        .await
        .map_err(|err| err.to_string())
    }
}

impl SessionStarter for BareRelay {
    fn start<'a>(
        &'a self,
        _route: &'a str,
        downstream: Downstream,
    ) -> BoxFuture<'a, Result<SessionHandle, String>> {
        async move {
            let upstream = self.connect().await?;
            let done = tokio::spawn(relay_session(downstream, upstream, self.asker.clone()));
            Ok(SessionHandle { done })
        }
        .boxed()
    }

    fn refused<'a>(
        &'a self,
        _route: &'a str,
        _transport: &'static str,
        _limit: &'a LimitExceeded,
    ) -> BoxFuture<'a, ()> {
        async {}.boxed()
    }
}

/// Asks the remote Guardian about every `tools/call` relayed, as the
/// gateway would, about a prepared call of the same size.
struct Asker {
    guardian: RemoteGuardian,
    metadata: Metadata,
    /// Prepared from the first `tools/call` relayed, at its size.
    call: OnceLock<Call>,
    /// `tools/call` requests forwarded and not yet answered: an answer
    /// is asked about only while one is, so `initialize`'s is not.
    calls_in_flight: AtomicUsize,
}

impl Asker {
    /// Builds the configuration's remote Guardian and shakes hands, as the
    /// gateway does before a session's first message.
    async fn new(config: &Config) -> Result<Self, String> {
        let guardian = acs_proxy::guardian::remote::from_config(config)
            .map_err(|e| format!("remote Guardian: {e}"))?;
        let metadata = guardian_call::metadata();
        guardian
            .hello(&metadata, Some(guardian_call::MCP_VERSION))
            .await
            .map_err(|e| format!("Guardian handshake: {e}"))?;
        Ok(Self {
            guardian,
            metadata,
            call: OnceLock::new(),
            calls_in_flight: AtomicUsize::new(0),
        })
    }

    /// Asks about `line` on its way to the server, if it is a `tools/call`.
    async fn on_request(&self, line: &Bytes) -> Result<(), String> {
        if !head_contains(line, br#""method":"tools/call""#) {
            return Ok(());
        }
        self.calls_in_flight.fetch_add(1, Ordering::Relaxed);
        if self.call.get().is_none() {
            let _ = self.call.set(Call::new(line.len())?);
        }
        self.ask(Half::Request).await
    }

    /// Asks about `line` on its way to the agent, if it answers a
    /// `tools/call` (an answer, not a request or notification of the
    /// server's, while calls are in flight).
    async fn on_answer(&self, line: &Bytes) -> Result<(), String> {
        if head_contains(line, br#""method""#) {
            return Ok(());
        }
        let counted =
            self.calls_in_flight
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        if counted.is_err() {
            return Ok(());
        }
        self.ask(Half::Answer).await
    }

    async fn ask(&self, half: Half) -> Result<(), String> {
        let call = self.call.get().ok_or("an answer before any tools/call")?;
        call.ask(half, &self.guardian, &self.metadata).await
    }
}

/// Whether `needle` occurs in the first bytes of `line`, where a compact
/// JSON-RPC line has its `method` (after `jsonrpc` and `id`).
fn head_contains(line: &[u8], needle: &[u8]) -> bool {
    let head = &line[..line.len().min(64)];
    head.windows(needle.len()).any(|w| w == needle)
}

/// Which way a copy goes, for what it asks the Guardian.
#[derive(Clone, Copy)]
enum Direction {
    ToServer,
    ToAgent,
}

/// Copies frames both ways until the agent leaves or the server ends, then
/// shuts the server down the way the gateway does.
async fn relay_session(downstream: Downstream, mut upstream: Upstream, asker: Option<Arc<Asker>>) {
    let to_server = copy(
        downstream.frames,
        upstream.writer.clone(),
        asker.clone().map(|a| (a, Direction::ToServer)),
    );
    let to_agent = copy(
        upstream.frames,
        downstream.writer.clone(),
        asker.map(|a| (a, Direction::ToAgent)),
    );
    tokio::pin!(to_agent);
    tokio::select! {
        () = to_server => {
            upstream.writer.close();
            // Answers still on their way are delivered before the server goes.
            let _ = tokio::time::timeout(Duration::from_secs(5), &mut to_agent).await;
        }
        () = &mut to_agent => {}
    }
    upstream.writer.close();
    if let Some(task) = upstream.writer_task.take() {
        let _ = task.await;
    }
    upstream.control.shutdown().await;
    downstream.writer.close();
}

/// Copies `frames` to `writer`; with an asker, asks the Guardian about each
/// frame first, and stops (ending the session, so a benchmark run fails
/// loudly) when the Guardian fails.
async fn copy(
    mut frames: impl Stream<Item = std::io::Result<LineFrame>> + Unpin,
    writer: FrameWriter,
    asker: Option<(Arc<Asker>, Direction)>,
) {
    while let Some(Ok(frame)) = frames.next().await {
        let Some(line) = frame.into_bytes() else {
            continue;
        };
        if let Some((asker, direction)) = &asker {
            let asked = match direction {
                Direction::ToServer => asker.on_request(&line).await,
                Direction::ToAgent => asker.on_answer(&line).await,
            };
            if let Err(err) = asked {
                eprintln!("acs-proxy-bare-relay: {err}");
                return;
            }
        }
        if writer.send(line).await.is_err() {
            return;
        }
    }
}

async fn stop_on_signal(stop: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    stop.cancel();
}
