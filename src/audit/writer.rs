//! The single task that owns the log file and group-commits queued lines.
//!
//! One writer means lines never interleave and one fsync can cover every
//! entry that queued up while the previous one ran. Each round it drains the
//! queue, writes everything in one write, syncs as the [`FsyncMode`] asks,
//! and only then answers whoever waits.
//!
//! In `Batch` and `Never` mode nobody waits for a round, so a round that
//! starts with an append first lets [`FsyncMode::GROUP_COMMIT_WINDOW`] pass:
//! the entries of every message in that window share one write instead of
//! costing one each (two per `tools/call` round trip when calls come one at
//! a time). `Always` mode never lingers: its appenders wait on the disk.
//! Entries their appenders only numbered (`Batch`, `Never`) are linked
//! into their chains as they arrive during the window, in queue order, each
//! once the message it records has been written; those of a message on its
//! way to the server wait for the answer's (see [`super::round`]).
//!
//! Lines are written with plain `std::fs` on the writer task itself: a
//! write of one small batch lands in the page cache without blocking for
//! long, while going through `tokio::fs` cost a blocking-pool hand-off per
//! write and per flush (see BENCHMARKS.md, "Where the time goes"). The
//! fsync, which can take milliseconds, still runs on the blocking pool so it
//! never stalls the runtime the sessions share.
//!
//! A failed write or fsync (full disk, file size limit, I/O error) opens a
//! failure window: the round's bytes are cut off again so the file never
//! keeps half a line, its entries and everything queued behind them are
//! refused, and every [`RETRY_INTERVAL`] the writer tries to write the
//! entry recording the [`Outage`]. Once that works, appends are accepted
//! again and each chain continues from its last written entry.

use std::fs::File;
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::outage::Outage;
use super::queue::Command;
use super::round::Round;
use super::settings::FsyncMode;
use super::status::Status;
use super::AuditError;
use crate::metrics::METRICS;

/// How often a failed log tries to write again.
pub const RETRY_INTERVAL: Duration = Duration::from_millis(500);

/// The bytes a round gathers before it is written. A backlog (a burst of
/// calls while the previous round synced) is written in rounds of about
/// this size instead of one line buffer as large as the whole queue, which
/// set a one-session gateway's peak memory; one write of this size costs
/// no more per entry than a larger one.
const ROUND_BYTES: usize = 256 * 1024;

/// Whether someone waits for `command`'s round: it goes without
/// lingering for the group-commit window.
fn waited_for(command: &Command) -> bool {
    match command {
        Command::Append { ack, .. } => ack.is_some(),
        Command::Linked { .. } | Command::Flush { .. } => true,
    }
}

/// The writer task's state.
pub(crate) struct Writer {
    /// Shared only with an in-progress `sync_data` on the blocking pool.
    file: Arc<File>,
    path: PathBuf,
    mode: FsyncMode,
    commands: mpsc::Receiver<Command>,
    status: Arc<Status>,
    /// Bytes were written since the last sync.
    unsynced: bool,
    last_sync: Instant,
    /// Length of the file through the last round that succeeded; a failed
    /// round is cut back to it.
    committed_len: u64,
    /// The failure window the log is in, if any.
    outage: Option<Outage>,
    retry_at: Instant,
    /// The bytes of the last round written: the next round's buffer starts
    /// that large, so it is allocated once instead of regrown (and copied)
    /// several times as its entries arrive.
    last_round_len: usize,
}

impl Writer {
    /// Creates the writer; `status` is shared with every log handle, and
    /// `committed_len` is the file's length when opened.
    pub(crate) fn new(
        file: File,
        path: PathBuf,
        mode: FsyncMode,
        commands: mpsc::Receiver<Command>,
        status: Arc<Status>,
        committed_len: u64,
    ) -> Self {
        METRICS.audit_writable.set(1);
        Self {
            file: Arc::new(file),
            path,
            mode,
            commands,
            status,
            unsynced: false,
            last_sync: Instant::now(),
            committed_len,
            outage: None,
            retry_at: Instant::now(),
            last_round_len: 0,
        }
    }

    /// Runs until every log handle is dropped, then syncs what is left.
    pub(crate) async fn run(mut self) {
        while let Some(first) = self.next_command().await {
            let round = self.gather(first).await;
            self.commit(round).await;
        }
        if self.unsynced && self.mode != FsyncMode::Never {
            self.sync_or_fail().await;
        }
    }

    /// Waits for the next command. Meanwhile, in a failure window, it
    /// retries every [`RETRY_INTERVAL`]; in `Batch` mode it syncs written
    /// data once the interval since the last sync has passed, so a quiet
    /// log is durable within [`FsyncMode::BATCH_INTERVAL`].
    async fn next_command(&mut self) -> Option<Command> {
        loop {
            let deadline = if self.outage.is_some() {
                self.retry_at
            } else if self.mode == FsyncMode::Batch && self.unsynced {
                self.last_sync + FsyncMode::BATCH_INTERVAL
            } else {
                return self.commands.recv().await;
            };
            tokio::select! {
                command = self.commands.recv() => return command,
                () = tokio::time::sleep_until(deadline) => self.on_deadline().await,
            }
        }
    }

