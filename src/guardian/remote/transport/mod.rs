//! Byte transports to a remote ACS Guardian: one JSON-RPC request (or batch
//! array) in, its reply out, over HTTP(S) or a stdio child.
//!
//! - [`http`]: one `POST` per call on a pooled connection (HTTP/2 over TLS
//!   when offered), sent once more on a new connection when the pooled one
//!   closes under it before the answer, with [`tls`] for private CAs and
//!   mutual TLS.
//! - [`stdio`]: a Guardian child speaking [`framing`]'s `Content-Length`
//!   frames, with calls pipelined and matched to replies by JSON-RPC id,
//!   each request written by its calling task.
//! - [`error`]: why no reply came, classified for the caller.
//!
//! Transports apply no deadline of their own: the caller wraps each call in
//! its decision timeout and simply drops the future when it fires, which
//! every transport here tolerates without harm to later calls.

mod call_id;
pub mod error;
pub mod framing;
pub mod http;
mod pending;
mod request_pipe;
pub mod stdio;
pub mod tls;

#[cfg(test)]
use crate::transport::client_tls::test_pki;
#[cfg(test)]
mod test_server;

use bytes::Bytes;
use futures_util::future::BoxFuture;

pub use error::TransportError;
pub use http::HttpTransport;
pub use stdio::StdioTransport;
pub use tls::TlsSettings;

/// Carries one JSON-RPC exchange with the Guardian, as bytes.
///
/// The ACS client above builds, signs and checks the JSON; a transport only
/// moves it, so each can be tested alone and swapped by configuration.
pub trait GuardianTransport: Send + Sync {
    /// Sends one JSON-RPC request, or a batch array, and returns the reply
    /// body unparsed. Cancel-safe: dropping the future (the caller's
    /// timeout) abandons this call only.
    fn call<'a>(&'a self, body: Bytes) -> BoxFuture<'a, Result<Bytes, TransportError>>;

    /// The ACS transport name (`http`, `https` or `stdio`), as ACS's
    /// `selected_transport` spells it, for logs, audit and metrics.
    fn name(&self) -> &'static str;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boxed<T: GuardianTransport + 'static>(transport: T) -> Box<dyn GuardianTransport> {
        Box::new(transport)
    }

    #[test]
    fn both_transports_serve_as_trait_objects() {
        let http = HttpTransport::new("http://127.0.0.1:8787/acs", TlsSettings::default());
        assert_eq!(boxed(http.unwrap()).name(), "http");
        // StdioTransport needs a runtime and a child; coercion is what matters.
        let _: fn(StdioTransport) -> Box<dyn GuardianTransport> = boxed::<StdioTransport>;
    }
}
