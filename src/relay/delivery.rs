//! What deciding a message yields, and where its bytes go: the values the
//! pump queues and the flow and stages produce. Kept apart so the pump, the
//! flow and the stages all import it and none imports another for it.

use bytes::Bytes;

use crate::jsonrpc::RequestId;

/// Where a frame goes once its message has been decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// On to the other side.
    Forward(Bytes),
    /// On to the other side: the answer to its request `id`, which a
    /// writer may route by (a virtual server's leg does).
    Answer(Bytes, RequestId),
    /// Back to the sender (a blocked request's reply, an error).
    Reply(Bytes),
}

/// What a slot resolves to.
#[derive(Debug)]
pub enum Outcome {
    /// Write these now, in order.
    Deliver(Vec<Delivery>),
    /// The message was held; it will be written directly when resolved.
    Detached,
}