    async fn on_deadline(&mut self) {
        if self.outage.is_some() {
            self.retry().await;
        } else {
            self.sync_or_fail().await;
        }
    }

    /// Collects one round, starting with `first`. Before a round that
    /// nobody waits for, the group-commit window passes so entries queued
    /// meanwhile join it; a flush, an `Always` append and a failure window
    /// go at once. Entries are linked as they arrive (or, on the request
    /// side, with the answer's) rather than all at the window's end: the
    /// writer then runs in the gaps between messages instead of holding one
    /// back for a whole round's hashing. It first lets the message they
    /// record be written ([`after_ready_tasks`]).
    async fn gather(&mut self, first: Command) -> Round {
        let epoch = self.status.epoch();
        let mut round = Round::with_capacity(self.last_round_len.min(ROUND_BYTES));
        let lingers =
            !waited_for(&first) && self.outage.is_none() && self.mode != FsyncMode::Always;
        if lingers {
            after_ready_tasks().await;
        }
        let mut lost = round.add(first, epoch, &self.status);
        // Up to the queue's capacity and about `ROUND_BYTES`, so one round
        // cannot grow without bound while appenders keep refilling it.
        let mut room = self.commands.max_capacity() - 1;
        if lingers {
            let window = tokio::time::sleep(FsyncMode::GROUP_COMMIT_WINDOW);
            tokio::pin!(window);
            while room > 0 && round.bytes.len() < ROUND_BYTES {
                let command = match self.commands.try_recv() {
                    Ok(command) => Some(command),
                    Err(mpsc::error::TryRecvError::Disconnected) => None,
                    Err(mpsc::error::TryRecvError::Empty) => {
                        let command = tokio::select! {
                            biased;
                            command = self.commands.recv() => command,
                            () = &mut window => None,
                        };
                        if command.is_some() {
                            after_ready_tasks().await;
                        }
                        command
                    }
                };
                let Some(command) = command else { break };
                let go_now = waited_for(&command);
                lost += round.add(command, epoch, &self.status);
                room -= 1;
                if go_now {
                    break;
                }
            }
        }
        while room > 0 && round.bytes.len() < ROUND_BYTES {
            match self.commands.try_recv() {
                Ok(command) => lost += round.add(command, epoch, &self.status),
                Err(_) => break,
            }
            room -= 1;
        }
        if let Some(outage) = &mut self.outage {
            outage.lose(lost);
        }
        round.close(epoch);
        round
    }

    async fn commit(&mut self, mut round: Round) {
        if !self.status.is_healthy() {
            self.refuse(round, || AuditError::Unavailable);
            return;
        }
        if let Some(error) = round.failed.take() {
            let error = Arc::new(io::Error::other(error));
            self.fail(&error);
            self.refuse(round, || AuditError::Write(Arc::clone(&error)));
            return;
        }
        let sync = round.sync_requested || self.sync_due();
        self.last_round_len = round.bytes.len();
        match self.write(&round.bytes, sync).await {
            Ok(()) => {
                self.committed_len += round.bytes.len() as u64;
                round.settle();
            }
            Err(error) => {
                let error = Arc::new(error);
                self.fail(&error);
                self.refuse(round, || AuditError::Write(Arc::clone(&error)));
            }
        }
    }

    /// Answers a round that was not written. Its appenders that wait are
    /// refused; those acknowledged already lost their entries.
    fn refuse(&mut self, round: Round, error: impl Fn() -> AuditError) {
        for _ in 0..round.awaited {
            self.status.count_refused();
        }
        if let Some(outage) = &mut self.outage {
            outage.lose(round.acknowledged);
        }
        round.answer(|| Err(error()));
    }

    /// Whether this round's write must be synced before answering.
    fn sync_due(&self) -> bool {
        match self.mode {
            FsyncMode::Always => true,
            FsyncMode::Batch => self.last_sync.elapsed() >= FsyncMode::BATCH_INTERVAL,
            FsyncMode::Never => false,
        }
    }

    async fn write(&mut self, bytes: &[u8], sync: bool) -> io::Result<()> {
        if !bytes.is_empty() {
            // `std::fs::File` is unbuffered: once `write_all` returns, the
            // bytes reached the kernel and any error has been reported.
            (&*self.file).write_all(bytes)?;
            self.unsynced = true;
        }
        if sync && self.unsynced {
            self.sync().await?;
        }
        Ok(())
    }

    async fn sync(&mut self) -> io::Result<()> {
        let file = Arc::clone(&self.file);
        tokio::task::spawn_blocking(move || file.sync_data())
            .await
            .map_err(io::Error::other)??;
        self.unsynced = false;
        self.last_sync = Instant::now();
        Ok(())
    }

    /// A sync nobody waits for; its failure still opens a failure window.
    async fn sync_or_fail(&mut self) {
        if let Err(error) = self.sync().await {
            self.fail(&error);
        }
    }

