//! Monitor mode for a whole policy, whatever engine evaluated it.

use super::spec::Mode;
use crate::hooks::decision::Decision;

impl Mode {
    /// Applies the policy's mode to the decision it reached: unchanged in
    /// enforce mode; in monitor mode the step is allowed and the decision
    /// is kept as what would have applied ([`Decision::monitoring`]).
    ///
    /// Engine-independent, so any engine behind the embedded Guardian
    /// gets the same monitor mode by passing its decision through here.
    pub fn apply(self, decision: Decision) -> Decision {
        match self {
            Mode::Enforce => decision,
            Mode::Monitor => Decision::monitoring(decision),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::decision::Disposition;

    #[test]
    fn enforce_leaves_the_decision_alone() {
        let deny = Decision::deny("no", None);
        assert_eq!(Mode::Enforce.apply(deny.clone()), deny);
    }

    #[test]
    fn monitor_allows_and_keeps_what_would_have_applied() {
        let deny = Decision::deny("no", Some("code"));
        let applied = Mode::Monitor.apply(deny.clone());
        assert_eq!(applied.decision, Disposition::Allow);
        assert_eq!(applied.monitored.as_deref(), Some(&deny));
    }

    #[test]
    fn monitoring_an_allow_records_nothing() {
        let applied = Mode::Monitor.apply(Decision::allow());
        assert_eq!(applied, Decision::allow());
    }
}
