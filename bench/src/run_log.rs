//! One run's spawned command: where its stderr goes, and errors that say
//! which run failed and where to look.

use std::path::PathBuf;
use std::time::Duration;

use crate::client::Peer;
use crate::context::{BenchArgs, Context};

/// How long a run may take before the load generator gives up on it.
const RUN_DEADLINE: Duration = Duration::from_secs(600);

/// A run, named by its tag, with its stderr in the work directory.
pub struct RunLog {
    tag: String,
    stderr: PathBuf,
}

impl RunLog {
    /// The run `tag`; its command's stderr goes to `stderr-<tag>.log`.
    pub fn new(context: &Context, tag: &str) -> Self {
        RunLog {
            tag: tag.to_owned(),
            stderr: context.work.join(format!("stderr-{tag}.log")),
        }
    }

    /// `what` went wrong in this run, pointing at its stderr.
    pub fn fail(&self, what: String) -> String {
        format!("{}: {what} (stderr in {})", self.tag, self.stderr.display())
    }

    /// Spawns `command` (logging at `warn`) as an MCP peer whose echo
    /// calls carry `argument`.
    pub fn spawn(
        &self,
        args: &BenchArgs,
        command: &[String],
        argument: &str,
    ) -> Result<Peer, String> {
        Peer::spawn(
            command,
            &[("ACS_PROXY_LOG", "warn")],
            &self.stderr,
            argument,
            args.request_bytes,
            RUN_DEADLINE,
        )
        .map_err(|e| self.fail(format!("cannot start {command:?}: {e}")))
    }
}
