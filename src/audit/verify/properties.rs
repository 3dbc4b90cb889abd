//! Property tests: for generated valid logs (several interleaved sessions,
//! each sealed), any single edit, deletion, inserted copy or swap of whole
//! lines is caught, at the line an independent oracle names.
//!
//! The oracle never hashes: it walks the lines knowing which session and
//! `entry_id` each one holds, and the first entry that is not its session's
//! next is where the chain breaks. A structural change the oracle finds no
//! break in leaves every session's own sequence intact (a swap of entries of
//! two sessions that do not meet in between), so verify must then accept
//! the log and report every chain as before.
use proptest::prelude::*;
use proptest::sample::Index;

use super::*;
use crate::audit::head::ChainHead;
use crate::audit::record::AuditRecord;
use crate::enforce::Action;
use crate::guardian::DecisionSource;

/// One line of a generated log, as the oracle sees it.
#[derive(Debug, Clone)]
struct Entry {
    session: String,
    entry_id: u64,
    entry_hash: String,
    sealing: bool,
    line: String,
}

/// A valid log: sessions of 2..=5 entries (start … end), interleaved.
fn log() -> impl Strategy<Value = Vec<Entry>> {
    (prop::collection::vec(2usize..=5, 1..=3), any::<u64>())
        .prop_map(|(lengths, seed)| build_log(&lengths, seed))
}

fn build_log(lengths: &[usize], mut seed: u64) -> Vec<Entry> {
    let mut remaining = lengths.to_vec();
    let mut heads: Vec<ChainHead> = lengths.iter().map(|_| ChainHead::default()).collect();
    let mut entries = Vec::new();
    while remaining.iter().any(|&left| left > 0) {
        let open: Vec<usize> = (0..lengths.len()).filter(|&s| remaining[s] > 0).collect();
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let session = open[(seed >> 33) as usize % open.len()];
        let position = lengths[session] - remaining[session];
        remaining[session] -= 1;
        let sealing = remaining[session] == 0;
        let step_type = match (position, sealing) {
            (_, true) => SESSION_END_STEP_TYPE,
            (0, false) => "steps/sessionStart",
            _ => "steps/toolCallRequest",
        };
        let record = AuditRecord::new(format!("req-{}", entries.len()), step_type)
            .decision("allow")
            .decision_source(DecisionSource::Embedded)
            .action(Action::Forwarded)
            .mcp_id(serde_json::json!(entries.len()));
        let name = format!("s{session}");
        let timestamp = format!("2026-12-02T11:15:{:02}.000Z", entries.len());
        let linked = heads[session].link_at(&name, &record, timestamp).unwrap();
        entries.push(Entry {
            session: name,
            entry_id: linked.tip.entry_id,
            entry_hash: linked.tip.hash.unwrap().as_str().to_owned(),
            sealing,
            line: String::from_utf8(linked.line)
                .unwrap()
                .trim_end()
                .to_owned(),
        });
    }
    entries
}

/// One tampering of whole lines.
#[derive(Debug, Clone)]
enum Tamper {
    /// Change one member's value of one entry.
    Edit(Index, Index),
    /// Remove one line.
    Delete(Index),
    /// Replay a copy of one line at some position.
    InsertCopy(Index, Index),
    /// Exchange two lines.
    Swap(Index, Index),
}

fn tamper() -> impl Strategy<Value = Tamper> {
    prop_oneof![
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Tamper::Edit(a, b)),
        any::<Index>().prop_map(Tamper::Delete),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Tamper::InsertCopy(a, b)),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Tamper::Swap(a, b)),
    ]
}

/// A different value of the same JSON type where there is one, so the edit
/// always changes the entry's canonical form.
fn altered(value: &Value) -> Value {
    match value {
        Value::Null => Value::String("x".into()),
        Value::Bool(b) => Value::Bool(!b),
        Value::Number(n) => Value::from(n.as_i64().map_or(-1, |n| n.wrapping_add(1))),
        Value::String(text) => Value::String(format!("{text}0")),
        Value::Array(items) => {
            let mut items = items.clone();
            items.push(Value::Null);
            Value::Array(items)
        }
        Value::Object(members) => {
            let mut members = members.clone();
            members.insert("tampered".into(), Value::Bool(true));
            Value::Object(members)
        }
    }
}

/// What verify must say about the tampered lines.
#[derive(Debug, PartialEq, Eq)]
enum Expected {
    /// The line (1-based) and kind of the first break.
    Broken { line: usize, kind: &'static str },
    /// No session's sequence changed.
    Intact,
}

fn kind_of(error: &VerifyError) -> &'static str {
    match error {
        VerifyError::Io { .. } => "io",
        VerifyError::NotJson { .. } => "not-json",
        VerifyError::Malformed { .. } => "malformed",
        VerifyError::Edited { .. } => "edited",
        VerifyError::Deleted { .. } => "deleted",
        VerifyError::Inserted { .. } => "inserted",
        VerifyError::Reordered { .. } => "reordered",
        VerifyError::Unlinked { .. } => "unlinked",
    }
}

