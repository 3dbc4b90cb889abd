//! The open legacy sessions by id: a `POST <endpoint>/message` finds its
//! session here by `sessionId`. The listener's shared state owns the
//! table, so it lives apart from the handlers, which use that state.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio_util::sync::CancellationToken;

use crate::transport::http::server::{FrameSender, Principal};

/// One open legacy session: where its messages go, and who may post them.
pub(super) struct LegacySession {
    /// The upstream route the session was opened on.
    pub(super) route: Arc<str>,
    /// Who opened it; only they may post to it.
    pub(super) principal: Option<Principal>,
    /// Frames from the agent, into the relay.
    pub(super) frames: FrameSender,
    /// Fired when the session ends, ending its stream.
    pub(super) ended: CancellationToken,
}

/// Open legacy sessions by id.
#[derive(Default)]
pub(crate) struct LegacyTable {
    map: Mutex<HashMap<String, LegacySession>>,
}

impl LegacyTable {
    /// The sessions, locked.
    pub(super) fn lock(&self) -> MutexGuard<'_, HashMap<String, LegacySession>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Ends the session `id` (its stream went away).
    pub(super) fn remove(&self, id: &str) {
        if let Some(session) = self.lock().remove(id) {
            session.ended.cancel();
        }
    }

    /// Ends every legacy session (shutdown).
    pub(crate) fn close_all(&self) {
        for (_, session) in self.lock().drain() {
            session.ended.cancel();
        }
    }
}
