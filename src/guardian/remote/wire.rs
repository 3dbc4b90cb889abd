//! What goes over the ACS wire besides hook payloads: the handshake
//! (ClientHello out, ServerHello in), decision and ping replies, and the
//! ACS error codes (DIGEST §1.5, §2–§4, checklist §16).
//!
//! Replies are validated before anything in them is used: a reply that is
//! bound to another request, has the wrong shape or breaks a rule of the
//! spec becomes a [`WireError`], which the caller treats as a decision
//! failure. Members the spec does not define are ignored (§3, §4), and so
//! is a JSON `null` where a member is optional, because the Go reference
//! marshals some empty lists as `null`.
//!
//! Each rule reads the reply through [`JsonView`](super::json_view::JsonView),
//! so it holds alike for a decision reply parsed from its bytes
//! ([`BorrowedJson`](crate::jsonrpc::BorrowedJson), which has
//! already refused a key repeated in any object) and for a `Value`.
//!
//! Signatures are checked separately, on the same parsed reply, by
//! [`signing::verify_signed`](super::signing::verify_signed).

pub mod codes;

mod client_hello;
mod decision;
mod error;
mod fields;
mod frame;
mod ping;
mod server_hello;
mod transport;

pub use client_hello::{client_hello_payload, DEFAULT_PROFILES};
pub use decision::{parse_decision, read_decision_object, Reply};
pub use error::WireError;
pub use frame::{check_reply_id, AcsError};
pub use ping::{parse_ping, Pong};
pub use server_hello::{parse_server_hello, ServerHello, TimeoutConfig, DEFAULT_SKEW_WINDOW_MS};
pub use transport::Transport;
