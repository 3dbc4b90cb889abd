//! Re-handshaking with a Guardian that was unreachable.
//!
//! A Guardian that could not be connected to may have restarted, and a
//! restarted Guardian knows nothing of the session: neither its handshake
//! nor its chain. So after a failed connection the session's next hook is
//! preceded by a fresh `handshake/hello`, and the chain head the proxy
//! witnesses starts over with the new Guardian's answers. Until the
//! Guardian answers again every hook fails in transport and the relay
//! applies the session's failure posture, as for any other failure. A
//! connection the Guardian dropped mid-exchange is not such a sign: the
//! same process still holds the session, so nothing starts over.
//!
//! The session keeps the contract it negotiated first (methods evaluated,
//! timeouts, posture): the relay enforces that one from its start.

use super::{RemoteGuardian, RemoteSession};
use crate::guardian::GuardianError;
use crate::hooks::Metadata;

impl RemoteGuardian {
    /// Marks the session for a re-handshake: no connection to the
    /// Guardian could be made.
    pub(super) fn mark_unreachable(&self, metadata: &Metadata) {
        self.with_session(metadata, |session| session.unreachable = true);
    }

    /// Re-handshakes first if the last exchange could not reach the
    /// Guardian; the error of a failed re-handshake is the hook's failure.
    pub(super) async fn rehandshake_if_needed(
        &self,
        metadata: &Metadata,
    ) -> Result<(), GuardianError> {
        let Some(mcp_version) = self.with_session(metadata, |session| {
            std::mem::take(&mut session.unreachable).then(|| session.mcp_version.clone())
        }) else {
            return Ok(());
        };
        match self.hello_exchange(metadata, mcp_version.as_deref()).await {
            Ok(_) => {
                self.with_session(metadata, |session| session.chain_head = None);
                tracing::info!(
                    session = %metadata.session_id,
                    "the Guardian answers again; the session re-handshook"
                );
                Ok(())
            }
            Err(err) => {
                self.with_session(metadata, |session| session.unreachable = true);
                Err(err)
            }
        }
    }

    /// Runs `change` on the session's state (created if new).
    pub(super) fn with_session<R>(
        &self,
        metadata: &Metadata,
        change: impl FnOnce(&mut RemoteSession) -> R,
    ) -> R {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        change(self.session_entry(&mut sessions, metadata))
    }
}
