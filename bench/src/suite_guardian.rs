//! The guardian suite: stdio → demo server, directly, through acs-proxy with
//! the embedded Guardian, and through acs-proxy asking a remote ACS
//! Guardian over HTTP and over stdio (the workspace's test Guardian,
//! allow-everything, batches on, served by `acs-proxy-bench serve-guardian`,
//! which times its own service of every request; over stdio acs-proxy
//! spawns it). The four alternate, the order rotating every round.
//!
//! The Guardian's service time per call (the sum of its per-request times
//! over the phase, divided by calls) is subtracted from the latency the
//! remote proxy adds over direct, which leaves what acs-proxy itself adds
//! around the Guardian: signing, verifying, the HTTP exchange, enforcement,
//! audit.
//!
//! Two more paths run the sequential phase only: `acs-proxy-bare-relay
//! --ask-guardian` with each remote Guardian, the relay asking the Guardian
//! about every call through acs-proxy's own ACS client in the same process,
//! with nothing else of governance (no policy, hooks of the live message,
//! audit). Measured like the gateway, it is the floor of the targets'
//! figure with the relay, the ACS client and the Guardian on one core
//! together; what acs-proxy adds beyond it is its governance around the
//! exchanges.
//!
//! After the rounds, two floors are measured under the targets' figure:
//! [`crate::exchange_floor`], the exchanges alone (acs-proxy's transports,
//! an echoing Guardian, the bodies' sizes from the sequential phase), and
//! [`crate::client_floor`], acs-proxy's ACS client alone (the remote runs'
//! own configurations, a call's two batches signed, verified and read
//! against the deciding Guardian, with no relay, policy or audit around
//! them).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use base64::Engine as _;

use crate::client_floor::{self, ClientFloor};
use crate::context::{BenchArgs, Context};
use crate::exchange_floor::{self, Floor, Load};
use crate::report::RunResult;
use crate::service::Service;
use crate::setup::Decider;
use crate::stats::median;
use crate::suite_stdio::{run_one, Front};
use crate::timed_guardian::{ServiceTimes, StatsAt};

/// What acs-proxy may add beyond the Guardian's service time, at p50.
const TARGET_BEYOND_GUARDIAN_HTTP_US: f64 = 100.0;
const TARGET_BEYOND_GUARDIAN_STDIO_US: f64 = 60.0;

/// The shared secret of the benchmark Guardian (32 bytes; not a real key).
const SECRET: &[u8; 32] = b"acs-proxy-bench shared secret 32";

/// The paths, in report order.
const PATHS: [&str; 6] = [
    "direct",
    "embedded Guardian",
    "remote Guardian (HTTP)",
    "remote Guardian (stdio)",
    "bare relay + remote Guardian (HTTP)",
    "bare relay + remote Guardian (stdio)",
];
const REMOTE_HTTP: usize = 2;
const REMOTE_STDIO: usize = 3;
const RELAY_HTTP: usize = 4;
const RELAY_STDIO: usize = 5;

/// Every path's runs, round by round.
type Runs = [Vec<RunResult>; PATHS.len()];

