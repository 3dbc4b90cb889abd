//! JSON-RPC 2.0 as the proxy needs it: a cheap *peek* at each frame (kind,
//! id, method) that borrows from the original bytes, and builders for the
//! error replies the proxy itself writes.
//!
//! The proxy never re-serializes a message it lets through unchanged; the
//! peek only tells the relay where a message belongs.

mod error;
mod message;

pub use error::{codes, error_response};
pub use message::{peek_frame, Frame, Message, MessageKind, PeekError, RequestId};
