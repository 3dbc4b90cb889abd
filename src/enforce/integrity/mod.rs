//! Tool integrity: definitions pinned by digest, the poisoning scan and
//! argument checks (`[integrity]`).
//!
//! An MCP server's tool descriptions are instructions the model reads, so
//! a server can attack the agent through them: by changing a definition
//! after it was approved (a rug pull), by hiding instructions in it
//! (poisoning), or by steering how another server's tool is used
//! (shadowing). Every list the upstream returns is checked here against
//! the pin file and the rules; the relay reports what is found and, in
//! `enforce`, keeps flagged definitions from the agent and refuses calls
//! to them.
//!
//! - [`pins`]: the pin file and its format.
//! - [`rules`], [`scan`]: the poisoning rules and the scan.
//! - [`verdict`]: what is concluded about one definition.
//! - [`view`]: what one session was shown.
//! - [`arguments`]: `tools/call` arguments against `inputSchema`.
//! - [`hide`]: removing items from a list result.
//! - [`review`]: the `acs-proxy pins` commands.

pub mod arguments;
mod checks;
pub mod diff;
mod error;
pub mod fetch;
pub mod hide;
pub mod pins;
pub mod review;
pub mod rules;
pub mod scan;
pub mod section;
pub mod verdict;
pub mod view;

pub use arguments::{ArgumentValidators, InvalidArguments};
pub use checks::Integrity;
pub use error::IntegrityError;
pub use pins::{Pin, PinFile};
pub use section::Section;
pub use verdict::{Event, EventKind, PinStatus, Verdict};
pub use view::SessionView;
