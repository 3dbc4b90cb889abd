//! `AuditLog`: the append-only JSONL store shared by every session of the
//! process.
//!
//! The handle is cheap to clone; all clones feed one bounded queue drained by
//! the writer task, so a slow disk pushes back on appenders instead of
//! growing memory.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::runtime::Handle;
use tokio::sync::{mpsc, oneshot};

use super::queue::Command;
use super::settings::{AuditSettings, FsyncMode};
use super::status::Status;
use super::tail::unterminated_tail;
use super::writer::Writer;
use super::AuditError;

/// Entries that may wait for the writer before appenders are held back:
/// room for several group-commit windows at full appending speed.
const QUEUE_CAPACITY: usize = 4096;

/// Handle to the audit log; clone it freely.
#[derive(Debug, Clone)]
pub struct AuditLog {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    commands: mpsc::Sender<Command>,
    status: Arc<Status>,
    path: PathBuf,
    fsync: FsyncMode,
}

impl AuditLog {
    /// Opens (creating if needed) the log for appending and starts its
    /// writer task.
    ///
    /// Must be called inside a tokio runtime. It does a few blocking file
    /// operations, which is fine once at startup. Fails if the directory is
    /// missing, the file cannot be opened, or the file ends with a torn line
    /// (see [`super::repair_torn_tail`]).
    pub fn open(settings: &AuditSettings) -> Result<Self, AuditError> {
        let runtime = Handle::try_current().map_err(|_| AuditError::NoRuntime)?;
        let file = open_for_append(&settings.path)?;
        let length = file
            .metadata()
            .map_err(|source| AuditError::Open {
                path: settings.path.clone(),
                source,
            })?
            .len();
        let (commands, queue) = mpsc::channel(QUEUE_CAPACITY);
        let status = Arc::new(Status::healthy());
        let writer = Writer::new(
            file,
            settings.path.clone(),
            settings.fsync,
            queue,
            Arc::clone(&status),
            length,
        );
        runtime.spawn(writer.run());
        Ok(Self {
            shared: Arc::new(Shared {
                commands,
                status,
                path: settings.path.clone(),
                fsync: settings.fsync,
            }),
        })
    }

    /// False from a failed write or fsync until a retry succeeds; in
    /// between every append fails with [`AuditError::Unavailable`].
    /// Readiness probes use this.
    pub fn is_healthy(&self) -> bool {
        self.shared.status.is_healthy()
    }

    /// The state shared with the writer.
    pub(crate) fn status(&self) -> &Status {
        &self.shared.status
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// The configured durability.
    pub fn fsync_mode(&self) -> FsyncMode {
        self.shared.fsync
    }

    /// Resolves once everything queued before the call is written and
    /// synced, whatever the [`FsyncMode`]; used at shutdown.
    pub async fn flush(&self) -> Result<(), AuditError> {
        self.ensure_healthy()?;
        let (ack, done) = oneshot::channel();
        self.shared
            .commands
            .send(Command::Flush { ack })
            .await
            .map_err(|_| AuditError::Unavailable)?;
        done.await.map_err(|_| AuditError::Unavailable)?
    }

    /// Refuses work once the log is unhealthy so callers fail closed.
    pub(crate) fn ensure_healthy(&self) -> Result<(), AuditError> {
        if self.is_healthy() {
            Ok(())
        } else {
            Err(AuditError::Unavailable)
        }
    }

    /// Waits for room in the writer's queue.
    pub(crate) async fn reserve(&self) -> Result<mpsc::Permit<'_, Command>, AuditError> {
        self.shared
            .commands
            .reserve()
            .await
            .map_err(|_| AuditError::Unavailable)
    }
}

