//! Applying a decision to a message: forward it, block it with a reply,
//! rewrite it (MODIFY, §6.3), or hold it for an approver (ASK / DEFER).
//! Nothing here decides anything.

pub mod approval;
pub mod integrity;
pub mod modify;
pub mod reply;

use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

/// Defined with the audit entry that records it.
pub use crate::audit::Action;

/// An MCP message on its way through the hook pipeline: the original bytes,
/// and a parsed copy that stages may rewrite.
#[derive(Debug, Clone)]
pub struct MessageDoc {
    original: Bytes,
    /// The message as a tree (key order and number digits preserved),
    /// shared with the hooks built from it; a stage that rewrites it gets
    /// its own copy through [`MessageDoc::value_mut`].
    pub value: Arc<Value>,
    rewritten: bool,
}

impl MessageDoc {
    /// Wraps a message read from a peer.
    pub fn new(original: Bytes, value: Value) -> Self {
        Self {
            original,
            value: Arc::new(value),
            rewritten: false,
        }
    }

    /// The tree for rewriting; copied first only while a hook still holds
    /// the version it was asked about.
    pub fn value_mut(&mut self) -> &mut Value {
        Arc::make_mut(&mut self.value)
    }

    /// Marks the tree as changed, so [`MessageDoc::into_bytes`] re-serializes it.
    pub fn mark_rewritten(&mut self) {
        self.rewritten = true;
    }

    /// Whether a stage changed the message.
    pub fn is_rewritten(&self) -> bool {
        self.rewritten
    }

    /// The bytes to forward: the original ones unless a stage rewrote the
    /// message (allowed messages reach the other side byte-identical).
    pub fn into_bytes(self) -> Bytes {
        if self.rewritten {
            Bytes::from(self.value.to_string())
        } else {
            self.original
        }
    }
}
