//! Per-QP rate control: when may the requester put its next packet on the
//! wire. For now every QP sends at line rate (the NIC port's speed limits
//! it); DCQCN will be another variant of `RateControl`, driven by CNPs.

use crate::units::SimTime;

#[derive(Clone, Debug)]
pub enum RateControl {
    /// No limit beyond the port itself.
    LineRate,
}

impl RateControl {
    /// Earliest time the next packet may start.
    #[inline]
    pub fn earliest_send(&self, now: SimTime) -> SimTime {
        match self {
            RateControl::LineRate => now,
        }
    }

    /// Called when a packet of `wire_bytes` starts on the wire.
    #[inline]
    pub fn on_send(&mut self, _now: SimTime, _wire_bytes: u32) {
        match self {
            RateControl::LineRate => {}
        }
    }
}
