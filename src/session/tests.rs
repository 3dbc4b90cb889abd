use super::*;

fn request() -> PendingRequest {
    PendingRequest {
        method: "tools/call".into(),
        tool: None,
        started: Instant::now(),
        step_request_id: None,
        state: PendingState::Deciding,
        cancel: CancellationToken::new(),
        admitted: None,
        trace: Trace::off(),
        upstream_trace: Trace::off(),
    }
}

#[test]
fn duplicate_ids_are_refused_while_pending() {
    let table = PendingTable::default();
    let id = RequestId::from_json("1");
    assert_eq!(table.insert(id.clone(), request()), Ok(()));
    assert_eq!(
        table.insert(id.clone(), request()),
        Err(AdmissionError::DuplicateId)
    );
    table.remove(&id);
    assert_eq!(table.insert(id, request()), Ok(()));
}

#[test]
fn a_limited_table_gives_its_slots_back() {
    let budget = Arc::new(RequestBudget::new(&crate::config::LimitsConfig {
        max_requests_per_session: Some(1),
        max_requests_total: Some(1),
        ..crate::config::LimitsConfig::default()
    }));
    let table = PendingTable::limited(budget.clone());
    let other = PendingTable::limited(budget.clone());
    assert_eq!(table.insert(RequestId::from_json("1"), request()), Ok(()));
    assert_eq!(
        table.insert(RequestId::from_json("2"), request()),
        Err(AdmissionError::Limit(LimitExceeded::SessionRequests {
            max: 1
        }))
    );
    assert_eq!(
        other.insert(RequestId::from_json("1"), request()),
        Err(AdmissionError::Limit(LimitExceeded::GlobalRequests {
            max: 1
        }))
    );
    assert_eq!(table.drain().len(), 1);
    assert_eq!(budget.in_flight(), 0);
    assert_eq!(other.insert(RequestId::from_json("1"), request()), Ok(()));
}

#[test]
fn blocked_ids_are_remembered_boundedly() {
    let table = PendingTable::default();
    for n in 0..(BLOCKED_MEMORY + 10) {
        table.remove_blocked(&RequestId::from_json(&n.to_string()));
    }
    assert!(!table.was_blocked(&RequestId::from_json("0")));
    assert!(table.was_blocked(&RequestId::from_json(&(BLOCKED_MEMORY + 9).to_string())));
}

#[test]
fn proxy_ids_are_routed_to_their_waiter() {
    let requests = ProxyRequests::default();
    let (id, mut rx) = requests.register();
    assert!(id.as_json().starts_with(PROXY_ID_PREFIX));
    assert!(requests.complete(&id, Bytes::from_static(b"{}")));
    assert_eq!(rx.try_recv().unwrap(), Bytes::from_static(b"{}"));
    assert!(!requests.complete(&RequestId::from_json("7"), Bytes::new()));
}
