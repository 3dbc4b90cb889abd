//! Why a Guardian transport could not be built, or why one call produced no
//! reply.

use std::sync::Arc;

use crate::transport::client_tls::TlsError;

/// A transport failure, classified so the caller can tell the causes apart
/// (for metrics, audit and operator messages); every variant means "no reply
/// arrived", so each one leads to the session's failure posture.
///
/// It is `Clone` because one broken stdio pipe fails every call waiting on
/// it with the same cause.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TransportError {
    /// The settings cannot work: an empty command, a bad URL, a client
    /// certificate without its key.
    #[error("invalid Guardian transport settings: {0}")]
    Config(String),
    /// A certificate or key file could not be read or holds nothing usable
    /// (the TLS settings' own error, which names the file).
    #[error(transparent)]
    TlsFile(TlsError),
    /// The Guardian program could not be started.
    #[error("cannot start the Guardian `{program}`: {source}")]
    Spawn {
        /// The program named in the command.
        program: String,
        /// The OS error.
        source: Arc<std::io::Error>,
    },
    /// No connection could be made: refused, unreachable, unresolvable, or
    /// the connect timeout passed. Refusals are reported at once.
    #[error("cannot connect to the Guardian: {0}")]
    Connect(String),
    /// The TLS handshake or session failed: an untrusted or mismatched
    /// server certificate, or the Guardian refused our client certificate.
    #[error("TLS failure with the Guardian: {0}")]
    Tls(String),
    /// The Guardian answered with an HTTP status other than 200 (ACS
    /// Guardians answer 200 for every JSON-RPC reply, errors included).
    #[error("the Guardian answered HTTP {status}")]
    Status {
        /// The HTTP status code.
        status: u16,
    },
    /// The Guardian went away: it closed the connection or its stdout, or
    /// its process exited. For stdio every later call fails the same way.
    /// Over HTTP, when the connection closed before the answer began, the
    /// request has already been sent once more on a new connection (see
    /// [`super::http`]): this is what remained.
    #[error("the Guardian connection closed: {0}")]
    Closed(String),
    /// Reading from or writing to the Guardian failed.
    #[error("I/O error with the Guardian: {0}")]
    Io(Arc<std::io::Error>),
    /// A message exceeded the size limit; it was refused without being
    /// buffered.
    #[error("a {length}-byte message exceeds the {max}-byte limit")]
    FrameTooLarge {
        /// The size the peer announced (or that the request has).
        length: u64,
        /// The limit in force.
        max: usize,
    },
    /// The bytes broke the framing rules, so the stream cannot be trusted
    /// any further.
    #[error("malformed framing from the Guardian: {0}")]
    Malformed(String),
    /// The request cannot be matched to a reply (stdio needs a JSON-RPC
    /// `id`, or a batch whose first element has one).
    #[error("cannot match a reply to this request: {0}")]
    Unroutable(&'static str),
    /// A call with the same JSON-RPC id is already waiting; ids must be
    /// unique among calls in flight.
    #[error("a call with JSON-RPC id {0} is already waiting")]
    DuplicateId(String),
}

impl From<TlsError> for TransportError {
    fn from(err: TlsError) -> Self {
        match err {
            TlsError::Config(reason) => TransportError::Config(reason),
            pem @ TlsError::Pem { .. } => TransportError::TlsFile(pem),
        }
    }
}

impl From<std::io::Error> for TransportError {
    fn from(err: std::io::Error) -> Self {
        TransportError::Io(Arc::new(err))
    }
}
