//! The single task that owns the log file and group-commits queued lines.
//!
//! One writer means lines never interleave and one fsync can cover every
//! entry that queued up while the previous one ran. Each round it drains the
//! queue, writes everything in one write, syncs as the [`FsyncMode`] asks,
//! and only then answers whoever waits.
//!
//! Lines are written with plain `std::fs` on the writer task itself: a
//! write of one small batch lands in the page cache without blocking for
//! long, while going through `tokio::fs` cost a blocking-pool hand-off per
//! write and per flush (see BENCHMARKS.md, "Where the time goes"). The
//! fsync, which can take milliseconds, still runs on the blocking pool so it
//! never stalls the runtime the sessions share. In `Batch` mode nobody
//! waits for the periodic fsync, so it runs in the background while later
//! rounds are written: only `Always` and an explicit flush wait on the disk.

use std::fs::File;
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::settings::FsyncMode;
use super::AuditError;

/// How a waiter learns whether its part of a round reached the disk.
pub(crate) type Ack = oneshot::Sender<Result<(), AuditError>>;

/// What appenders and `flush` send to the writer.
#[derive(Debug)]
pub(crate) enum Command {
    /// One finished JSONL line; `ack` is set only in `Always` mode, where
    /// the appender waits for the covering fsync.
    Append { line: Vec<u8>, ack: Option<Ack> },
    /// Answer once everything queued before is written and synced.
    Flush { ack: Ack },
}

/// Everything one round commits together.
#[derive(Default)]
struct Round {
    bytes: Vec<u8>,
    waiters: Vec<Ack>,
    sync_requested: bool,
}

impl Round {
    fn add(&mut self, command: Command) {
        match command {
            Command::Append { line, ack } => {
                self.bytes.extend_from_slice(&line);
                self.waiters.extend(ack);
            }
            Command::Flush { ack } => {
                self.sync_requested = true;
                self.waiters.push(ack);
            }
        }
    }

    /// Tells every waiter the round's outcome. A waiter that went away (its
    /// append was cancelled) needs no answer, so send errors are ignored.
    fn answer(self, outcome: impl Fn() -> Result<(), AuditError>) {
        for waiter in self.waiters {
            let _ = waiter.send(outcome());
        }
    }
}

/// The writer task's state.
pub(crate) struct Writer {
    /// Shared only with an in-progress `sync_data` on the blocking pool.
    file: Arc<File>,
    path: PathBuf,
    mode: FsyncMode,
    commands: mpsc::Receiver<Command>,
    healthy: Arc<AtomicBool>,
    /// Bytes were written since the last sync started.
    unsynced: bool,
    last_sync: Instant,
    /// A `Batch` mode sync still running on the blocking pool.
    background_sync: Option<JoinHandle<io::Result<()>>>,
}

impl Writer {
    /// Creates the writer; `healthy` is shared with every log handle.
    pub(crate) fn new(
        file: File,
        path: PathBuf,
        mode: FsyncMode,
        commands: mpsc::Receiver<Command>,
        healthy: Arc<AtomicBool>,
    ) -> Self {
        Self {
            file: Arc::new(file),
            path,
            mode,
            commands,
            healthy,
            unsynced: false,
            last_sync: Instant::now(),
            background_sync: None,
        }
    }

    /// Runs until every log handle is dropped, then syncs what is left.
    pub(crate) async fn run(mut self) {
        while let Some(first) = self.next_command().await {
            let round = self.drain(first);
            self.commit(round).await;
        }
        self.settle_background_sync().await;
        if self.unsynced && self.mode != FsyncMode::Never {
            self.sync_or_fail().await;
        }
    }

    /// Waits for the next command; in `Batch` mode it meanwhile syncs
    /// written data once the interval since the last sync has passed, so a
    /// quiet log is durable within [`FsyncMode::BATCH_INTERVAL`].
    async fn next_command(&mut self) -> Option<Command> {
        loop {
            if let Some(running) = self.background_sync.as_mut() {
                tokio::select! {
                    command = self.commands.recv() => return command,
                    outcome = running => {
                        self.background_sync = None;
                        self.settled(outcome);
                    }
                }
                continue;
            }
            if !(self.mode == FsyncMode::Batch && self.unsynced) {
                return self.commands.recv().await;
            }
            let deadline = self.last_sync + FsyncMode::BATCH_INTERVAL;
            tokio::select! {
                command = self.commands.recv() => return command,
                () = tokio::time::sleep_until(deadline) => self.start_background_sync().await,
            }
        }
    }

    /// Takes everything already queued, up to the queue's capacity so one
    /// round cannot grow without bound while appenders keep refilling it.
    fn drain(&mut self, first: Command) -> Round {
        let mut round = Round::default();
        round.add(first);
        for _ in 1..self.commands.max_capacity() {
            match self.commands.try_recv() {
                Ok(command) => round.add(command),
                Err(_) => break,
            }
        }
        round
    }

    async fn commit(&mut self, round: Round) {
        self.reap_background_sync().await;
        if round.sync_requested {
            // The flush's promise covers bytes a running sync may have missed.
            self.settle_background_sync().await;
        }
        if !self.healthy.load(Ordering::Acquire) {
            // After a failure nothing more is written: appending behind a
            // possibly half-written line would corrupt the file's tail.
            round.answer(|| Err(AuditError::Unavailable));
            return;
        }
        let sync = round.sync_requested || self.mode == FsyncMode::Always;
        match self.write(&round.bytes, sync).await {
            Ok(()) => round.answer(|| Ok(())),
            Err(error) => {
                let error = Arc::new(error);
                self.fail(&error);
                round.answer(|| Err(AuditError::Write(Arc::clone(&error))));
            }
        }
    }

    /// `Batch` mode: once the interval has passed since the last sync
    /// started, syncs what is written without holding the next rounds.
    async fn start_background_sync(&mut self) {
        self.reap_background_sync().await;
        if self.background_sync.is_some() || !self.unsynced {
            return;
        }
        let file = Arc::clone(&self.file);
        self.background_sync = Some(tokio::task::spawn_blocking(move || file.sync_data()));
        self.unsynced = false;
        self.last_sync = Instant::now();
    }

    /// Collects a background sync that has finished, failing the log if it
    /// failed.
    async fn reap_background_sync(&mut self) {
        if self
            .background_sync
            .as_ref()
            .is_some_and(JoinHandle::is_finished)
        {
            self.settle_background_sync().await;
        }
    }

    /// Waits for the background sync, if one runs.
    async fn settle_background_sync(&mut self) {
        let Some(running) = self.background_sync.take() else {
            return;
        };
        let outcome = running.await;
        self.settled(outcome);
    }

    fn settled(&mut self, outcome: Result<io::Result<()>, tokio::task::JoinError>) {
        if let Err(error) = outcome.map_err(io::Error::other).and_then(|synced| synced) {
            self.fail(&error);
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
        } else if self.mode == FsyncMode::Batch
            && self.last_sync.elapsed() >= FsyncMode::BATCH_INTERVAL
        {
            self.start_background_sync().await;
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

    /// A sync nobody waits for; its failure still makes the log unhealthy.
    async fn sync_or_fail(&mut self) {
        if let Err(error) = self.sync().await {
            self.fail(&error);
        }
    }

    fn fail(&mut self, error: &io::Error) {
        self.unsynced = false;
        if self.healthy.swap(false, Ordering::AcqRel) {
            tracing::error!(
                path = %self.path.display(),
                %error,
                "audit log write failed; no further entries will be recorded"
            );
        }
    }
}
