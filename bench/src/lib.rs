//! What the benchmark's binaries share: the harness (`acs-proxy-bench`)
//! and the bare relay (`acs-proxy-bare-relay`) both ask a remote Guardian
//! about one sequential `tools/call` the way acs-proxy asks it.

pub mod guardian_call;