/// The first entry that is not its session's next, and why.
fn oracle(entries: &[Entry]) -> Expected {
    let mut next: HashMap<&str, u64> = HashMap::new();
    for (index, entry) in entries.iter().enumerate() {
        let expected = next.entry(&entry.session).or_insert(1);
        if entry.entry_id == *expected {
            *expected += 1;
            continue;
        }
        let same_session = |other: &&Entry| other.session == entry.session;
        let copied = entries.iter().enumerate().any(|(other, e)| {
            other != index && same_session(&e) && e.entry_hash == entry.entry_hash
        });
        let expected_later = entries[index + 1..]
            .iter()
            .filter(same_session)
            .any(|e| e.entry_id == *expected);
        let kind = if entry.entry_id < *expected || copied {
            "inserted"
        } else if expected_later {
            "reordered"
        } else {
            "deleted"
        };
        return Expected::Broken {
            line: index + 1,
            kind,
        };
    }
    Expected::Intact
}

fn verify_entries(entries: &[Entry]) -> Result<VerifyReport, VerifyError> {
    let file = tempfile::NamedTempFile::new().unwrap();
    let text: String = entries.iter().map(|e| format!("{}\n", e.line)).collect();
    std::fs::write(file.path(), text).unwrap();
    verify_file(file.path())
}

/// Each session's entry count and seal, in order of first appearance.
fn chains(entries: &[Entry]) -> Vec<(String, u64, bool)> {
    let mut chains: Vec<(String, u64, bool)> = Vec::new();
    for entry in entries {
        match chains.iter_mut().find(|(name, ..)| *name == entry.session) {
            Some(chain) => {
                chain.1 += 1;
                chain.2 = entry.sealing;
            }
            None => chains.push((entry.session.clone(), 1, entry.sealing)),
        }
    }
    chains
}

fn reported_chains(report: &VerifyReport) -> Vec<(String, u64, bool)> {
    report
        .sessions
        .iter()
        .map(|s| (s.session_id.clone(), s.entries, s.sealed))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn generated_logs_verify(entries in log()) {
        let report = verify_entries(&entries).unwrap();
        prop_assert_eq!(report.entries, entries.len() as u64);
        prop_assert_eq!(reported_chains(&report), chains(&entries));
        prop_assert!(report.sessions.iter().all(|s| s.sealed));
    }

    #[test]
    fn any_single_tampering_is_found_at_the_right_line(entries in log(), tamper in tamper()) {
        let mut tampered = entries.clone();
        let expected = match &tamper {
            Tamper::Edit(line, member) => {
                let index = line.index(entries.len());
                let mut value: Value = serde_json::from_str(&entries[index].line).unwrap();
                let members = value.as_object_mut().unwrap();
                let name = members.keys().nth(member.index(members.len())).unwrap().clone();
                let new = altered(&members[&name]);
                members.insert(name, new);
                tampered[index].line = serde_json::to_string(&value).unwrap();
                Expected::Broken { line: index + 1, kind: "edited" }
            }
            Tamper::Delete(line) => {
                tampered.remove(line.index(entries.len()));
                oracle(&tampered)
            }
            Tamper::InsertCopy(source, position) => {
                let copy = entries[source.index(entries.len())].clone();
                tampered.insert(position.index(entries.len() + 1), copy);
                oracle(&tampered)
            }
            Tamper::Swap(first, second) => {
                tampered.swap(first.index(entries.len()), second.index(entries.len()));
                oracle(&tampered)
            }
        };
        match (verify_entries(&tampered), expected) {
            (Err(error), Expected::Broken { line, kind }) => {
                prop_assert_eq!(error.line(), Some(line), "{}", error);
                prop_assert_eq!(kind_of(&error), kind, "{}", error);
            }
            (Ok(report), Expected::Intact) => match tamper {
                // Removing a session's last entry breaks no link; the lost
                // seal is what shows it.
                Tamper::Delete(line) => {
                    let removed = &entries[line.index(entries.len())];
                    prop_assert!(removed.sealing);
                    let chains = reported_chains(&report);
                    let unsealed = chains.iter().any(|(name, _, sealed)| *name == removed.session && !sealed);
                    let vanished = chains.iter().all(|(name, ..)| *name != removed.session);
                    prop_assert!(unsealed || vanished, "deletion of a seal went unseen: {:?}", chains);
                }
                // Only a swap of two sessions' entries can keep every chain
                // intact, and then each is reported exactly as before.
                Tamper::Swap(..) => {
                    prop_assert_eq!(report.entries, entries.len() as u64);
                    let mut before = chains(&entries);
                    let mut after = reported_chains(&report);
                    before.sort();
                    after.sort();
                    prop_assert_eq!(after, before);
                }
                other => prop_assert!(false, "{:?} went unseen", other),
            },
            (outcome, expected) => {
                prop_assert!(false, "verify said {:?}, oracle expected {:?}", outcome, expected);
            }
        }
    }
}
