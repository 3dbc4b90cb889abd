//! The second pass over a log whose entry ids went out of sequence: where
//! the ids involved sit elsewhere tells deletion, insertion and reordering
//! apart.

use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use serde_json::Value;

use super::read::{io_error, Gap, Lines, Stored};
use super::VerifyError;

/// Tells apart why an entry id is out of sequence by looking at where the
/// session's other entries with the ids involved are.
pub(super) fn classify(path: &Path, gap: Gap) -> Result<VerifyError, VerifyError> {
    let sightings = find_entries(path, &gap.session_id, &[gap.expected, gap.found])?;
    let elsewhere = |id: u64| {
        sightings
            .iter()
            .filter(move |s| s.entry_id == id && s.line != gap.line)
    };
    let copy = elsewhere(gap.found).find(|s| s.entry_hash == gap.entry_hash);
    let earlier_same_id = elsewhere(gap.found).find(|s| s.line < gap.line);
    if copy.is_some() || gap.found < gap.expected {
        let other_line = copy.or(earlier_same_id).map(|s| s.line);
        return Ok(VerifyError::Inserted {
            line: gap.line,
            session_id: gap.session_id,
            entry_id: gap.found,
            other_line,
        });
    }
    if let Some(later) = elsewhere(gap.expected).find(|s| s.line > gap.line) {
        return Ok(VerifyError::Reordered {
            line: gap.line,
            session_id: gap.session_id,
            expected: gap.expected,
            found: gap.found,
            expected_at: later.line,
        });
    }
    Ok(VerifyError::Deleted {
        line: gap.line,
        session_id: gap.session_id,
        expected: gap.expected,
        found: gap.found,
    })
}

/// Where an entry of interest sits.
struct Sighting {
    line: usize,
    entry_id: u64,
    entry_hash: String,
}

/// Every line of `session_id` whose entry id is one of `ids`; lines that do
/// not parse are skipped, as the first pass already judged those before.
fn find_entries(path: &Path, session_id: &str, ids: &[u64]) -> Result<Vec<Sighting>, VerifyError> {
    let file = File::open(path).map_err(io_error(path))?;
    let mut sightings = Vec::new();
    for line in Lines::new(BufReader::new(file)) {
        let line = line.map_err(io_error(path))?;
        let Ok(value) = serde_json::from_slice::<Value>(&line.bytes) else {
            continue;
        };
        let Ok(stored) = Stored::parse(line.number, &value) else {
            continue;
        };
        if stored.session_id == session_id && ids.contains(&stored.entry_id) {
            sightings.push(Sighting {
                line: line.number,
                entry_id: stored.entry_id,
                entry_hash: stored.entry_hash,
            });
        }
    }
    Ok(sightings)
}
