//! The bounded export queue: the span processor the tracer hands finished
//! spans to.
//!
//! Ending a span only tries to put it in a bounded channel; one task on
//! the runtime takes spans off it in batches and exports them, one export
//! at a time. When the collector is slow or down the channel fills and
//! further spans are dropped at once, never waited for; a batch whose
//! export fails is dropped too. Both are counted in
//! `acs_proxy_trace_spans_dropped_total{reason}` (`queue_full`,
//! `export_failed`). The SDK's own batch processor counts its drops only
//! into a log line, and runs its exporter off the runtime, which the async
//! HTTP and gRPC clients cannot use.

use std::time::Duration;

use opentelemetry::Context;
use opentelemetry_otlp::SpanExporter;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter as _, SpanProcessor};
use tokio::sync::mpsc::{self, error::TrySendError};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::metrics::TRACE_SPANS_DROPPED;

/// `reason` of a span dropped because the queue was full.
pub const QUEUE_FULL: &str = "queue_full";
/// `reason` of a span whose batch could not be exported.
pub const EXPORT_FAILED: &str = "export_failed";

/// How long the last export may take when the proxy stops.
const FINAL_EXPORT: Duration = Duration::from_secs(5);

/// The processor: the sending end of the queue.
#[derive(Debug)]
pub struct BoundedQueue {
    spans: mpsc::Sender<SpanData>,
    stop: CancellationToken,
}

/// The exporting task, to await at shutdown.
#[derive(Debug)]
pub struct ExportTask {
    stop: CancellationToken,
    task: JoinHandle<()>,
}

/// How the exporting task batches.
#[derive(Debug, Clone, Copy)]
pub struct Batching {
    /// Spans held before new ones are dropped.
    pub queue_size: usize,
    /// Spans per export.
    pub batch_size: usize,
    /// How long a span waits for its batch to fill.
    pub interval: Duration,
}

/// A queue in front of `exporter`, and the task draining it (spawned on
/// the current runtime).
pub fn start(exporter: SpanExporter, batching: Batching) -> (BoundedQueue, ExportTask) {
    for reason in [QUEUE_FULL, EXPORT_FAILED] {
        TRACE_SPANS_DROPPED.with_label_values(&[reason]);
    }
    let (spans, pending) = mpsc::channel(batching.queue_size);
    let stop = CancellationToken::new();
    let task = tokio::spawn(drain(exporter, pending, batching, stop.clone()));
    (
        BoundedQueue {
            spans,
            stop: stop.clone(),
        },
        ExportTask { stop, task },
    )
}

impl ExportTask {
    /// Exports what is queued (bounded in time) and stops.
    pub async fn finish(self) {
        self.stop.cancel();
        if tokio::time::timeout(FINAL_EXPORT, self.task).await.is_err() {
            tracing::debug!("the last trace export did not finish in time");
        }
    }
}

impl SpanProcessor for BoundedQueue {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        match self.spans.try_send(span) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                TRACE_SPANS_DROPPED.with_label_values(&[QUEUE_FULL]).inc()
            }
            // Stopping: the last export has been taken already.
            Err(TrySendError::Closed(_)) => {}
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        self.stop.cancel();
        Ok(())
    }
}

/// Takes spans off the queue and exports them in batches: when a batch is
/// full, when the interval passes, and once more when stopped.
async fn drain(
    exporter: SpanExporter,
    mut pending: mpsc::Receiver<SpanData>,
    batching: Batching,
    stop: CancellationToken,
) {
    let mut batch = Vec::with_capacity(batching.batch_size);
    let mut tick = tokio::time::interval(batching.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            () = stop.cancelled() => break,
            span = pending.recv() => match span {
                Some(span) => {
                    batch.push(span);
                    if batch.len() >= batching.batch_size {
                        export(&exporter, std::mem::take(&mut batch)).await;
                    }
                }
                None => break,
            },
            _ = tick.tick() => {
                if !batch.is_empty() {
                    export(&exporter, std::mem::take(&mut batch)).await;
                }
            }
        }
    }
    pending.close();
    while let Ok(span) = pending.try_recv() {
        batch.push(span);
    }
    for chunk in batch.chunks(batching.batch_size) {
        export(&exporter, chunk.to_vec()).await;
    }
    let _ = exporter.shutdown();
}

async fn export(exporter: &SpanExporter, batch: Vec<SpanData>) {
    let count = batch.len() as u64;
    if let Err(err) = exporter.export(batch).await {
        TRACE_SPANS_DROPPED
            .with_label_values(&[EXPORT_FAILED])
            .inc_by(count);
        tracing::debug!(%err, spans = count, "trace export failed; spans dropped");
    }
}
