//! OpenTelemetry traces (ACS-Trace): off unless `[telemetry]` or the
//! standard `OTEL_*` variables switch them on.
//!
//! - [`settings`]: `[telemetry]` and the environment, resolved once.
//! - [`pipeline`]: the OTLP exporter (HTTP/protobuf or gRPC) and the tracer.
//! - [`queue`]: the bounded export queue; spans are dropped, and counted in
//!   `acs_proxy_trace_spans_dropped_total`, rather than slow a request.
//! - [`trace`]: [`Trace`], the handle the relay passes around; a no-op
//!   `None` when tracing is off, so nothing is built on the hot path.
//! - [`spans`]: span names and attributes, from the ACS otel mapping
//!   (`schemas/trace/otel-mapping.json`) and the MCP conventions.
//! - [`carrier`]: W3C `traceparent`/`tracestate` in and out (HTTP headers,
//!   `params._meta`).

pub mod carrier;
pub mod pipeline;
mod queue;
pub mod settings;
pub mod spans;
pub mod trace;

use std::sync::OnceLock;

use opentelemetry_sdk::trace::SdkTracer;

pub use carrier::Carrier;
pub use pipeline::{init, shutdown, TelemetryError};
pub use settings::TelemetryConfig;
pub use trace::Trace;

/// The tracer, set once at start-up when tracing is on.
static TRACER: OnceLock<SdkTracer> = OnceLock::new();

/// The tracer when tracing is on; the one check every instrumentation
/// point makes first (an atomic load), so tracing off builds nothing.
pub fn tracer() -> Option<&'static SdkTracer> {
    TRACER.get()
}

/// Whether tracing is on.
pub fn enabled() -> bool {
    TRACER.get().is_some()
}
