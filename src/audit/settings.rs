//! `AuditSettings`: where the log lives and how hard it is pushed to disk.
//!
//! Defined here, next to the code that honours it; the config module reuses
//! these types for the `[audit]` table.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The `[audit]` settings. Audit is always on, so `path` is required.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditSettings {
    /// The JSONL file; created if missing, its directory must exist.
    pub path: PathBuf,
    /// When written entries are fsynced.
    #[serde(default)]
    pub fsync: FsyncMode,
}

/// When the writer calls `fsync` (`sync_data`) on the log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FsyncMode {
    /// Every group of entries is synced before its appenders are answered:
    /// an acknowledged entry survives a power loss. Slowest.
    Always,
    /// Appenders are answered once their entry is queued; entries are
    /// written within [`FsyncMode::GROUP_COMMIT_WINDOW`], and written data
    /// is synced at most every [`FsyncMode::BATCH_INTERVAL`], and within
    /// that interval after the last write when the log goes quiet. A crash
    /// may lose the last interval's entries.
    #[default]
    Batch,
    /// Data is written (reaches the OS, within the group-commit window) but
    /// never explicitly synced, except by [`super::AuditLog::flush`]. For
    /// tmpfs or tests.
    Never,
}

/// What happens to traffic while the audit log cannot be written
/// (`[audit] on_failure`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnFailure {
    /// Fail closed: every message whose entry cannot be written is refused
    /// (JSON-RPC -32013). Nothing moves without a record.
    #[default]
    Deny,
    /// Fail open: decisions are enforced as usual but go unrecorded; each
    /// failure window is logged as an error and counted in the metrics.
    Allow,
}

impl FsyncMode {
    /// The longest `Batch` lets written entries stay unsynced.
    pub const BATCH_INTERVAL: Duration = Duration::from_millis(50);

    /// How long `Batch` and `Never` gather entries before writing them.
    /// Short enough that a `kill -9` loses at most a couple of milliseconds
    /// of entries; long enough that calls arriving one at a time share a
    /// write instead of costing a system call per message.
    pub const GROUP_COMMIT_WINDOW: Duration = Duration::from_millis(2);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Wrapper {
        audit: AuditSettings,
    }

    #[test]
    fn settings_read_from_toml_with_lowercase_modes() {
        let parsed: Wrapper =
            toml::from_str("[audit]\npath = \"a.jsonl\"\nfsync = \"always\"\n").unwrap();
        assert_eq!(parsed.audit.fsync, FsyncMode::Always);
        let defaulted: Wrapper = toml::from_str("[audit]\npath = \"a.jsonl\"\n").unwrap();
        assert_eq!(defaulted.audit.fsync, FsyncMode::Batch);
        assert!(
            toml::from_str::<Wrapper>("[audit]\npath = \"a\"\nfsync = \"Sometimes\"\n").is_err()
        );
    }

    #[test]
    fn on_failure_reads_lowercase_and_defaults_to_deny() {
        #[derive(Deserialize)]
        struct Audit {
            #[serde(default)]
            on_failure: OnFailure,
        }
        let allow: Audit = toml::from_str("on_failure = \"allow\"\n").unwrap();
        assert_eq!(allow.on_failure, OnFailure::Allow);
        let default: Audit = toml::from_str("").unwrap();
        assert_eq!(default.on_failure, OnFailure::Deny);
        assert!(toml::from_str::<Audit>("on_failure = \"Allow\"\n").is_err());
    }
}
