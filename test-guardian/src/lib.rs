//! `acs-test-guardian`: a scriptable test double of an ACS v0.1.0 Guardian.
//!
//! It speaks the real ACS wire (JSON-RPC 2.0 over HTTP `POST` or
//! Content-Length-framed stdio), verifies and produces HMAC-SHA256 envelope
//! signatures, keeps a per-session audit chain and replay history, and lets
//! a JSON script make it allow, deny, modify, ask, defer, answer late or
//! wrongly, return errors or drop the connection. It is written
//! independently of acs-proxy so a signing or chaining bug on either side
//! shows up in the integration tests. The command-line interface is
//! documented in README.md; this library face exists for the crate's own
//! tests and for the binary.

pub mod chain;
pub mod closing;
pub mod decide;
pub mod guardian;
pub mod hello;
pub mod http;
pub mod jcs;
pub mod record;
pub mod reply;
pub mod request;
pub mod script;
pub mod session;
pub mod signing;
pub mod stdio;

/// The ACS version this Guardian speaks.
pub const ACS_VERSION: &str = "0.1.0";

/// The liveness method: unsigned, never chained, always allowed.
pub const PING: &str = "system/ping";

/// The handshake method.
pub const HELLO: &str = "handshake/hello";

/// Writes one diagnostic line to stderr (stdout may be the stdio transport).
pub fn log(message: &str) {
    eprintln!("acs-test-guardian: {message}");
}
