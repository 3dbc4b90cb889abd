//! Tamper-detection tests: every kind of edit to a log is found at its line.
use super::*;
use crate::audit::chain::entry_hash_of;
use crate::audit::head::ChainHead;
use crate::audit::record::AuditRecord;
use crate::enforce::Action;
use crate::guardian::DecisionSource;

/// Ten entries, sessions "a" and "b" alternating: "a" owns lines
/// 1,3,5,7,9 (ids 1–5, sealed) and "b" lines 2,4,6,8,10.
fn sample_lines() -> Vec<String> {
    let mut heads = [ChainHead::default(), ChainHead::default()];
    (0..10)
        .map(|index| {
            let session = index % 2;
            let step_type = match (index / 2, session) {
                (0, _) => "steps/sessionStart",
                (4, 0) => SESSION_END_STEP_TYPE,
                _ => "steps/toolCallRequest",
            };
            let record = AuditRecord::new(format!("req-{index}"), step_type)
                .decision("allow")
                .decision_source(DecisionSource::Embedded)
                .action(Action::Forwarded)
                .mcp_id(serde_json::json!(index));
            let timestamp = format!("2026-12-02T11:15:{index:02}.000Z");
            let linked = heads[session]
                .link_at(["a", "b"][session], &record, timestamp)
                .unwrap();
            String::from_utf8(linked.line)
                .unwrap()
                .trim_end()
                .to_owned()
        })
        .collect()
}

fn verify_lines(lines: &[String]) -> Result<VerifyReport, VerifyError> {
    verify_text(&(lines.join("\n") + "\n"))
}

fn verify_text(text: &str) -> Result<VerifyReport, VerifyError> {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), text).unwrap();
    verify_file(file.path())
}

fn set_member(line: &str, member: &str, value: Value) -> String {
    let mut entry: Value = serde_json::from_str(line).unwrap();
    entry[member] = value;
    serde_json::to_string(&entry).unwrap()
}

#[test]
fn intact_log_verifies_with_heads_and_seal() {
    let lines = sample_lines();
    let report = verify_lines(&lines).unwrap();
    assert_eq!(report.entries, 10);
    assert_eq!(report.torn_tail, None);
    let [a, b] = report.sessions.as_slice() else {
        panic!("two sessions: {report:?}")
    };
    assert_eq!(
        (a.session_id.as_str(), a.entries, a.sealed, a.last_line),
        ("a", 5, true, 9)
    );
    assert_eq!(
        (b.session_id.as_str(), b.entries, b.sealed, b.last_line),
        ("b", 5, false, 10)
    );
    let last_b: Value = serde_json::from_str(&lines[9]).unwrap();
    assert_eq!(b.head, last_b["entry_hash"]);
}

#[test]
fn empty_log_verifies() {
    let report = verify_text("").unwrap();
    assert_eq!((report.entries, report.sessions.len()), (0, 0));
}

#[test]
fn edit_of_any_entry_is_found_at_its_line() {
    for member in ["step_id", "timestamp", "decision", "entry_id", "session_id"] {
        for index in 0..10 {
            let mut lines = sample_lines();
            lines[index] = set_member(&lines[index], member, Value::String("9".into()));
            let error = verify_lines(&lines).unwrap_err();
            assert!(
                matches!(error, VerifyError::Edited { line, .. } if line == index + 1),
                "{member} at line {}: {error}",
                index + 1
            );
        }
    }
}

#[test]
fn edit_of_chain_members_is_found_at_its_line() {
    let mut lines = sample_lines();
    let other_hash = Value::String("00".repeat(32));
    lines[4] = set_member(&lines[4], "previous_hash", other_hash.clone());
    lines[7] = set_member(&lines[7], "entry_hash", other_hash);
    assert_eq!(verify_lines(&lines).unwrap_err().line(), Some(5));
    lines[4] = sample_lines()[4].clone();
    assert_eq!(verify_lines(&lines).unwrap_err().line(), Some(8));
}