    /// Opens (or extends) a failure window: refuses appends, removes what
    /// the failed round may have left, and schedules the retry.
    fn fail(&mut self, error: &io::Error) {
        self.unsynced = false;
        self.retry_at = Instant::now() + RETRY_INTERVAL;
        METRICS.audit_writable.set(0);
        if self.status.fail() {
            // Refusals counted from here on belong to this window.
            self.status.take_refused();
            self.outage = Some(Outage::begin(error));
            tracing::error!(
                path = %self.path.display(),
                %error,
                retry_ms = RETRY_INTERVAL.as_millis() as u64,
                "the audit log cannot be written; entries are refused until a retry succeeds"
            );
        }
        self.cut_back();
    }

    /// Truncates the file to the end of the last round that succeeded, so
    /// a failed round leaves no partial line behind. If that fails too the
    /// retry truncates first.
    fn cut_back(&self) -> bool {
        match self.file.set_len(self.committed_len) {
            Ok(()) => true,
            Err(error) => {
                tracing::debug!(%error, "cannot cut the audit log back yet");
                false
            }
        }
    }

    /// Tries to end the failure window by writing the entry that records
    /// it; on success appends are accepted again.
    async fn retry(&mut self) {
        let Some(outage) = &self.outage else {
            return;
        };
        self.retry_at = Instant::now() + RETRY_INTERVAL;
        if !self.cut_back() {
            return;
        }
        let refused = self.status.refused();
        let (elapsed, lost) = (outage.elapsed_secs(), outage.lost());
        let line = match outage.entry_line(refused) {
            Ok(line) => line,
            Err(error) => {
                tracing::error!(%error, "cannot build the audit outage entry");
                return;
            }
        };
        match self.write(&line, true).await {
            Ok(()) => {
                self.committed_len += line.len() as u64;
                self.outage = None;
                self.status.take_refused();
                self.status.recover();
                METRICS.audit_writable.set(1);
                tracing::warn!(
                    path = %self.path.display(),
                    outage_secs = elapsed,
                    refused,
                    lost,
                    "the audit log is writable again; the outage is recorded in it"
                );
            }
            Err(error) => {
                self.unsynced = false;
                self.cut_back();
                tracing::debug!(%error, "audit log retry failed");
            }
        }
    }
}

/// Returns once the tasks that were ready when it was called have run.
///
/// An entry queued while a message is decided wakes the writer before the
/// tasks that release and write that message, and on a one-thread runtime
/// tasks run in the order they were woken. Linking first would put the
/// entry's hashing between the decision and the write; the message's
/// release (when it waits behind others) and its write each take one turn
/// of the queue, so the writer steps back twice. No system call: with
/// nothing else ready it runs again at once.
async fn after_ready_tasks() {
    for _ in 0..2 {
        let mut yielded = false;
        std::future::poll_fn(|cx| {
            if yielded {
                return std::task::Poll::Ready(());
            }
            yielded = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::super::head::Tip;
    use super::super::link::{Link, Written};
    use super::super::queue::Queued;
    use super::*;

    fn append(bytes: usize, epoch: u64) -> Command {
        let written = Written {
            link: Arc::new(Link::new("s", None, None)),
            tip: Tip::default(),
        };
        let line = vec![b'x'; bytes];
        let entry = Queued::Line { line, written };
        Command::Append {
            entry,
            ack: None,
            epoch,
        }
    }

    /// On a one-thread runtime a message's entry wakes the writer before
    /// the task that releases the message, which then wakes the task that
    /// writes it: the writer goes on only once both have run.
    #[tokio::test(flavor = "current_thread")]
    async fn the_writer_steps_back_behind_a_release_and_its_write() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let written = Arc::new(AtomicBool::new(false));
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let (write, to_write) = tokio::sync::oneshot::channel::<()>();
        let flag = Arc::clone(&written);
        tokio::spawn(async move {
            if to_write.await.is_ok() {
                flag.store(true, Ordering::SeqCst);
            }
        });
        tokio::spawn(async move {
            if released.await.is_ok() {
                let _ = write.send(());
            }
        });
        // Both wait on their channels before the message is decided.
        tokio::task::yield_now().await;
        let flag = Arc::clone(&written);
        let writer = tokio::spawn(async move {
            after_ready_tasks().await;
            flag.load(Ordering::SeqCst)
        });
        let _ = release.send(());
        assert!(writer.await.unwrap(), "the message was written first");
    }

    #[tokio::test]
    async fn a_backlog_is_written_in_rounds_of_bounded_size() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let status = Arc::new(Status::healthy());
        let (queue, commands) = mpsc::channel(4096);
        for _ in 0..1024 {
            queue.try_send(append(1024, status.epoch())).unwrap();
        }
        let mut writer = Writer::new(
            file.reopen().unwrap(),
            file.path().to_owned(),
            FsyncMode::Never,
            commands,
            status,
            0,
        );
        let first = writer.commands.recv().await.unwrap();
        let round = writer.gather(first).await;
        assert_eq!(round.bytes.len(), ROUND_BYTES);
        assert_eq!(writer.commands.len(), 1024 - ROUND_BYTES / 1024);
    }
}
