//! The requests of one POST still waiting for their responses.

use tokio::sync::oneshot;

use super::message::{id_key, Incoming, Outgoing};
use crate::jsonrpc::RequestId;

/// The requests of one POST still waiting for their responses.
#[derive(Debug, Default)]
pub(super) struct Pending {
    pub(super) requests: Vec<(String, RequestId)>,
    /// The key of an `initialize` request among them.
    pub(super) initialize: Option<String>,
    /// Opened once `initialize` is answered (or given up).
    pub(super) gate: Option<oneshot::Sender<()>>,
    /// A message on the stream passed the size limit (it may have been
    /// the response).
    pub(super) oversized: bool,
}

impl Pending {
    pub(super) fn new(out: &Outgoing, gate: Option<oneshot::Sender<()>>) -> Self {
        let requests: Vec<_> = out
            .requests
            .iter()
            .map(|id| (id_key(id), id.clone()))
            .collect();
        Self {
            initialize: out
                .initialize
                .then(|| requests.first().map(|(key, _)| key.clone()))
                .flatten(),
            requests,
            gate,
            oversized: false,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    pub(super) fn contains(&self, key: &str) -> bool {
        self.requests.iter().any(|(k, _)| k == key)
    }

    pub(super) fn answer(&mut self, incoming: &Incoming) {
        self.requests
            .retain(|(key, _)| !incoming.answers.iter().any(|a| a == key));
    }
}
