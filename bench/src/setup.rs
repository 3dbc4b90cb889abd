//! What is benchmarked: the servers, the proxy's configuration, the
//! commands that start each scenario.

use std::path::{Path, PathBuf};

/// The three rules of the sample `proxy.toml`: a deny, a redaction that is
/// evaluated on every tool result, and a glob with a payload match.
const SAMPLE_RULES: &str = r#"
[[policy.rule]]
name = "no-environment-dump"
hook = "steps/toolCallRequest"
tool = "get-env"
decision = "deny"
reasoning = "dumping the server environment would expose credentials"

[[policy.rule]]
name = "redact-ssn"
hook = "steps/toolCallResult"
decision = "modify"
reasoning = "US social security numbers are removed from tool output"
redact = { pointer = "/outputs", regex = '\b\d{3}-\d{2}-\d{4}\b', replacement = "[REDACTED SSN]" }

[[policy.rule]]
name = "no-destructive-shell"
hook = "steps/toolCallRequest"
tool = "run_*"
match = { pointer = "/arguments/command/value", regex = 'rm\s+-rf' }
decision = "deny"
reasoning = "recursive deletes are not allowed"
"#;

/// An MCP server the load is sent to, directly or through the proxy.
#[derive(Debug, Clone)]
pub struct Server {
    /// Short key (`demo`, `everything`), also the upstream name.
    pub key: &'static str,
    /// How it is named in the report.
    pub title: &'static str,
    /// The command that starts it on stdio.
    pub command: Vec<String>,
    /// The echo tool's text argument.
    pub argument: &'static str,
}

/// `n` policy rules, none of which matches an `echo` call: the sample
/// rules, then rules for other tools (exact names, one tool glob, one
/// wrapped-message rule with a payload match), as a policy that grew would
/// have them.
pub fn policy_rules(n: usize) -> String {
    let mut text = String::from(SAMPLE_RULES);
    for i in 3..n.max(3) {
        let selector = if i % 20 == 10 {
            format!("hook = \"steps/toolCallRequest\"\ntool = \"svc{i}_*\"")
        } else if i % 25 == 7 {
            format!(
                "hook = \"protocols/MCP/tools/*\"\nmatch = {{ pointer = \"/params/arguments/path\", regex = '^/etc/{i}/' }}"
            )
        } else {
            format!("hook = \"steps/toolCallRequest\"\ntool = \"tool-{i}\"")
        };
        text.push_str(&format!(
            "\n[[policy.rule]]\nname = \"rule-{i}\"\n{selector}\ndecision = \"deny\"\nreasoning = \"rule {i}\"\n"
        ));
    }
    text
}

/// How the proxy is reached by the load generator.
#[derive(Debug, Clone)]
pub enum Listen {
    /// The load generator spawns the proxy and speaks over its stdin/stdout.
    Stdio,
    /// Streamable HTTP on `address` at `/mcp`.
    Http {
        address: String,
        max_sessions: usize,
    },
    /// MCP over WebSocket on `address` at `/mcp`.
    Ws { address: String },
}

/// Where the proxy's MCP server is.
#[derive(Debug, Clone)]
pub enum Upstream {
    /// A stdio server, spawned once per session.
    Command(Vec<String>),
    /// A Streamable HTTP server.
    Url(String),
}

/// Who decides.
#[derive(Debug, Clone)]
pub enum Decider {
    /// The embedded Guardian with the bench policy of `rules` rules.
    Embedded { rules: usize },
    /// The embedded Guardian with the Rego example library
    /// (`examples/policies`), the caller a developer (echo is allowed).
    Rego,
    /// A remote ACS Guardian over HTTP, both hooks of a call in one batch.
    Remote { url: String, secret_file: PathBuf },
    /// A remote ACS Guardian the proxy spawns and speaks to over stdio,
    /// both hooks of a call in one batch.
    RemoteStdio {
        command: Vec<String>,
        secret_file: PathBuf,
    },
}

/// One proxy configuration of the benchmark: full governance (`tools_call
/// = "both"`, inventory on) and audit with group commit, whatever the
/// transports and the Guardian.
#[derive(Debug, Clone)]
pub struct ProxySetup {
    pub name: String,
    pub listen: Listen,
    pub upstream: Upstream,
    pub decider: Decider,
    pub audit: PathBuf,
}

