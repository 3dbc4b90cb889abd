//! `[telemetry]` and the standard `OTEL_*` environment variables, resolved
//! into one [`TraceSettings`] at start-up.
//!
//! A key set in `[telemetry]` wins over its environment variable; the
//! variable fills in what the file leaves out (the OpenTelemetry rule that
//! explicit configuration beats the environment). Tracing is off unless
//! `traces = "otlp"` or `OTEL_TRACES_EXPORTER=otlp`.

use std::time::Duration;

use serde::Deserialize;

/// `[telemetry]` as written; every key optional.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// `otlp` or `none` (`OTEL_TRACES_EXPORTER`).
    #[serde(default)]
    pub traces: Option<Exporter>,
    /// The collector's base URL (`OTEL_EXPORTER_OTLP_ENDPOINT`); over
    /// HTTP `/v1/traces` is appended.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// `http/protobuf` or `grpc` (`OTEL_EXPORTER_OTLP_PROTOCOL`).
    #[serde(default)]
    pub protocol: Option<Protocol>,
    /// `service.name` (`OTEL_SERVICE_NAME`); `acs-proxy` by default.
    #[serde(default)]
    pub service_name: Option<String>,
    /// The sampler (`OTEL_TRACES_SAMPLER`).
    #[serde(default)]
    pub sampler: Option<SamplerName>,
    /// The ratio of the ratio samplers (`OTEL_TRACES_SAMPLER_ARG`).
    #[serde(default)]
    pub sample_ratio: Option<f64>,
    /// Finished spans held for export before new ones are dropped
    /// (`OTEL_BSP_MAX_QUEUE_SIZE`).
    #[serde(default)]
    pub queue_size: Option<usize>,
}

/// Where traces go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Exporter {
    /// OTLP to a collector.
    Otlp,
    /// Nowhere: tracing off.
    None,
}

/// The OTLP wire protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Protocol {
    /// Protobuf over HTTP POST (`/v1/traces`).
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
    /// The OTLP gRPC service.
    #[serde(rename = "grpc")]
    Grpc,
}

/// The OpenTelemetry sampler names (`OTEL_TRACES_SAMPLER` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SamplerName {
    /// Every trace.
    AlwaysOn,
    /// No trace.
    AlwaysOff,
    /// A ratio of traces, by trace id.
    #[serde(rename = "traceidratio")]
    TraceIdRatio,
    /// The caller's decision when there is one, else every trace.
    ParentbasedAlwaysOn,
    /// The caller's decision when there is one, else none.
    ParentbasedAlwaysOff,
    /// The caller's decision when there is one, else a ratio.
    #[serde(rename = "parentbased_traceidratio")]
    ParentbasedTraceIdRatio,
}

impl SamplerName {
    fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "always_on" => Self::AlwaysOn,
            "always_off" => Self::AlwaysOff,
            "traceidratio" => Self::TraceIdRatio,
            "parentbased_always_on" => Self::ParentbasedAlwaysOn,
            "parentbased_always_off" => Self::ParentbasedAlwaysOff,
            "parentbased_traceidratio" => Self::ParentbasedTraceIdRatio,
            _ => return None,
        })
    }
}

/// The sampler to build.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplerChoice {
    /// Which sampler.
    pub name: SamplerName,
    /// Its ratio (1.0 unless set), for the ratio samplers.
    pub ratio: f64,
}

/// Tracing as it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceSettings {
    /// The wire protocol.
    pub protocol: Protocol,
    /// The full export URL from `[telemetry] endpoint`; `None` leaves it
    /// to the exporter, which reads `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
    /// and `OTEL_EXPORTER_OTLP_ENDPOINT` (default localhost:4318 / 4317).
    pub endpoint: Option<String>,
    /// `service.name`.
    pub service_name: String,
    /// The sampler.
    pub sampler: SamplerChoice,
    /// Spans held before new ones are dropped.
    pub queue_size: usize,
    /// Spans sent per export.
    pub batch_size: usize,
    /// How long a span waits for its batch to fill.
    pub export_interval: Duration,
}

