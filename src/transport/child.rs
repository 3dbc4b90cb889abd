//! An upstream MCP server spawned as a child process (MCP stdio transport).
//!
//! The child runs in its own process group so that the whole tree (for
//! example `npx` and the `node` it starts) can be signalled at shutdown, and
//! so that a Ctrl-C aimed at the agent's terminal reaches the proxy, which
//! then shuts the child down in order. Its stderr is inherited: server logs
//! pass straight through to the proxy's stderr.

use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio_util::codec::FramedRead;

use super::line::LineCodec;
use super::writer::FrameWriter;
use crate::config::UpstreamConfig;

/// Why the upstream server could not be started.
#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    /// The program could not be spawned.
    #[error("cannot start upstream `{program}`: {source}")]
    Spawn {
        /// The program named in `command`.
        program: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The configuration has no command.
    #[error("upstream has no command")]
    NoCommand,
    /// The child's stdio pipes were not available.
    #[error("upstream `{0}` has no stdio pipes")]
    NoPipes(String),
}

/// A running upstream server and its two directions.
pub struct ChildUpstream {
    process: ChildProcess,
    /// Frames from the server's stdout.
    pub reader: FramedRead<ChildStdout, LineCodec>,
    /// Frames to the server's stdin; dropping every clone closes its stdin.
    pub writer: FrameWriter,
    /// The writer task; finishes when the stdin is closed.
    pub writer_task: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// A running child with its stdin and stdout as plain pipes, for a caller
/// that frames them its own way (the stdio Guardian).
pub struct ChildPipes {
    /// Control over the process, for an orderly shutdown.
    pub process: ChildProcess,
    /// The child's stdin.
    pub stdin: ChildStdin,
    /// The child's stdout.
    pub stdout: ChildStdout,
}

/// How the child ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildExit {
    /// Exit code, when it exited normally.
    pub code: Option<i32>,
    /// Which signal ended it, if the proxy had to send one.
    pub signalled: Option<&'static str>,
}

impl ChildUpstream {
    /// Spawns the server described by `config`.
    pub fn spawn(
        config: &UpstreamConfig,
        max_message_bytes: usize,
        queue: usize,
    ) -> Result<Self, ChildError> {
        let pipes = ChildPipes::spawn(config)?;
        let (writer, writer_task) = FrameWriter::spawn(pipes.stdin, queue);
        Ok(Self {
            process: pipes.process,
            reader: FramedRead::new(pipes.stdout, LineCodec::new(max_message_bytes)),
            writer,
            writer_task,
        })
    }

    /// Splits off the process handle so the reader and writer can move into
    /// their own tasks while shutdown keeps control of the process.
    pub fn into_parts(
        self,
    ) -> (
        ChildProcess,
        FramedRead<ChildStdout, LineCodec>,
        FrameWriter,
        tokio::task::JoinHandle<std::io::Result<()>>,
    ) {
        (self.process, self.reader, self.writer, self.writer_task)
    }
}

impl ChildPipes {
    /// Spawns the program described by `config`, in its own process group,
    /// with piped stdin and stdout and the proxy's stderr.
    pub fn spawn(config: &UpstreamConfig) -> Result<Self, ChildError> {
        let (program, args) = config.command.split_first().ok_or(ChildError::NoCommand)?;
        let mut command = Command::new(program);
        command
            .args(args)
            .envs(&config.env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .process_group(0)
            .kill_on_drop(true);
        if let Some(cwd) = &config.cwd {
            command.current_dir(cwd);
        }
        let mut child = command.spawn().map_err(|source| ChildError::Spawn {
            program: program.clone(),
            source,
        })?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| ChildError::NoPipes(program.clone()))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| ChildError::NoPipes(program.clone()))?;
        Ok(Self {
            process: ChildProcess {
                child,
                grace: Duration::from_millis(config.shutdown_grace_ms),
            },
            stdin,
            stdout,
        })
    }
}

/// Control over the child process itself, for an orderly shutdown.
pub struct ChildProcess {
    child: Child,
    grace: Duration,
}

impl ChildProcess {
    /// Waits for the child to exit on its own.
    pub async fn wait(&mut self) -> ChildExit {
        let status = self.child.wait().await;
        ChildExit {
            code: status.ok().and_then(|s| s.code()),
            signalled: None,
        }
    }

    /// Ends the child in the order MCP's stdio transport prescribes: its
    /// stdin is already closed by the caller, then wait, then SIGTERM to the
    /// process group, wait again, then SIGKILL.
    pub async fn shutdown(&mut self) -> ChildExit {
        if let Some(exit) = self.wait_for(self.grace).await {
            return exit;
        }
        self.signal(Signal::SIGTERM);
        if let Some(mut exit) = self.wait_for(self.grace).await {
            exit.signalled = Some("SIGTERM");
            return exit;
        }
        self.signal(Signal::SIGKILL);
        let mut exit = self.wait().await;
        exit.signalled = Some("SIGKILL");
        exit
    }

    async fn wait_for(&mut self, limit: Duration) -> Option<ChildExit> {
        tokio::time::timeout(limit, self.child.wait())
            .await
            .ok()
            .map(|status| ChildExit {
                code: status.ok().and_then(|s| s.code()),
                signalled: None,
            })
    }

    fn signal(&self, signal: Signal) {
        let Some(pid) = self.child.id() else { return };
        let Ok(pid) = i32::try_from(pid) else { return };
        if let Err(err) = killpg(Pid::from_raw(pid), signal) {
            tracing::debug!(%err, ?signal, "signalling the upstream process group failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upstream(command: &[&str], grace_ms: u64) -> UpstreamConfig {
        UpstreamConfig {
            shutdown_grace_ms: grace_ms,
            ..UpstreamConfig::for_command(command.iter().map(|s| s.to_string()).collect())
        }
    }

    async fn shut_down(command: &[&str]) -> ChildExit {
        let child = ChildUpstream::spawn(&upstream(command, 200), 1024, 4).unwrap();
        let (mut process, _reader, writer, _task) = child.into_parts();
        writer.close();
        process.shutdown().await
    }

    #[tokio::test]
    async fn a_server_that_exits_on_eof_needs_no_signal() {
        let exit = shut_down(&["cat"]).await;
        assert_eq!(
            exit,
            ChildExit {
                code: Some(0),
                signalled: None
            }
        );
    }

    #[tokio::test]
    async fn a_server_ignoring_eof_gets_sigterm() {
        let exit = shut_down(&["sleep", "30"]).await;
        assert_eq!(exit.signalled, Some("SIGTERM"));
    }

    #[tokio::test]
    async fn a_server_ignoring_sigterm_gets_sigkill() {
        let exit = shut_down(&["sh", "-c", "trap '' TERM; sleep 30 & wait; sleep 30"]).await;
        assert_eq!(exit.signalled, Some("SIGKILL"));
    }

    #[tokio::test]
    async fn a_missing_program_is_named() {
        let err = ChildUpstream::spawn(&upstream(&["/no/such/server"], 10), 1024, 4)
            .err()
            .unwrap();
        assert!(err.to_string().contains("/no/such/server"));
    }
}
