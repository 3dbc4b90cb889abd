//! Start-up and shutdown of tracing: the OTLP exporter, the bounded queue
//! in front of it, the sampler, and the tracer every span comes from.

use std::sync::Mutex;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{SpanExporter, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use opentelemetry_sdk::Resource;

use super::queue::{self, Batching, ExportTask};
use super::settings::{Protocol, SamplerChoice, SamplerName, SettingsError, TraceSettings};
use super::{TelemetryConfig, TRACER};

/// Why tracing could not be switched on.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// A `[telemetry]` key or `OTEL_*` variable is unusable.
    #[error("telemetry settings: {0}")]
    Settings(#[from] SettingsError),
    /// The OTLP exporter could not be built (e.g. a malformed endpoint).
    #[error("the OTLP trace exporter: {0}")]
    Exporter(String),
    /// Tracing was switched on twice.
    #[error("tracing is already on")]
    AlreadyOn,
}

/// What stops tracing in order at exit.
struct Running {
    provider: SdkTracerProvider,
    export: ExportTask,
}

static RUNNING: Mutex<Option<Running>> = Mutex::new(None);

/// Switches tracing on when `config` or the environment asks for it;
/// returns the settings in force (`None`: tracing stays off). Must run on
/// the Tokio runtime: the export task is spawned on it. `http` is the
/// client OTLP/HTTP posts with (the proxy's rustls set-up).
pub fn init(
    config: &TelemetryConfig,
    http: reqwest::Client,
) -> Result<Option<TraceSettings>, TelemetryError> {
    let env = |name: &str| std::env::var(name).ok();
    let Some(settings) = TraceSettings::resolve(config, &env)? else {
        return Ok(None);
    };
    if TRACER.get().is_some() {
        return Err(TelemetryError::AlreadyOn);
    }
    let resource = Resource::builder()
        .with_service_name(settings.service_name.clone())
        .build();
    let mut exporter = exporter(&settings, http)?;
    opentelemetry_sdk::trace::SpanExporter::set_resource(&mut exporter, &resource);
    let (processor, export) = queue::start(
        exporter,
        Batching {
            queue_size: settings.queue_size,
            batch_size: settings.batch_size,
            interval: settings.export_interval,
        },
    );
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_sampler(sampler(settings.sampler))
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("acs-proxy");
    TRACER.set(tracer).map_err(|_| TelemetryError::AlreadyOn)?;
    if let Ok(mut running) = RUNNING.lock() {
        *running = Some(Running { provider, export });
    }
    Ok(Some(settings))
}

/// Exports what is still queued (for a bounded time) and stops; spans
/// ended after this are dropped.
pub async fn shutdown() {
    let running = RUNNING.lock().ok().and_then(|mut running| running.take());
    let Some(Running { provider, export }) = running else {
        return;
    };
    export.finish().await;
    let _ = provider.shutdown();
}

fn exporter(
    settings: &TraceSettings,
    http: reqwest::Client,
) -> Result<SpanExporter, TelemetryError> {
    let built = match settings.protocol {
        Protocol::HttpProtobuf => {
            let mut builder = SpanExporter::builder()
                .with_http()
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_http_client(http);
            if let Some(endpoint) = &settings.endpoint {
                builder = builder.with_endpoint(endpoint.clone());
            }
            builder.build()
        }
        Protocol::Grpc => {
            let mut builder = SpanExporter::builder().with_tonic();
            if let Some(endpoint) = &settings.endpoint {
                builder = builder.with_endpoint(endpoint.clone());
            }
            builder.build()
        }
    };
    built.map_err(|err| TelemetryError::Exporter(err.to_string()))
}

fn sampler(choice: SamplerChoice) -> Sampler {
    let ratio = Sampler::TraceIdRatioBased(choice.ratio);
    match choice.name {
        SamplerName::AlwaysOn => Sampler::AlwaysOn,
        SamplerName::AlwaysOff => Sampler::AlwaysOff,
        SamplerName::TraceIdRatio => ratio,
        SamplerName::ParentbasedAlwaysOn => Sampler::ParentBased(Box::new(Sampler::AlwaysOn)),
        SamplerName::ParentbasedAlwaysOff => Sampler::ParentBased(Box::new(Sampler::AlwaysOff)),
        SamplerName::ParentbasedTraceIdRatio => Sampler::ParentBased(Box::new(ratio)),
    }
}
