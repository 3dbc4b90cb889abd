//! Hot reload of the embedded policy: on `SIGHUP`, and when a file it was
//! built from changes (the config file, the Rego modules), the config file
//! is read again and its policy compiled and checked completely; only then
//! does it replace the one in force, in one step. A hook in flight finishes
//! on the policy it started with. A policy that fails to load leaves the
//! old one in force and logs the error with its `file:line`.
//!
//! The policy is replaced with its `[[policy.limit]]` set; a limit whose
//! definition did not change keeps its buckets and calls in flight. Other
//! sections of the config file take a restart.

use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, SystemTime};

use prometheus::{IntCounterVec, IntGaugeVec};
use sha2::{Digest, Sha256};
use tokio::signal::unix::{signal, SignalKind};
use tokio_util::sync::CancellationToken;

use super::{EmbeddedGuardian, PolicyEngine};
use crate::config::Config;
use crate::metrics::METRICS;

/// `acs_proxy_policy_reloads_total{outcome}`: reloads tried, `ok` or
/// `failed` (the previous policy stayed in force).
static POLICY_RELOADS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    METRICS.register_counter_vec(
        "acs_proxy_policy_reloads_total",
        "Policy reloads, by outcome (ok, failed: the previous policy stays in force)",
        &["outcome"],
    )
});

/// `acs_proxy_policy_info{digest}`: 1 for the policy in force, named by
/// [`digest`]; one series at a time.
static POLICY_INFO: LazyLock<IntGaugeVec> = LazyLock::new(|| {
    METRICS.register_gauge_vec(
        "acs_proxy_policy_info",
        "The embedded policy in force, by the digest of its files",
        &["digest"],
    )
});

/// How often the policy's files are looked at for a change.
const POLL: Duration = Duration::from_secs(1);

/// Modification time and size of each file, to notice a change.
type Stamps = Vec<Option<(SystemTime, u64)>>;

/// Reloads `guardian`'s policy from `config_path` on `SIGHUP` and when its
/// files change, until `stop`.
pub async fn watch(guardian: Arc<EmbeddedGuardian>, config_path: PathBuf, stop: CancellationToken) {
    let mut hangups = match signal(SignalKind::hangup()) {
        Ok(hangups) => Some(hangups),
        Err(err) => {
            tracing::warn!(%err, "cannot handle SIGHUP; the policy reloads on file changes only");
            None
        }
    };
    publish_digest(None, &digest(&files(&config_path, &guardian.engine())));
    let mut seen = stamps(&files(&config_path, &guardian.engine()));
    let mut ticks = tokio::time::interval(POLL);
    loop {
        let hangup = async {
            match hangups.as_mut() {
                Some(hangups) => hangups.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = hangup => {}
            _ = ticks.tick() => {
                if stamps(&files(&config_path, &guardian.engine())) == seen {
                    continue;
                }
            }
        }
        // Reading and compiling a large policy takes milliseconds: off the
        // runtime's workers, so the calls in flight meanwhile are not held.
        let (reloading, path) = (guardian.clone(), config_path.clone());
        if let Err(err) = tokio::task::spawn_blocking(move || reload(&reloading, &path)).await {
            tracing::error!(%err, "the policy reload task failed");
        }
        seen = stamps(&files(&config_path, &guardian.engine()));
    }
}

/// Loads the policy `config_path` describes and puts it in force; on
/// failure the policy in force stays. Counted either way.
pub fn reload(guardian: &EmbeddedGuardian, config_path: &Path) -> bool {
    let before = digest(&files(config_path, &guardian.engine()));
    match Config::load(config_path) {
        Ok(config) => {
            let engine = PolicyEngine::from_config(&config);
            let after = digest(&files(config_path, &engine));
            let limits = config.policy.limits().clone();
            guardian.replace(engine, limits, Some(after.clone()));
            POLICY_RELOADS.with_label_values(&["ok"]).inc();
            publish_digest(Some(&before), &after);
            tracing::info!(digest = %after, "reloaded the policy");
            true
        }
        Err(err) => {
            POLICY_RELOADS.with_label_values(&["failed"]).inc();
            tracing::error!(%err, "the new policy does not load; the previous one stays in force");
            false
        }
    }
}

/// The files a policy was built from: the config file and, for Rego, its
/// modules.
pub fn files(config_path: &Path, engine: &PolicyEngine) -> Vec<PathBuf> {
    let mut files = vec![config_path.to_owned()];
    if let PolicyEngine::Rego { policy, .. } = engine {
        files.extend(policy.files().iter().cloned());
    }
    files
}

fn stamps(files: &[PathBuf]) -> Stamps {
    files
        .iter()
        .map(|file| {
            let meta = std::fs::metadata(file).ok()?;
            Some((meta.modified().ok()?, meta.len()))
        })
        .collect()
}

/// The first 16 hex digits of the SHA-256 over the files' contents: which
/// version of the policy is in force.
pub fn digest(files: &[PathBuf]) -> String {
    let mut hasher = Sha256::new();
    for file in files {
        hasher.update(file.as_os_str().as_encoded_bytes());
        hasher.update([0]);
        hasher.update(std::fs::read(file).unwrap_or_default());
        hasher.update([0]);
    }
    hex::encode(hasher.finalize())[..16].to_owned()
}

fn publish_digest(before: Option<&str>, after: &str) {
    if let Some(before) = before.filter(|before| *before != after) {
        let _ = POLICY_INFO.remove_label_values(&[before]);
    }
    POLICY_INFO.with_label_values(&[after]).set(1);
}
