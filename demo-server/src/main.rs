//! `acs-proxy-demo-server`: a small MCP server over stdio.
//!
//! Newline-delimited JSON-RPC 2.0 on stdin/stdout, logs on stderr only. It is
//! the README demo's upstream, the exact-bytes test server (`--record`) and
//! the fast echo server of the benchmarks. See `--help`.

mod catalog;
mod output;
mod rpc;
mod server;
mod slow;
mod tools;

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use catalog::Catalog;
use output::Output;
use server::Server;

/// The `--help` text.
const USAGE: &str = "\
usage: acs-proxy-demo-server [--record FILE] [--verbose] [--extra-tools FILE] [--rug-pull]
                             [--page-size N]

A small MCP server over stdio (newline-delimited JSON-RPC 2.0).

  --record FILE       append every raw line received on stdin to FILE
  --verbose           log each message to stderr
  --extra-tools FILE  append the tool definitions of FILE (a JSON array) to
                      the catalog; calling one answers \"NAME called\"
  --rug-pull          add rewrite-tool {name, description}, which rewrites a
                      listed tool's description and emits list_changed
  --page-size N       list tools N at a time (nextCursor names the next page)
  --help         print this help
  --version      print the version

tools: echo {text}, add {a,b}, get-env, lookup-user {name}, slow {ms,steps?},
       sample {prompt}, change-tools (toggles extra-tool)
resource: demo://readme   prompt: greeting {name}";

/// Command-line options.
#[derive(Debug, Default)]
struct Options {
    record: Option<PathBuf>,
    verbose: bool,
    extra_tools: Option<PathBuf>,
    rug_pull: bool,
    page_size: Option<usize>,
}

/// Parses the arguments; `Err` carries the exit code for help/version/errors.
fn parse_args(args: impl Iterator<Item = String>) -> Result<Options, ExitCode> {
    let mut options = Options::default();
    let mut args = args.skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--record" => match args.next() {
                Some(path) => options.record = Some(PathBuf::from(path)),
                None => return Err(usage_error("--record needs a FILE")),
            },
            "--verbose" => options.verbose = true,
            "--extra-tools" => match args.next() {
                Some(path) => options.extra_tools = Some(PathBuf::from(path)),
                None => return Err(usage_error("--extra-tools needs a FILE")),
            },
            "--rug-pull" => options.rug_pull = true,
            "--page-size" => match args.next().and_then(|n| n.parse().ok()) {
                Some(size) if size > 0 => options.page_size = Some(size),
                _ => return Err(usage_error("--page-size needs a number above 0")),
            },
            "--help" | "-h" => {
                println!("{USAGE}");
                return Err(ExitCode::SUCCESS);
            }
            "--version" | "-V" => {
                println!("acs-proxy-demo-server {}", env!("CARGO_PKG_VERSION"));
                return Err(ExitCode::SUCCESS);
            }
            other => return Err(usage_error(&format!("unknown argument {other:?}"))),
        }
    }
    Ok(options)
}

/// Prints a usage error to stderr.
fn usage_error(message: &str) -> ExitCode {
    eprintln!("acs-proxy-demo-server: {message}\n\n{USAGE}");
    ExitCode::from(2)
}

/// Appends raw input lines to the `--record` file, flushed per line.
struct Recorder {
    file: Option<File>,
}

impl Recorder {
    /// Opens (creating, appending) the record file, if one was asked for.
    fn open(path: Option<&PathBuf>) -> io::Result<Self> {
        let file = match path {
            Some(path) => Some(OpenOptions::new().create(true).append(true).open(path)?),
            None => None,
        };
        Ok(Self { file })
    }

    /// Appends one raw line exactly as received; on failure, stops recording.
    fn record(&mut self, line: &[u8]) {
        let Some(file) = &mut self.file else { return };
        if let Err(err) = file.write_all(line).and_then(|()| file.flush()) {
            eprintln!("[demo-server] --record write failed ({err}); recording stopped");
            self.file = None;
        }
    }
}

fn main() -> ExitCode {
    let options = match parse_args(std::env::args()) {
        Ok(options) => options,
        Err(code) => return code,
    };
    let mut recorder = match Recorder::open(options.record.as_ref()) {
        Ok(recorder) => recorder,
        Err(err) => {
            eprintln!("acs-proxy-demo-server: cannot open --record file: {err}");
            return ExitCode::FAILURE;
        }
    };
    let catalog = match Catalog::load(options.extra_tools.as_deref(), options.rug_pull) {
        Ok(catalog) => catalog,
        Err(err) => {
            eprintln!("acs-proxy-demo-server: cannot read --extra-tools: {err}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!(
        "[demo-server] acs-proxy-demo-server {} on stdio",
        env!("CARGO_PKG_VERSION")
    );
    let mut server = Server::new(Output::stdout(), options.verbose)
        .with_catalog(catalog)
        .with_page_size(options.page_size);
    let mut stdin = io::stdin().lock();
    let mut line = Vec::with_capacity(4096);
    loop {
        line.clear();
        match stdin.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {
                recorder.record(&line);
                server.handle_line(&line);
            }
            Err(err) => {
                eprintln!("[demo-server] stdin read failed: {err}");
                break;
            }
        }
    }
    server.finish();
    ExitCode::SUCCESS
}
