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

use crate::jsonrpc::MessageTree;

/// Defined with the audit entry that records it.
pub use crate::audit::Action;

/// An MCP message on its way through the hook pipeline: its tree, which
/// the hooks built from it share, and the edit a stage is making to it.
#[derive(Debug, Clone)]
pub struct MessageDoc {
    tree: Arc<MessageTree>,
    /// The message being rewritten, until [`MessageDoc::mark_rewritten`]
    /// makes it the message.
    edit: Option<Value>,
    rewritten: bool,
}

impl MessageDoc {
    /// Wraps a message read from a peer.
    pub fn new(tree: Arc<MessageTree>) -> Self {
        Self {
            tree,
            edit: None,
            rewritten: false,
        }
    }

    /// The message as its hooks read it; shared with the hooks built
    /// from it.
    pub fn tree(&self) -> &Arc<MessageTree> {
        &self.tree
    }

    /// The message as a `Value` (built on first use), for the consumers
    /// that need one.
    pub fn value(&self) -> &Value {
        self.tree.value()
    }

    /// The message for rewriting: a copy, which
    /// [`MessageDoc::mark_rewritten`] makes the message once the rewrite
    /// is complete. Hooks built before keep the version they were asked
    /// about.
    pub fn value_mut(&mut self) -> &mut Value {
        let tree = &self.tree;
        self.edit.get_or_insert_with(|| tree.to_value())
    }

    /// Makes the rewrite the message: the next hooks read it, and
    /// [`MessageDoc::into_bytes`] sends its compact text.
    pub fn mark_rewritten(&mut self) {
        if let Some(edit) = self.edit.take() {
            self.tree = Arc::new(MessageTree::from_value(edit));
        }
        self.rewritten = true;
    }

    /// Whether a stage changed the message.
    pub fn is_rewritten(&self) -> bool {
        self.rewritten
    }

    /// The bytes to forward: the original ones unless a stage rewrote the
    /// message (allowed messages reach the other side byte-identical).
    pub fn into_bytes(self) -> Bytes {
        self.tree.bytes().clone()
    }
}
