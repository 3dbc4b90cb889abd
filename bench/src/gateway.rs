//! The gateways of the http suite, each exposing one stdio MCP server over
//! Streamable HTTP: acs-proxy (full governance), its bare relay (the same
//! transports, nothing between them: the floor), `supergateway` (npm) and
//! `mcp-proxy` (PyPI), the latter two installed by `bench/install-peers`.

use std::path::{Path, PathBuf};

use crate::context::{absolute, BenchArgs, Context};
use crate::setup::{Listen, ProxySetup, Server, Upstream};

/// Which gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    AcsProxy,
    BareRelay,
    Supergateway,
    McpProxy,
}

/// A gateway that can be started.
#[derive(Debug, Clone)]
pub struct Gateway {
    pub kind: Kind,
    /// Its installed entry point (acs-proxy: the binary).
    entry: PathBuf,
}

/// A gateway's command line for one run.
pub struct Launch {
    pub command: Vec<String>,
    /// The Streamable HTTP path it serves.
    pub path: &'static str,
    /// acs-proxy's audit log, to count and verify.
    pub audit: Option<PathBuf>,
}

impl Gateway {
    /// The gateways asked for, with a note for each one that is not installed.
    pub fn resolve(
        args: &BenchArgs,
        context: &Context,
    ) -> Result<(Vec<Gateway>, Vec<String>), String> {
        let mut gateways = Vec::new();
        let mut notes = Vec::new();
        for key in &args.gateways {
            let (kind, entry) = match key.as_str() {
                "acs-proxy" => (Kind::AcsProxy, context.proxy.clone()),
                "bare-relay" => (Kind::BareRelay, context.bare_relay.clone()),
                "supergateway" => (
                    Kind::Supergateway,
                    context
                        .bench_peers
                        .join("node_modules/supergateway/dist/index.js"),
                ),
                "mcp-proxy" => (
                    Kind::McpProxy,
                    context.bench_peers.join(".venv/bin/mcp-proxy"),
                ),
                other => {
                    return Err(format!(
                        "unknown gateway {other:?} (acs-proxy, bare-relay, supergateway, mcp-proxy)"
                    ))
                }
            };
            if entry.exists() {
                gateways.push(Gateway { kind, entry });
            } else {
                notes.push(format!(
                    "{key} skipped: {} is absent (run bench/install-peers)",
                    entry.display()
                ));
            }
        }
        Ok((gateways, notes))
    }

    /// Its name in the report.
    pub fn title(&self) -> &'static str {
        match self.kind {
            Kind::AcsProxy => "acs-proxy",
            Kind::BareRelay => "bare relay",
            Kind::Supergateway => "supergateway",
            Kind::McpProxy => "mcp-proxy",
        }
    }

    /// The command that serves `server` on `address` (`127.0.0.1:PORT`).
    pub fn launch(
        &self,
        args: &BenchArgs,
        server: &Server,
        address: &str,
        work: &Path,
        tag: &str,
    ) -> Result<Launch, String> {
        let port = address
            .rsplit(':')
            .next()
            .ok_or_else(|| format!("no port in {address}"))?
            .to_owned();
        match self.kind {
            Kind::AcsProxy | Kind::BareRelay => {
                let audit = work.join(format!("audit-{tag}.jsonl"));
                let _ = std::fs::remove_file(&audit);
                let config = work.join(format!("proxy-{tag}.toml"));
                let setup = ProxySetup {
                    name: server.key.into(),
                    listen: Listen::Http {
                        address: address.to_owned(),
                        max_sessions: 1024,
                    },
                    upstream: Upstream::Command(server.command.clone()),
                    decider: args.embedded()?,
                    audit: audit.clone(),
                };
                std::fs::write(&config, setup.config())
                    .map_err(|e| format!("{}: {e}", config.display()))?;
                setup.write_tokens()?;
                Ok(Launch {
                    command: vec![absolute(&self.entry), "--config".into(), absolute(&config)],
                    path: "/mcp",
                    // The bare relay writes no audit log.
                    audit: (self.kind == Kind::AcsProxy).then_some(audit),
                })
            }
            // Stateful: one child per session, as acs-proxy does (the
            // stateless mode spawns a child for every request).
            Kind::Supergateway => Ok(Launch {
                command: vec![
                    args.node.clone(),
                    absolute(&self.entry),
                    "--stdio".into(),
                    shell_words(&server.command),
                    "--outputTransport".into(),
                    "streamableHttp".into(),
                    "--stateful".into(),
                    "--port".into(),
                    port,
                    "--logLevel".into(),
                    "none".into(),
                ],
                path: "/mcp",
                audit: None,
            }),
            // One stdio child shared by every session (mcp-proxy starts it
            // once, at startup).
            Kind::McpProxy => {
                let mut command = vec![
                    absolute(&self.entry),
                    "--host".into(),
                    "127.0.0.1".into(),
                    "--port".into(),
                    port,
                    "--log-level".into(),
                    "WARNING".into(),
                    "--".into(),
                ];
                command.extend(server.command.iter().cloned());
                Ok(Launch {
                    command,
                    path: "/mcp",
                    audit: None,
                })
            }
        }
    }
}

/// `command` as one shell command line (supergateway runs it through a shell).
fn shell_words(command: &[String]) -> String {
    command
        .iter()
        .map(|word| {
            if word
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "/._-=:@,+".contains(c))
            {
                word.clone()
            } else {
                format!("'{}'", word.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_quote_what_needs_it() {
        let words = vec!["node".to_owned(), "/a b/x.js".to_owned(), "it's".to_owned()];
        assert_eq!(shell_words(&words), r"node '/a b/x.js' 'it'\''s'");
    }
}
