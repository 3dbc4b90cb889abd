//! How long one evaluation may run, on the VM and on the interpreter
//! alike: a policy that loops must not hold a session's message.

use std::num::NonZeroU32;
use std::time::Duration;

use regorus::utils::limits::ExecutionTimerConfig;

/// How long one evaluation may run before it is abandoned as a decision
/// failure.
pub const EVALUATION_TIME_LIMIT: Duration = Duration::from_millis(100);

/// Steps (VM instructions, interpreter expressions) between two reads of
/// the clock against [`EVALUATION_TIME_LIMIT`]. A read per step was a
/// sixth of a 20-rule evaluation; a step takes well under a microsecond,
/// so a few hundred of them still stop a runaway policy within a hair of
/// its limit.
const TIME_CHECK_INTERVAL: NonZeroU32 = match NonZeroU32::new(256) {
    Some(interval) => interval,
    None => NonZeroU32::MIN,
};

/// The limit as regorus's engines and VMs take it.
pub(super) fn timer() -> ExecutionTimerConfig {
    ExecutionTimerConfig {
        limit: EVALUATION_TIME_LIMIT,
        check_interval: TIME_CHECK_INTERVAL,
    }
}
