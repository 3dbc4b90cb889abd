//! Framing and connections: bytes in, bytes out. Nothing here knows about
//! hooks or policy.
//!
//! - [`line`](mod@line): MCP's stdio framing (one JSON message per
//!   `\n`-terminated line) with a hard size limit that never buffers an
//!   oversized line.
//! - [`writer`]: the task that owns one outgoing byte stream.
//! - [`downstream`] and [`upstream`]: the two sides of a session as the
//!   relay sees them, whatever carries them.
//! - [`stdio`]: the proxy's own stdin/stdout as the downstream side.
//! - [`child`]: an upstream MCP server spawned as a child process.
//! - [`shared_child`]: one such server shared by every session of a route.
//! - [`client_tls`]: TLS for the proxy as a client, of an upstream or of a
//!   remote Guardian.
//! - [`http`], [`sse`], [`ws`]: the network transports, each with a server
//!   (agents reach the proxy) and a client (the proxy reaches a server).
//! - [`connect`]: picks the upstream implementation a route names; it sits
//!   above them all, so none of them imports it back.

pub mod child;
pub mod client_tls;
pub mod connect;
pub mod downstream;
pub mod http;
pub mod line;
pub mod shared_child;
pub mod sse;
pub mod stdio;
pub mod upstream;
pub mod writer;
pub mod ws;

pub use line::{LineCodec, LineFrame};
