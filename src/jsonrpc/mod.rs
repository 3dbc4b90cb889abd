//! JSON-RPC 2.0 as the proxy needs it: a cheap *peek* at each frame (kind,
//! id, method) that borrows from the original bytes, and builders for the
//! error replies the proxy itself writes.
//!
//! The proxy never re-serializes a message it lets through unchanged; the
//! peek only tells the relay where a message belongs. Before the peek, one
//! pass (`scan`) checks UTF-8 and nesting depth. The peek reads a message
//! from the tree its hooks read ([`MessageTree`], borrowed from the
//! message's bytes), which then goes with it, so a governed message is
//! parsed once; that tree refuses duplicate keys, as does the `Value` a
//! message is parsed into where one is needed (`strict`).

pub mod borrowed;
mod direction;
mod error;
mod members;
mod message;
mod named;
mod request_id;
mod scan;
mod strict;
mod tree;

pub use borrowed::{BorrowedJson, BorrowedObject};
pub use direction::Direction;
pub use error::{codes, error_response};
pub use members::{leading_member, locate_members};
pub use message::{peek_frame, peek_frame_within, Frame, Message, MessageKind, PeekError};
pub use named::{peek_named_request, NamedRequest};
pub use request_id::RequestId;
pub use scan::{scan, ScanError, DEFAULT_MAX_JSON_DEPTH, MAX_JSON_DEPTH_CEILING};
pub use tree::MessageTree;
