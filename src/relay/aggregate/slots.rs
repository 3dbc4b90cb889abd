//! The legs of one virtual server session, one slot per configured
//! upstream: a slot is empty while its upstream is down, and filled again
//! when a restarted upstream comes back.

use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use serde_json::Value;

use super::leg::Leg;

/// One upstream's place: its leg while it serves, and the capabilities
/// its `initialize` answered.
struct Slot {
    leg: Option<Arc<Leg>>,
    capabilities: Value,
}

/// Every upstream's slot, in the aggregate's order.
pub(super) struct LegSlots {
    slots: RwLock<Vec<Slot>>,
}

impl LegSlots {
    /// The slots of the legs that started (`None` for one that did not),
    /// each with its `initialize` capabilities.
    pub(super) fn new(legs: Vec<(Option<Arc<Leg>>, Value)>) -> Self {
        let slots = legs
            .into_iter()
            .map(|(leg, capabilities)| Slot { leg, capabilities })
            .collect();
        Self {
            slots: RwLock::new(slots),
        }
    }

    /// The leg in slot `index`, gone or not; `None` when the slot is empty.
    pub(super) fn get(&self, index: usize) -> Option<Arc<Leg>> {
        self.read().get(index)?.leg.clone()
    }

    /// The legs still serving.
    pub(super) fn live(&self) -> Vec<Arc<Leg>> {
        self.read()
            .iter()
            .filter_map(|slot| slot.leg.clone())
            .filter(|leg| !leg.is_gone())
            .collect()
    }

    /// Every leg in a slot, to be closed when the session ends.
    pub(super) fn all(&self) -> Vec<Arc<Leg>> {
        self.read()
            .iter()
            .filter_map(|slot| slot.leg.clone())
            .collect()
    }

    /// The capabilities upstream `index` answered `initialize` with
    /// (`Null` when it never started).
    pub(super) fn capabilities(&self, index: usize) -> Value {
        self.read()
            .get(index)
            .map_or(Value::Null, |slot| slot.capabilities.clone())
    }

    /// Puts a restarted upstream's leg in its slot.
    pub(super) fn install(&self, index: usize, leg: Arc<Leg>, capabilities: Value) {
        if let Some(slot) = self.write().get_mut(index) {
            *slot = Slot {
                leg: Some(leg),
                capabilities,
            };
        }
    }

    /// Empties slot `index` when its leg has ended, returning that leg;
    /// `None` when the slot is empty or its leg still serves, so each
    /// end is taken once.
    pub(super) fn take_gone(&self, index: usize) -> Option<Arc<Leg>> {
        let mut slots = self.write();
        let slot = slots.get_mut(index)?;
        if !slot.leg.as_ref()?.is_gone() {
            return None;
        }
        slot.leg.take()
    }

    fn read(&self) -> RwLockReadGuard<'_, Vec<Slot>> {
        self.slots.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Vec<Slot>> {
        self.slots.write().unwrap_or_else(PoisonError::into_inner)
    }
}