/// A setting that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{setting}: {reason}")]
pub struct SettingsError {
    /// The key or variable.
    pub setting: &'static str,
    /// What is wrong with it.
    pub reason: String,
}

fn invalid(setting: &'static str, reason: impl Into<String>) -> SettingsError {
    SettingsError {
        setting,
        reason: reason.into(),
    }
}

const DEFAULT_QUEUE: usize = 2048;
const DEFAULT_BATCH: usize = 512;
const DEFAULT_INTERVAL_MS: u64 = 5000;

impl TraceSettings {
    /// Tracing as `config` and the environment (`env` reads a variable)
    /// ask for; `None` when off.
    pub fn resolve(
        config: &TelemetryConfig,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, SettingsError> {
        let read = |name: &str| env(name).filter(|value| !value.trim().is_empty());
        let exporter = match config.traces {
            Some(exporter) => exporter,
            None => match read("OTEL_TRACES_EXPORTER").as_deref().map(str::trim) {
                None | Some("none") => Exporter::None,
                Some("otlp") => Exporter::Otlp,
                Some(other) => {
                    return Err(invalid(
                        "OTEL_TRACES_EXPORTER",
                        format!("`{other}` is not supported (otlp or none)"),
                    ))
                }
            },
        };
        if exporter == Exporter::None {
            return Ok(None);
        }
        let protocol = match config.protocol {
            Some(protocol) => protocol,
            None => protocol_from_env(&read)?,
        };
        let endpoint = config
            .endpoint
            .as_deref()
            .map(|base| export_url(base, protocol));
        let service_name = config
            .service_name
            .clone()
            .or_else(|| read("OTEL_SERVICE_NAME"))
            .unwrap_or_else(|| "acs-proxy".to_owned());
        let sampler = sampler(config, &read)?;
        let queue_size = match config.queue_size {
            Some(size) => size,
            None => number(&read, "OTEL_BSP_MAX_QUEUE_SIZE")?.unwrap_or(DEFAULT_QUEUE),
        };
        if queue_size == 0 {
            return Err(invalid("telemetry.queue_size", "must be at least 1"));
        }
        let batch_size = number(&read, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE")?
            .unwrap_or(DEFAULT_BATCH)
            .clamp(1, queue_size);
        let interval =
            number(&read, "OTEL_BSP_SCHEDULE_DELAY")?.unwrap_or(DEFAULT_INTERVAL_MS as usize);
        Ok(Some(Self {
            protocol,
            endpoint,
            service_name,
            sampler,
            queue_size,
            batch_size,
            export_interval: Duration::from_millis(interval.max(1) as u64),
        }))
    }
}

fn protocol_from_env(read: &dyn Fn(&str) -> Option<String>) -> Result<Protocol, SettingsError> {
    for name in [
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ] {
        if let Some(value) = read(name) {
            return match value.trim() {
                "http/protobuf" => Ok(Protocol::HttpProtobuf),
                "grpc" => Ok(Protocol::Grpc),
                other => Err(invalid(
                    name,
                    format!("`{other}` is not supported (http/protobuf or grpc)"),
                )),
            };
        }
    }
    Ok(Protocol::HttpProtobuf)
}

/// The export URL for a base URL: OTLP/HTTP posts to `<base>/v1/traces`;
/// gRPC takes the base as it is.
fn export_url(base: &str, protocol: Protocol) -> String {
    match protocol {
        Protocol::HttpProtobuf => format!("{}/v1/traces", base.trim_end_matches('/')),
        Protocol::Grpc => base.to_owned(),
    }
}

fn sampler(
    config: &TelemetryConfig,
    read: &dyn Fn(&str) -> Option<String>,
) -> Result<SamplerChoice, SettingsError> {
    let name = match config.sampler {
        Some(name) => name,
        None => match read("OTEL_TRACES_SAMPLER") {
            Some(text) => SamplerName::parse(text.trim()).ok_or_else(|| {
                invalid(
                    "OTEL_TRACES_SAMPLER",
                    format!("`{text}` is not a known sampler"),
                )
            })?,
            None => SamplerName::ParentbasedAlwaysOn,
        },
    };
    let ratio = match config.sample_ratio {
        Some(ratio) => ratio,
        None => match read("OTEL_TRACES_SAMPLER_ARG") {
            Some(text) => text.trim().parse::<f64>().map_err(|_| {
                invalid(
                    "OTEL_TRACES_SAMPLER_ARG",
                    format!("`{text}` is not a number"),
                )
            })?,
            None => 1.0,
        },
    };
    if !(0.0..=1.0).contains(&ratio) {
        return Err(invalid(
            "telemetry.sample_ratio",
            format!("{ratio} is not between 0 and 1"),
        ));
    }
    Ok(SamplerChoice { name, ratio })
}

fn number(
    read: &dyn Fn(&str) -> Option<String>,
    name: &'static str,
) -> Result<Option<usize>, SettingsError> {
    read(name)
        .map(|text| {
            text.trim()
                .parse::<usize>()
                .map_err(|_| invalid(name, format!("`{text}` is not a whole number")))
        })
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        }
    }