/// Opens the file for appending after checking that its directory exists
/// and that it does not end mid-line.
fn open_for_append(path: &Path) -> Result<File, AuditError> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(AuditError::MissingDirectory {
            path: path.to_path_buf(),
            dir: dir.to_path_buf(),
        });
    }
    let open_error = |source| AuditError::Open {
        path: path.to_path_buf(),
        source,
    };
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
        .map_err(open_error)?;
    if let Some(tail) = unterminated_tail(&mut file).map_err(open_error)? {
        if tail.is_torn() {
            return Err(AuditError::TornTail {
                path: path.to_path_buf(),
                bytes: tail.bytes.len() as u64,
            });
        }
        // A whole entry that only lost its newline: terminate it so the next
        // entry starts on its own line.
        file.write_all(b"\n").map_err(open_error)?;
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{verify_file, AuditRecord};

    fn settings(dir: &tempfile::TempDir, fsync: FsyncMode) -> AuditSettings {
        AuditSettings {
            path: dir.path().join("audit.jsonl"),
            fsync,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_appends_to_two_sessions_verify() {
        for fsync in [FsyncMode::Always, FsyncMode::Batch, FsyncMode::Never] {
            let dir = tempfile::tempdir().unwrap();
            let settings = settings(&dir, fsync);
            let log = AuditLog::open(&settings).unwrap();
            let sessions = [log.session("session-a"), log.session("session-b")];
            let mut tasks = Vec::new();
            for task in 0..8 {
                let chain = sessions[task % 2].clone();
                tasks.push(tokio::spawn(async move {
                    for step in 0..25 {
                        let record =
                            AuditRecord::new(format!("{task}-{step}"), "steps/toolCallRequest");
                        chain.append(record).await.unwrap();
                    }
                }));
            }
            for task in tasks {
                task.await.unwrap();
            }
            log.flush().await.unwrap();

            let report = verify_file(&settings.path).unwrap();
            assert_eq!(report.entries, 200, "{fsync:?}");
            assert_eq!(report.sessions.len(), 2);
            for chain in &sessions {
                let session = report
                    .sessions
                    .iter()
                    .find(|s| s.session_id == chain.session_id())
                    .unwrap();
                assert_eq!(session.entries, 100);
                assert_eq!(Some(session.head.clone()), chain.head().await);
            }
        }
    }

    #[tokio::test]
    async fn always_mode_acknowledges_after_the_entry_is_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let settings = settings(&dir, FsyncMode::Always);
        let log = AuditLog::open(&settings).unwrap();
        let chain = log.session("s");
        for step in 0..3 {
            let receipt = chain
                .append(AuditRecord::new(
                    format!("r{step}"),
                    "steps/toolCallRequest",
                ))
                .await
                .unwrap();
            // No flush: the receipt itself promises the line was written.
            let content = std::fs::read_to_string(&settings.path).unwrap();
            let last = content.lines().last().unwrap();
            let head = chain.head().await.unwrap();
            assert!(last.contains(&head), "{last}");
            assert_eq!(receipt.entry_id, step as u64 + 1);
        }
    }

    /// The hot-path property: in `batch` and `never` mode an append is
    /// acknowledged without touching the disk. On this one-thread runtime
    /// the writer cannot run while the appender does, so every append
    /// below completes with the file still empty; the group commit writes
    /// all of them afterwards in one round.
    #[tokio::test]
    async fn batch_and_never_appends_never_wait_for_the_disk() {
        for fsync in [FsyncMode::Batch, FsyncMode::Never] {
            let dir = tempfile::tempdir().unwrap();
            let settings = settings(&dir, fsync);
            let log = AuditLog::open(&settings).unwrap();
            let chain = log.session("s");
            for step in 0..50 {
                let record = AuditRecord::new(format!("r{step}"), "steps/toolCallRequest");
                chain.append(record).await.unwrap();
            }
            let written = std::fs::metadata(&settings.path).unwrap().len();
            assert_eq!(written, 0, "{fsync:?}: an append waited for a write");
            log.flush().await.unwrap();
            assert_eq!(verify_file(&settings.path).unwrap().entries, 50);
        }
    }

    #[tokio::test]
    async fn missing_directory_is_named_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("no-such-dir").join("audit.jsonl");
        let error = AuditLog::open(&AuditSettings {
            path: path.clone(),
            fsync: FsyncMode::Always,
        })
        .unwrap_err();
        assert!(matches!(error, AuditError::MissingDirectory { .. }));
        assert!(error.to_string().contains("no-such-dir"), "{error}");
    }

    #[tokio::test]
    async fn unopenable_path_is_named_at_open() {
        let dir = tempfile::tempdir().unwrap();
        // A directory where the file should be cannot be opened for writing.
        let error = AuditLog::open(&AuditSettings {
            path: dir.path().to_path_buf(),
            fsync: FsyncMode::Always,
        })
        .unwrap_err();
        assert!(matches!(error, AuditError::Open { .. }), "{error}");
        assert!(error
            .to_string()
            .contains(&dir.path().display().to_string()));
    }

    #[tokio::test]
    async fn torn_tail_refuses_open_but_lost_newline_is_mended() {
        let dir = tempfile::tempdir().unwrap();
        let settings = settings(&dir, FsyncMode::Always);
        std::fs::write(&settings.path, b"{\"entry_id\":").unwrap();
        let error = AuditLog::open(&settings).unwrap_err();
        assert!(
            matches!(error, AuditError::TornTail { bytes: 12, .. }),
            "{error}"
        );

        std::fs::write(&settings.path, b"{}").unwrap();
        let log = AuditLog::open(&settings).unwrap();
        log.flush().await.unwrap();
        assert_eq!(std::fs::read(&settings.path).unwrap(), b"{}\n");
    }

    #[tokio::test]
    async fn write_failure_fails_waiters_then_every_append() {
        let full = Path::new("/dev/full");
        if !full.exists() {
            return;
        }
        let log = AuditLog::open(&AuditSettings {
            path: full.to_path_buf(),
            fsync: FsyncMode::Always,
        })
        .unwrap();
        let chain = log.session("s");
        let first = chain
            .append(AuditRecord::new("r1", "steps/sessionStart"))
            .await;
        assert!(matches!(first, Err(AuditError::Write(_))), "{first:?}");
        assert!(!log.is_healthy());
        let second = chain
            .append(AuditRecord::new("r2", "steps/sessionEnd"))
            .await;
        assert!(matches!(second, Err(AuditError::Unavailable)), "{second:?}");
        assert!(matches!(log.flush().await, Err(AuditError::Unavailable)));
    }

    #[tokio::test]
    async fn batch_write_failure_is_not_silent() {
        let full = Path::new("/dev/full");
        if !full.exists() {
            return;
        }
        let log = AuditLog::open(&AuditSettings {
            path: full.to_path_buf(),
            fsync: FsyncMode::Batch,
        })
        .unwrap();
        let chain = log.session("s");
        // Batch answers at enqueue, so the failure shows on the next call.
        chain
            .append(AuditRecord::new("r1", "steps/sessionStart"))
            .await
            .unwrap();
        assert!(log.flush().await.is_err());
        assert!(!log.is_healthy());
        assert!(matches!(
            chain
                .append(AuditRecord::new("r2", "steps/sessionEnd"))
                .await,
            Err(AuditError::Unavailable)
        ));
    }

    #[test]
    fn open_needs_a_runtime() {
        let dir = tempfile::tempdir().unwrap();
        let error = AuditLog::open(&settings(&dir, FsyncMode::Never)).unwrap_err();
        assert!(matches!(error, AuditError::NoRuntime));
    }
}