#[test]
fn deleted_entry_is_found_at_the_next_entry_of_its_session() {
    // Removing line 3 (a#2) makes a#3, now line 4, the first misfit.
    let mut lines = sample_lines();
    lines.remove(2);
    let error = verify_lines(&lines).unwrap_err();
    assert!(
        matches!(
            error,
            VerifyError::Deleted {
                line: 4,
                expected: 2,
                found: 3,
                ..
            }
        ),
        "{error}"
    );

    let mut lines = sample_lines();
    lines.remove(0);
    let error = verify_lines(&lines).unwrap_err();
    assert!(
        matches!(
            error,
            VerifyError::Deleted {
                line: 2,
                expected: 1,
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn deleting_a_sealed_chains_end_shows_as_unsealed() {
    let mut lines = sample_lines();
    lines.remove(8);
    let report = verify_lines(&lines).unwrap();
    assert!(!report.sessions[0].sealed);
}

#[test]
fn inserted_copy_is_found_at_the_copy() {
    // A copy of a#2 (line 3) placed after line 6 becomes line 7.
    let mut lines = sample_lines();
    lines.insert(6, lines[2].clone());
    let error = verify_lines(&lines).unwrap_err();
    assert!(
        matches!(
            error,
            VerifyError::Inserted {
                line: 7,
                entry_id: 2,
                other_line: Some(3),
                ..
            }
        ),
        "{error}"
    );

    // A copy of a#4 (line 7) placed before line 2 is caught there too.
    let mut lines = sample_lines();
    lines.insert(1, lines[6].clone());
    let error = verify_lines(&lines).unwrap_err();
    assert!(
        matches!(
            error,
            VerifyError::Inserted {
                line: 2,
                entry_id: 4,
                other_line: Some(8),
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn swapped_entries_are_found_at_the_first_of_them() {
    for (first, second) in [(2, 6), (4, 6), (1, 9)] {
        let mut lines = sample_lines();
        lines.swap(first, second);
        let error = verify_lines(&lines).unwrap_err();
        assert!(
            matches!(error, VerifyError::Reordered { line, expected_at, .. }
                if line == first + 1 && expected_at == second + 1),
            "swap {first}/{second}: {error}"
        );
    }
}

#[test]
fn rehashed_forgery_is_found_at_the_entry_after_it() {
    let mut lines = sample_lines();
    let mut forged: Value = serde_json::from_str(&lines[4]).unwrap();
    forged["decision"] = Value::String("deny".into());
    forged["entry_hash"] = Value::String(entry_hash_of(&forged).unwrap());
    lines[4] = serde_json::to_string(&forged).unwrap();
    let error = verify_lines(&lines).unwrap_err();
    assert!(
        matches!(
            error,
            VerifyError::Unlinked {
                line: 7,
                previous_line: Some(5),
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn non_json_and_non_entries_are_errors() {
    let mut lines = sample_lines();
    lines[3] = "{\"entry_id\": ".into();
    let error = verify_lines(&lines).unwrap_err();
    assert!(
        matches!(error, VerifyError::NotJson { line: 4, .. }),
        "{error}"
    );

    lines[3] = "{\"entry_id\": \"01\", \"session_id\": \"b\", \"entry_hash\": \"\"}".into();
    let error = verify_lines(&lines).unwrap_err();
    assert!(
        matches!(error, VerifyError::Malformed { line: 4, .. }),
        "{error}"
    );
}

#[test]
fn torn_tail_is_reported_then_repaired() {
    let lines = sample_lines();
    let intact = lines.join("\n") + "\n";
    let torn_part = &lines[0][..40];
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), format!("{intact}{torn_part}")).unwrap();

    let report = verify_file(file.path()).unwrap();
    assert_eq!(report.entries, 10);
    assert_eq!(
        report.torn_tail,
        Some(TornTail {
            line: 11,
            offset: intact.len() as u64,
            bytes: 40
        })
    );

    assert_eq!(repair_torn_tail(file.path()).unwrap(), Some(40));
    assert_eq!(std::fs::read_to_string(file.path()).unwrap(), intact);
    assert_eq!(verify_file(file.path()).unwrap().torn_tail, None);
    assert_eq!(repair_torn_tail(file.path()).unwrap(), None);
}

#[test]
fn cut_line_followed_by_more_is_an_error_not_a_torn_tail() {
    let lines = sample_lines();
    let text = format!("{}\n{}\n", &lines[0][..40], lines[1..].join("\n"));
    let error = verify_text(&text).unwrap_err();
    assert!(
        matches!(error, VerifyError::NotJson { line: 1, .. }),
        "{error}"
    );
}

#[test]
fn unterminated_whole_last_entry_still_counts() {
    let lines = sample_lines();
    let report = verify_text(&lines.join("\n")).unwrap();
    assert_eq!((report.entries, report.torn_tail), (10, None));
}

#[test]
fn missing_file_error_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.jsonl");
    let error = verify_file(&path).unwrap_err();
    assert!(error.to_string().contains("absent.jsonl"), "{error}");
    assert_eq!(error.line(), None);
}