    #[test]
    fn off_unless_asked() {
        let none = TraceSettings::resolve(&TelemetryConfig::default(), &env(&[])).unwrap();
        assert!(none.is_none());
        let off = TraceSettings::resolve(
            &TelemetryConfig::default(),
            &env(&[("OTEL_TRACES_EXPORTER", "none")]),
        )
        .unwrap();
        assert!(off.is_none());
    }

    #[test]
    fn environment_switches_tracing_on() {
        let settings = TraceSettings::resolve(
            &TelemetryConfig::default(),
            &env(&[
                ("OTEL_TRACES_EXPORTER", "otlp"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                ("OTEL_SERVICE_NAME", "gw"),
                ("OTEL_TRACES_SAMPLER", "traceidratio"),
                ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
            ]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(settings.protocol, Protocol::Grpc);
        assert_eq!(settings.service_name, "gw");
        assert_eq!(settings.sampler.name, SamplerName::TraceIdRatio);
        assert_eq!(settings.sampler.ratio, 0.25);
        assert_eq!(settings.endpoint, None);
        assert_eq!(settings.queue_size, DEFAULT_QUEUE);
    }

    #[test]
    fn the_file_wins_over_the_environment() {
        let config: TelemetryConfig = toml::from_str(
            r#"traces = "none"
               endpoint = "http://collector:4318/"
               protocol = "http/protobuf"
               service_name = "from-file"
               sampler = "parentbased_traceidratio"
               sample_ratio = 0.5
               queue_size = 16"#,
        )
        .unwrap();
        let on = env(&[
            ("OTEL_TRACES_EXPORTER", "otlp"),
            ("OTEL_SERVICE_NAME", "from-env"),
        ]);
        assert!(TraceSettings::resolve(&config, &on).unwrap().is_none());
        let config = TelemetryConfig {
            traces: Some(Exporter::Otlp),
            ..config
        };
        let settings = TraceSettings::resolve(&config, &on).unwrap().unwrap();
        assert_eq!(settings.service_name, "from-file");
        assert_eq!(
            settings.endpoint.as_deref(),
            Some("http://collector:4318/v1/traces")
        );
        assert_eq!(settings.queue_size, 16);
        assert_eq!(settings.batch_size, 16);
        assert_eq!(settings.sampler.ratio, 0.5);
    }

    #[test]
    fn unusable_values_are_named() {
        let err = TraceSettings::resolve(
            &TelemetryConfig::default(),
            &env(&[
                ("OTEL_TRACES_EXPORTER", "otlp"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ]),
        )
        .unwrap_err();
        assert_eq!(err.setting, "OTEL_EXPORTER_OTLP_PROTOCOL");
        let err = TraceSettings::resolve(
            &TelemetryConfig::default(),
            &env(&[
                ("OTEL_TRACES_EXPORTER", "otlp"),
                ("OTEL_TRACES_SAMPLER_ARG", "2"),
            ]),
        )
        .unwrap_err();
        assert_eq!(err.setting, "telemetry.sample_ratio");
        assert!(toml::from_str::<TelemetryConfig>("protocol = \"http/json\"").is_err());
    }
}
