//! A long-running process the load is sent to over the network (a gateway,
//! the HTTP echo upstream, the timed Guardian): started in its own process
//! group, waited for until its port accepts, and stopped with its whole
//! group (bridges start their stdio server through a shell).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

/// A spawned service; its process group is killed on drop.
pub struct Service {
    child: Child,
    /// What it is, for messages.
    pub name: String,
}

impl Service {
    /// Spawns `command` (stdout and stderr to `log`) in a new process group.
    pub fn spawn(
        name: &str,
        command: &[String],
        env: &[(&str, &str)],
        log: &Path,
    ) -> Result<Service, String> {
        use std::os::unix::process::CommandExt as _;
        let (program, args) = command
            .split_first()
            .ok_or_else(|| format!("{name}: empty command"))?;
        let out = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("{}: {e}", log.display()))?;
        let child = Command::new(program)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .process_group(0)
            .spawn()
            .map_err(|e| format!("{name}: cannot start {command:?}: {e}"))?;
        Ok(Service {
            child,
            name: name.to_owned(),
        })
    }

    /// The spawned process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until `addr` accepts connections, failing if the process exits
    /// or `timeout` passes first.
    pub fn wait_ready(&mut self, addr: SocketAddr, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "{} exited with {status} before listening",
                    self.name
                ));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{} not listening on {addr} after {timeout:?}",
                    self.name
                ));
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM to the group, then SIGKILL after `grace`; returns whether
    /// the process exited on SIGTERM alone.
    pub fn stop(mut self, grace: Duration) -> bool {
        let group = Pid::from_raw(self.child.id() as i32);
        let _ = killpg(group, Signal::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                let _ = killpg(group, Signal::SIGKILL);
                return true;
            }
            thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

/// A loopback address with a port that was free a moment ago.
pub fn free_addr() -> Result<SocketAddr, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    listener
        .local_addr()
        .map_err(|e| format!("local_addr: {e}"))
}

/// Raises this process's open-file limit to its hard limit (children
/// inherit it) and returns the new soft limit.
pub fn raise_fd_limit() -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => {
            if setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
                hard
            } else {
                soft
            }
        }
        Ok((soft, _)) => soft,
        Err(_) => 0,
    }
}