/// Runs the suite and returns its report section.
pub fn run(args: &BenchArgs, context: &Context) -> Result<String, String> {
    let server = context
        .servers
        .iter()
        .find(|s| s.key == "demo")
        .ok_or("the guardian suite needs the demo server (--servers demo)")?;
    let secret_file = context.work.join("guardian-secret");
    std::fs::write(&secret_file, SECRET).map_err(|e| format!("{}: {e}", secret_file.display()))?;
    let (_guardian, addr) = start_guardian(args, context)?;
    let url = format!("http://{addr}/acs");
    let mut phases = vec![("sequential".to_owned(), 1usize, args.sequential)];
    for &n in &args.in_flight {
        phases.push((format!("{n} in flight"), n, args.pipelined));
    }
    let stdio_addr_file = context.work.join("guardian-stdio-addr");
    let mut stdio_guardian = vec![
        crate::context::absolute(&context.bench),
        "serve-guardian".into(),
        "--stdio".into(),
        "--addr-file".into(),
        crate::context::absolute(&stdio_addr_file),
        "--secret-b64".into(),
        base64::engine::general_purpose::STANDARD.encode(SECRET),
    ];
    stdio_guardian.extend(twice(args));
    let stdio_guardian = context.pinned(stdio_guardian);
    let mut runs: Runs = Default::default();
    for round in 0..args.rounds {
        for turn in 0..PATHS.len() {
            let path = (turn + round) % PATHS.len();
            let http = || Decider::Remote {
                url: url.clone(),
                secret_file: secret_file.clone(),
            };
            let stdio = || Decider::RemoteStdio {
                command: stdio_guardian.clone(),
                secret_file: secret_file.clone(),
            };
            let front = match path {
                0 => Front::Nothing,
                1 => Front::Proxy(Decider::Embedded { rules: args.rules }),
                REMOTE_HTTP => Front::Proxy(http()),
                REMOTE_STDIO => Front::Proxy(stdio()),
                RELAY_HTTP => Front::GuardianRelay(http()),
                _ => Front::GuardianRelay(stdio()),
            };
            let tag = tag(path, round);
            let guardian = match path {
                REMOTE_HTTP | RELAY_HTTP => Some(StatsAt::Addr(addr)),
                REMOTE_STDIO | RELAY_STDIO => {
                    let _ = std::fs::remove_file(&stdio_addr_file);
                    Some(StatsAt::File(stdio_addr_file.clone()))
                }
                _ => None,
            };
            // The relay asks about one call at a time: its floor is the
            // sequential one.
            let phases = if path >= RELAY_HTTP {
                &phases[..1]
            } else {
                &phases[..]
            };
            let result = run_one(
                args,
                context,
                server,
                front,
                &tag,
                round == 0,
                phases,
                guardian,
            )?;
            eprintln!(
                "round {}/{} guardian {:<18} {}",
                round + 1,
                args.rounds,
                PATHS[path],
                result.summary()
            );
            runs[path].push(result);
        }
    }
    let floors = measure_floors(args, context, &runs, addr, &stdio_addr_file)?;
    Ok(markdown(args, &phases, &runs, floors.as_ref()))
}

/// The name of a run's files: `path` in `round`.
fn tag(path: usize, round: usize) -> String {
    format!(
        "guardian-{}-r{round}",
        [
            "direct",
            "embedded",
            "remote",
            "remote-stdio",
            "relay-remote",
            "relay-remote-stdio"
        ][path]
    )
}

/// What lies under the remote-Guardian figures, per transport (`[HTTP,
/// stdio]`).
struct Floors {
    /// Two processes exchanging bodies through acs-proxy's transports.
    exchange: [Floor; 2],
    /// acs-proxy's ACS client alone, deciding against the timed Guardian.
    client: [ClientFloor; 2],
}

/// The exchange floor of each remote transport, with the body sizes of its
/// sequential phase, and the ACS client floor with the remote runs' own
/// configurations; `None` when the Guardian counted no bodies.
fn measure_floors(
    args: &BenchArgs,
    context: &Context,
    runs: &Runs,
    http_guardian: SocketAddr,
    stdio_stats_file: &std::path::Path,
) -> Result<Option<Floors>, String> {
    let load = |path: usize| {
        let sizes: Vec<(usize, usize)> = runs[path]
            .iter()
            .filter_map(|r| r.guardian.first().and_then(ServiceTimes::mean_bodies))
            .collect();
        let (request_bytes, reply_bytes) = *sizes.get(sizes.len() / 2)?;
        Some(Load {
            warmup: args.warmup,
            exchanges: args.sequential,
            request_bytes,
            reply_bytes,
        })
    };
    let (Some(http), Some(stdio)) = (load(REMOTE_HTTP), load(REMOTE_STDIO)) else {
        return Ok(None);
    };
    let secret = base64::engine::general_purpose::STANDARD.encode(SECRET);
    let exchange = exchange_floor::measure(context, [&http, &stdio], &secret)?;
    for (transport, floor) in ["HTTP", "stdio"].iter().zip(&exchange) {
        eprintln!(
            "guardian exchange floor over {transport}: p50 {:.1} µs, client CPU {:.1} µs, Guardian CPU {:.1} µs per exchange",
            floor.p50_us, floor.client_cpu_us, floor.guardian_cpu_us
        );
    }
    let config = |path: usize| context.work.join(format!("proxy-{}.toml", tag(path, 0)));
    let load = client_floor::Load {
        warmup: args.warmup,
        calls: args.sequential,
        request_bytes: args.request_bytes,
    };
    let client = client_floor::measure(
        context,
        &load,
        [&config(REMOTE_HTTP), &config(REMOTE_STDIO)],
        http_guardian,
        stdio_stats_file,
    )?;
    for (transport, floor) in ["HTTP", "stdio"].iter().zip(&client) {
        eprintln!(
            "guardian ACS client floor over {transport}: {:.1} µs per call beyond the Guardian's service, client CPU {:.1} µs per call",
            floor.beyond_service_us, floor.client_cpu_us
        );
    }
    Ok(Some(Floors { exchange, client }))
}