impl ProxySetup {
    /// The configuration file's text.
    pub fn config(&self) -> String {
        let mut listen = match &self.listen {
            Listen::Stdio => "transport = \"stdio\"\n".to_owned(),
            Listen::Http {
                address,
                max_sessions,
            } => format!(
                "transport = \"http\"\naddress = {address:?}\npath = \"/mcp\"\nmax_sessions = {max_sessions}\n"
            ),
            Listen::Ws { address } => {
                format!("transport = \"ws\"\naddress = {address:?}\npath = \"/mcp\"\n")
            }
        };
        // Over HTTP the caller the Rego library decides on is a principal:
        // a named token (`BENCH_TOKEN`, written by `write_tokens`).
        if matches!(
            (&self.listen, &self.decider),
            (Listen::Http { .. }, Decider::Rego)
        ) {
            listen.push_str(&format!(
                "auth_tokens_file = {:?}\n",
                tokens_file(&self.audit).display().to_string()
            ));
        }
        let upstream = match &self.upstream {
            Upstream::Command(command) => format!("command = {}\n", toml_strings(command)),
            Upstream::Url(url) => format!("url = {url:?}\n"),
        };
        let mut caller = String::new();
        let (guardian, rules) = match &self.decider {
            Decider::Embedded { rules } => {
                ("mode = \"embedded\"\n".to_owned(), policy_rules(*rules))
            }
            Decider::Rego => {
                let library = workspace_root().join("examples/policies");
                caller.push_str("user_id = \"bench\"\nroles = [\"developer\"]\n");
                (
                    "mode = \"embedded\"\n".to_owned(),
                    format!(
                        "engine = \"rego\"\nrego = [{:?}]\ndata = {:?}\n",
                        library.join("*.rego").display().to_string(),
                        library.join("data.json").display().to_string()
                    ),
                )
            }
            Decider::Remote { url, secret_file } => (
                format!(
                    "mode = \"remote\"\nurl = {url:?}\nsecret_file = {:?}\nbatch = true\n",
                    secret_file.display().to_string()
                ),
                String::new(),
            ),
            Decider::RemoteStdio {
                command,
                secret_file,
            } => (
                format!(
                    "mode = \"remote\"\ncommand = {}\nsecret_file = {:?}\nbatch = true\n",
                    toml_strings(command),
                    secret_file.display().to_string()
                ),
                String::new(),
            ),
        };
        format!(
            r#"# Written by acs-proxy-bench.
[listen]
{listen}
[[upstream]]
name = "{name}"
{upstream}
[guardian]
{guardian}
[hooks]
tools_call = "both"
{caller}
[policy]
default = "allow"
{rules}
[audit]
path = {audit:?}
fsync = "batch"
"#,
            name = self.name,
            audit = self.audit.display().to_string(),
        )
    }
}

/// `["a", "b"]`: a TOML array of strings.
fn toml_strings(words: &[String]) -> String {
    let quoted: Vec<String> = words.iter().map(|word| format!("{word:?}")).collect();
    format!("[{}]", quoted.join(", "))
}

/// The bearer token of the bench's caller (a developer) when the Rego
/// library decides over HTTP.
pub const BENCH_TOKEN: &str = "bench-developer-token";

/// Where the named-token file of a setup whose audit log is `audit` goes.
fn tokens_file(audit: &Path) -> PathBuf {
    audit.with_file_name("bench-tokens")
}

impl ProxySetup {
    /// Writes the named-token file the config refers to (`--policy rego`
    /// over HTTP), and has the HTTP client present its token.
    pub fn write_tokens(&self) -> Result<(), String> {
        if !matches!(
            (&self.listen, &self.decider),
            (Listen::Http { .. }, Decider::Rego)
        ) {
            return Ok(());
        }
        let file = tokens_file(&self.audit);
        std::fs::write(&file, format!("{BENCH_TOKEN} bench developer\n"))
            .map_err(|e| format!("{}: {e}", file.display()))?;
        let bearer = hyper::header::HeaderValue::from_str(&format!("Bearer {BENCH_TOKEN}"))
            .map_err(|e| format!("bearer: {e}"))?;
        let _ = crate::http_client::BEARER.set(bearer);
        Ok(())
    }
}

/// The workspace root (this crate lives in `<root>/bench`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// `command` run under `taskset -c cpus` when asked and available.
pub fn pinned(command: Vec<String>, cpus: Option<&str>) -> Vec<String> {
    match cpus {
        Some(cpus) => {
            let mut wrapped = vec!["taskset".to_owned(), "-c".to_owned(), cpus.to_owned()];
            wrapped.extend(command);
            wrapped
        }
        None => command,
    }
}

/// Whether `program` can be run (found on PATH or as a path).
pub fn runnable(program: &str) -> bool {
    std::process::Command::new(program)
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok()
}

/// `git describe` of the workspace, when it is a checkout.
pub fn revision(root: &Path) -> Option<String> {
    let output = std::process::Command::new("git")
        .args(["describe", "--always", "--dirty"])
        .current_dir(root)
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_name_every_part() {
        let setup = ProxySetup {
            name: "demo".into(),
            listen: Listen::Http {
                address: "127.0.0.1:1".into(),
                max_sessions: 6000,
            },
            upstream: Upstream::Url("http://127.0.0.1:2/mcp".into()),
            decider: Decider::Remote {
                url: "http://127.0.0.1:3/acs".into(),
                secret_file: "/tmp/secret".into(),
            },
            audit: "/tmp/audit.jsonl".into(),
        };
        let text = setup.config();
        assert!(text.contains("max_sessions = 6000"));
        assert!(text.contains("url = \"http://127.0.0.1:2/mcp\""));
        assert!(text.contains("mode = \"remote\""));
        assert!(!text.contains("[[policy.rule]]"));
    }

    #[test]
    fn twenty_rules() {
        let text = policy_rules(20);
        assert_eq!(text.matches("[[policy.rule]]").count(), 20);
        assert!(text.contains("tool = \"svc10_*\""));
        assert!(text.contains("hook = \"protocols/MCP/tools/*\""));
        assert!(!text.contains("\"echo\""));
    }
}
