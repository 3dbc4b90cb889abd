//! `Outage`: a window during which the log could not be written, and the
//! entry that records it once writing works again.
//!
//! Entries refused during an outage are not in the file, and their chains
//! go on from the last entry that is. So that the gap is not silent, the
//! first write after an outage is an enforcement entry that names it:
//! when it began, why, and how many entries it cost. It is the only entry
//! of a chain of its own (the proxy's, not an agent session's), which
//! also makes it the writer's probe: if it cannot be written, the log is
//! still failed.

use tokio::time::Instant;
use uuid::Uuid;

use super::entry::ENFORCEMENT_STEP_TYPE;
use super::head::ChainHead;
use super::record::AuditRecord;
use super::AuditError;
use crate::enforce::Action;
use crate::guardian::DecisionSource;
use crate::hooks::now_rfc3339;

/// Reason code on the entry recording an outage.
pub const AUDIT_UNAVAILABLE_REASON: &str = "audit_unavailable";

/// What the writer knows about the failure window it is in.
#[derive(Debug)]
pub(crate) struct Outage {
    since: String,
    started: Instant,
    error: String,
    /// Entries acknowledged before they were written (`batch`, `never`)
    /// and lost with the write that failed.
    lost: u64,
}

impl Outage {
    /// A window that opens now because of `error`.
    pub(crate) fn begin(error: &std::io::Error) -> Self {
        Self {
            since: now_rfc3339(),
            started: Instant::now(),
            error: error.to_string(),
            lost: 0,
        }
    }

    /// Counts acknowledged entries lost with a failed write.
    pub(crate) fn lose(&mut self, entries: u64) {
        self.lost += entries;
    }

    /// Seconds since the window opened.
    pub(crate) fn elapsed_secs(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Acknowledged entries lost so far.
    pub(crate) fn lost(&self) -> u64 {
        self.lost
    }

    /// The JSONL line recording the window, ending now, with `refused`
    /// appends that were answered with an error.
    pub(crate) fn entry_line(&self, refused: u64) -> Result<Vec<u8>, AuditError> {
        let detail = format!(
            "the audit log could not be written from {} ({}); {refused} entries could not be \
             recorded and {} acknowledged entries were lost; chains go on from their last \
             written entry",
            self.since, self.error, self.lost
        );
        let record = AuditRecord::new(Uuid::new_v4().to_string(), ENFORCEMENT_STEP_TYPE)
            .decision_source(DecisionSource::Proxy)
            .reason_codes(vec![AUDIT_UNAVAILABLE_REASON.to_owned()])
            .action(Action::Recorded)
            .detail(detail);
        let session_id = format!("acs-proxy-audit-{}", Uuid::new_v4());
        Ok(ChainHead::default().link(&session_id, &record)?.line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_is_a_chain_of_one_that_names_the_window() {
        let mut outage = Outage::begin(&std::io::Error::from_raw_os_error(28));
        outage.lose(2);
        let line = outage.entry_line(5).unwrap();
        let entry: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(entry["entry_id"], "1");
        assert_eq!(entry["previous_hash"], serde_json::Value::Null);
        assert_eq!(entry["step_type"], ENFORCEMENT_STEP_TYPE);
        assert_eq!(entry["reason_codes"][0], AUDIT_UNAVAILABLE_REASON);
        let detail = entry["detail"].as_str().unwrap();
        assert!(
            detail.contains("5 entries could not be recorded"),
            "{detail}"
        );
        assert!(
            detail.contains("2 acknowledged entries were lost"),
            "{detail}"
        );
        assert!(
            crate::audit::entry_hash_of(&entry).unwrap() == entry["entry_hash"],
            "{entry}"
        );
    }
}
