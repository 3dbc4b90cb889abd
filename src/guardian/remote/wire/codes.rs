//! The ACS error-code registry (§17.1) and what each code means for the
//! session.
//!
//! §6.4 sends every Guardian error to the negotiated failure posture, which
//! defaults to proceed. For the codes that say a request was not
//! authenticated or not believed, proceeding would hand a forger (or a
//! replayer) an allow, so acs-proxy fails closed on them whatever the
//! posture (DESIGN §3.6). The handshake refusals do not decide a step at
//! all: they say the session must not run.

/// Policy refuses the session and nothing more specific applies.
pub const SESSION_REFUSED: i64 = -32000;
/// No common ACS version (`data.supported_versions` lists the Guardian's).
pub const UNSUPPORTED_VERSION: i64 = -32001;
/// Policy needs provenance and the client declared `provenance_producer: "none"`.
pub const PROVENANCE_REQUIRED: i64 = -32002;
/// A method or profile the handshake did not negotiate (`data.method`).
pub const CAPABILITY_NOT_NEGOTIATED: i64 = -32003;
/// A required signature is missing, malformed or does not verify.
pub const SIGNATURE_INVALID: i64 = -32004;
/// A `request_id` or `nonce` was seen before in this session.
pub const REPLAY_DETECTED: i64 = -32005;
/// `timestamp` outside the skew window (`data.skew_window_ms`).
pub const TIMESTAMP_OUT_OF_WINDOW: i64 = -32006;
/// The client's `chain_hash` is not the Guardian's head (an integrity event).
pub const CHAIN_MISMATCH: i64 = -32007;

/// Whether an error reply with `code` must be treated as a deny regardless
/// of `on_decision_failure`: -32004 to -32007, the authentication, replay,
/// clock and chain-integrity refusals.
pub fn fails_closed(code: i64) -> bool {
    (CHAIN_MISMATCH..=SIGNATURE_INVALID).contains(&code)
}

/// Whether `code` answering `handshake/hello` refuses the session outright
/// (-32000 to -32002): the session must not run, unguarded or otherwise.
pub fn is_handshake_refusal(code: i64) -> bool {
    (PROVENANCE_REQUIRED..=SESSION_REFUSED).contains(&code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_values() {
        assert_eq!(
            [
                SESSION_REFUSED,
                UNSUPPORTED_VERSION,
                PROVENANCE_REQUIRED,
                CAPABILITY_NOT_NEGOTIATED,
                SIGNATURE_INVALID,
                REPLAY_DETECTED,
                TIMESTAMP_OUT_OF_WINDOW,
                CHAIN_MISMATCH,
            ],
            [-32000, -32001, -32002, -32003, -32004, -32005, -32006, -32007]
        );
    }

    #[test]
    fn only_authentication_replay_clock_and_chain_refusals_fail_closed() {
        let closed: Vec<i64> = (-32100..=-31990).filter(|&c| fails_closed(c)).collect();
        assert_eq!(closed, [-32007, -32006, -32005, -32004]);
        for code in [-32700, -32600, -32601, -32602, -32603, 0, 1] {
            assert!(!fails_closed(code), "{code}");
        }
    }

    #[test]
    fn handshake_refusals_are_the_first_three() {
        let refusals: Vec<i64> = (-32100..=-31990)
            .filter(|&c| is_handshake_refusal(c))
            .collect();
        assert_eq!(refusals, [-32002, -32001, -32000]);
        assert!(!is_handshake_refusal(CAPABILITY_NOT_NEGOTIATED));
    }
}