/// Starts the timed Guardian and waits for its address.
fn start_guardian(args: &BenchArgs, context: &Context) -> Result<(Service, SocketAddr), String> {
    let addr_file = context.work.join("guardian-addr");
    let _ = std::fs::remove_file(&addr_file);
    let secret = base64::engine::general_purpose::STANDARD.encode(SECRET);
    let mut command = vec![
        crate::context::absolute(&context.bench),
        "serve-guardian".into(),
        "--addr-file".into(),
        crate::context::absolute(&addr_file),
        "--secret-b64".into(),
        secret,
    ];
    command.extend(twice(args));
    let command = context.pinned(command);
    let service = Service::spawn(
        "timed Guardian",
        &command,
        &[],
        &context.work.join("stderr-guardian.log"),
    )?;
    let addr = wait_for_addr_file(&addr_file, Duration::from_secs(30))?;
    Ok((service, addr))
}

/// The deciding Guardians' extra argument under `--guardian-twice`.
fn twice(args: &BenchArgs) -> Option<String> {
    args.guardian_twice.then(|| "--decide-twice".to_owned())
}

/// Reads `HOST:PORT` from `path` once a helper has written it.
pub fn wait_for_addr_file(path: &std::path::Path, timeout: Duration) -> Result<SocketAddr, String> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if let Ok(addr) = text.trim().parse() {
                return Ok(addr);
            }
        }
        if Instant::now() > deadline {
            return Err(format!("{} not written after {timeout:?}", path.display()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn markdown(
    args: &BenchArgs,
    phases: &[(String, usize, usize)],
    runs: &Runs,
    floors: Option<&Floors>,
) -> String {
    let mut md =
        String::from("\n## guardian suite: stdio → demo server, embedded vs remote Guardian\n\n");
    let _ = writeln!(
        md,
        "| phase | path | p50 µs | p99 µs | calls/s | CPU/call proxy µs | Guardian POSTs/call | Guardian service/call µs | Guardian process CPU/call µs | Guardian p50 per POST µs |"
    );
    let _ = writeln!(md, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (p, (phase, _, calls)) in phases.iter().enumerate() {
        for (path, title) in PATHS.iter().enumerate() {
            if runs[path].iter().any(|r| r.phases.len() <= p) {
                continue;
            }
            let med = |metric: fn(&crate::report::PhaseResult) -> f64| {
                median(runs[path].iter().map(|r| metric(&r.phases[p])))
            };
            let (posts, service, process, post_p50) = if path >= REMOTE_HTTP {
                (
                    format!(
                        "{:.2}",
                        guardian_median(&runs[path], p, |t, _| t.requests as f64 / *calls as f64)
                    ),
                    format!(
                        "{:.1}",
                        guardian_median(&runs[path], p, |t, _| per_call_us(t.total_ns, *calls))
                    ),
                    format!(
                        "{:.1}",
                        guardian_median(&runs[path], p, |t, _| per_call_us(
                            t.process_cpu_ns,
                            *calls
                        ))
                    ),
                    format!(
                        "{:.1}",
                        guardian_median(&runs[path], p, |t, _| t.p50_ns as f64 / 1000.0)
                    ),
                )
            } else {
                ("–".into(), "–".into(), "–".into(), "–".into())
            };
            let _ = writeln!(
                md,
                "| {phase} | {title} | {:.1} | {:.1} | {:.0} | {} | {posts} | {service} | {process} | {post_p50} |",
                med(|r| r.p50_us),
                med(|r| r.p99_us),
                med(|r| r.calls_per_s),
                if path == 0 { "–".into() } else { format!("{:.1}", med(|r| r.root_cpu_us)) },
            );
        }
    }
    let _ = writeln!(
        md,
        "\n### Added by acs-proxy around the remote Guardian (paired per round, medians)\n"
    );
    let _ = writeln!(
        md,
        "| phase | transport | added p50 remote − direct µs | Guardian service/call µs | added p50 beyond the Guardian µs | Guardian process CPU/call µs | added p50 beyond the Guardian process's CPU µs | added p50 embedded − direct µs |"
    );
    let _ = writeln!(md, "|---|---|---:|---:|---:|---:|---:|---:|");
    let mut sequential_beyond = [f64::NAN; 2];
    let sequential_embedded = median(
        runs[1]
            .iter()
            .zip(&runs[0])
            .map(|(x, d)| x.phases[0].p50_us - d.phases[0].p50_us),
    );
    for (p, (phase, _, calls)) in phases.iter().enumerate() {
        let paired = |path: usize| {
            median(
                runs[path]
                    .iter()
                    .zip(&runs[0])
                    .map(|(x, d)| x.phases[p].p50_us - d.phases[p].p50_us),
            )
        };
        for (slot, (path, transport)) in [(REMOTE_HTTP, "HTTP"), (REMOTE_STDIO, "stdio")]
            .into_iter()
            .enumerate()
        {
            let beyond = beyond_guardian(runs, path, p, *calls, |t| t.total_ns);
            let beyond_process = beyond_guardian(runs, path, p, *calls, |t| t.process_cpu_ns);
            if p == 0 {
                sequential_beyond[slot] = beyond;
            }
            let _ = writeln!(
                md,
                "| {phase} | {transport} | {:.1} | {:.1} | {beyond:.1} | {:.1} | {beyond_process:.1} | {:.1} |",
                paired(path),
                guardian_median(&runs[path], p, |t, _| per_call_us(t.total_ns, *calls)),
                guardian_median(&runs[path], p, |t, _| per_call_us(t.process_cpu_ns, *calls)),
                paired(1),
            );
        }
    }
    let relay_beyond = relay_floor_table(&mut md, runs, args.sequential, sequential_beyond);
    if let Some(floors) = floors {
        floor_table(&mut md, &floors.exchange, sequential_embedded);
        client_floor_table(&mut md, &floors.client, sequential_embedded);
    }
    let _ = writeln!(md, "\n### Targets (remote Guardian)\n");
    let _ = writeln!(
        md,
        "| target | goal | measured | floor: two exchanges + the embedded path's added p50 | the ACS client alone + the embedded path's added p50 | the bare relay asking the Guardian | status |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|");
    for (slot, (transport, goal)) in [
        ("HTTP", TARGET_BEYOND_GUARDIAN_HTTP_US),
        ("stdio", TARGET_BEYOND_GUARDIAN_STDIO_US),
    ]
    .into_iter()
    .enumerate()
    {
        let measured = sequential_beyond[slot];
        let floor = floors.map_or("–".to_owned(), |floors| {
            format!(
                "{:.1} µs",
                2.0 * floors.exchange[slot].p50_us + sequential_embedded
            )
        });
        let client = floors.map_or("–".to_owned(), |floors| {
            format!(
                "{:.1} µs",
                floors.client[slot].beyond_service_us + sequential_embedded
            )
        });
        let _ = writeln!(
            md,
            "| p50 added by acs-proxy beyond the Guardian's service time, over {transport} (sequential) | ≤ {goal} µs | {measured:.1} µs | {floor} | {client} | {:.1} µs | {} |",
            relay_beyond[slot],
            if measured <= goal { "met" } else { "**not met**" }
        );
    }
    let _ = writeln!(
        md,
        "\n- parameters: {} rounds; per run: {} warm-up calls, {} sequential calls, {} calls at each of {:?} in flight; \
         proxy: tools_call = \"both\", inventory on, audit fsync = \"batch\"; embedded: {} rules; remote: \
         `[guardian] batch = true` (both hooks of a call in one request, over HTTP or stdio), HMAC-SHA256 signing both ways; \
         Guardian service time = its `Guardian::handle` (verify, chain, decide, sign) per POST, timed on its side; \
         Guardian process CPU = all its threads' CPU over the phase (service, transport, wake-ups){}",
        args.rounds, args.warmup, args.sequential, args.pipelined, args.in_flight, args.rules,
        if args.guardian_twice {
            "; `--guardian-twice`: the Guardian decides every request twice (the service time counts both)"
        } else {
            ""
        },
    );
    md
}

/// The median over rounds of what `path` added to a call's p50 in phase
/// `p` over the direct run of the same round, less the Guardian's time per
/// call that `of` reads.
fn beyond_guardian(
    runs: &Runs,
    path: usize,
    p: usize,
    calls: usize,
    of: fn(&ServiceTimes) -> u64,
) -> f64 {
    median(runs[path].iter().zip(&runs[0]).map(|(r, d)| {
        let guardian = r.guardian.get(p).map_or(0.0, |t| per_call_us(of(t), calls));
        r.phases[p].p50_us - d.phases[p].p50_us - guardian
    }))
}

/// The relay floor's table: the bare relay asking each remote Guardian
/// about every sequential call, beside acs-proxy's figure (`gateway`,
/// `[HTTP, stdio]`); returns the floor's figure per transport.
fn relay_floor_table(md: &mut String, runs: &Runs, calls: usize, gateway: [f64; 2]) -> [f64; 2] {
    let _ = writeln!(
        md,
        "\n### The relay floor (the bare relay asking the remote Guardian about every call through acs-proxy's ACS client, one process, nothing else of governance; sequential, paired per round)\n"
    );
    let _ = writeln!(
        md,
        "| transport | added p50 over direct µs | Guardian service/call µs | p50 beyond the service µs | relay CPU/call µs | acs-proxy: beyond the service µs | acs-proxy − relay floor µs | acs-proxy CPU/call µs |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut floors = [f64::NAN; 2];
    for (slot, (relay, remote, transport)) in [
        (RELAY_HTTP, REMOTE_HTTP, "HTTP"),
        (RELAY_STDIO, REMOTE_STDIO, "stdio"),
    ]
    .into_iter()
    .enumerate()
    {
        let beyond = beyond_guardian(runs, relay, 0, calls, |t| t.total_ns);
        floors[slot] = beyond;
        let cpu = |path: usize| median(runs[path].iter().map(|r| r.phases[0].root_cpu_us));
        let _ = writeln!(
            md,
            "| {transport} | {:.1} | {:.1} | {beyond:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
            median(
                runs[relay]
                    .iter()
                    .zip(&runs[0])
                    .map(|(r, d)| r.phases[0].p50_us - d.phases[0].p50_us)
            ),
            guardian_median(&runs[relay], 0, |t, _| per_call_us(t.total_ns, calls)),
            cpu(relay),
            gateway[slot],
            gateway[slot] - beyond,
            cpu(remote),
        );
    }
    floors
}

/// The exchange floor's table: one exchange of each transport alone, and
/// what two of them (one sequential call's) come to beside the governance
/// the embedded path adds.
fn floor_table(md: &mut String, floors: &[Floor; 2], sequential_embedded: f64) {
    let _ = writeln!(
        md,
        "\n### The exchange floor (acs-proxy's Guardian transports to an echoing Guardian, nothing decided)\n"
    );
    let _ = writeln!(
        md,
        "| transport | request / reply bytes | round trip p50 µs | p99 µs | client CPU/exchange µs | Guardian CPU/exchange µs | two exchanges p50 µs | + embedded added p50 µs |"
    );
    let _ = writeln!(md, "|---|---|---:|---:|---:|---:|---:|---:|");
    for (transport, floor) in ["HTTP", "stdio"].iter().zip(floors) {
        let _ = writeln!(
            md,
            "| {transport} | {} / {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
            floor.request_bytes,
            floor.reply_bytes,
            floor.p50_us,
            floor.p99_us,
            floor.client_cpu_us,
            floor.guardian_cpu_us,
            2.0 * floor.p50_us,
            2.0 * floor.p50_us + sequential_embedded,
        );
    }
}

/// The ACS client floor's table: a sequential call's two batches through
/// acs-proxy's remote Guardian client alone, and what they come to beside
/// the governance the embedded path adds.
fn client_floor_table(md: &mut String, floors: &[ClientFloor; 2], sequential_embedded: f64) {
    let _ = writeln!(
        md,
        "\n### The ACS client floor (acs-proxy's remote Guardian client alone: two batches per call, signed, verified and read, against the timed Guardian)\n"
    );
    let _ = writeln!(
        md,
        "| transport | request / reply bytes | call p50 µs | p99 µs | Guardian service/call µs | p50 beyond the service µs | client CPU/call µs | Guardian CPU/call µs | + embedded added p50 µs |"
    );
    let _ = writeln!(md, "|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for (transport, floor) in ["HTTP", "stdio"].iter().zip(floors) {
        let _ = writeln!(
            md,
            "| {transport} | {} / {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
            floor.request_bytes,
            floor.reply_bytes,
            floor.p50_us,
            floor.p99_us,
            floor.service_us,
            floor.beyond_service_us,
            floor.client_cpu_us,
            floor.guardian_cpu_us,
            floor.beyond_service_us + sequential_embedded,
        );
    }
}

/// `nanoseconds` over a phase of `calls`, in µs per call.
fn per_call_us(nanoseconds: u64, calls: usize) -> f64 {
    nanoseconds as f64 / 1000.0 / calls as f64
}

/// Median over rounds of `metric` of the Guardian's times in phase `p`.
fn guardian_median(
    runs: &[RunResult],
    p: usize,
    metric: impl Fn(&ServiceTimes, usize) -> f64,
) -> f64 {
    median(
        runs.iter()
            .filter_map(|r| r.guardian.get(p).map(|t| metric(t, p))),
    )
}
