//! Per-QP rate control: when may the requester put its next packet on the
//! wire. `LineRate` leaves it to the NIC port; `Dcqcn` paces the QP at its
//! DCQCN rate, cut by CNPs and recovered by timers and a byte counter;
//! `Dctcp` sends at line rate within a congestion window (`window_open`);
//! `Swift` and `Hpcc` keep a window and pace below it; `Timely` paces at
//! a rate its round trips move.

use super::dcqcn::{Dcqcn, DcqcnParams};
use crate::units::SimTime;

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub enum RateControl {
    /// No limit beyond the port itself.
    LineRate,
    Dcqcn(Dcqcn),
    Dctcp(super::dctcp::Dctcp),
    Swift(Box<super::swift::Swift>),
    Hpcc(Box<super::hpcc::Hpcc>),
    Timely(Box<super::timely::Timely>),
    Uec(Box<super::uec::Uec>),
}

impl RateControl {
    /// Earliest time the next packet may start.
    #[inline]
    pub fn earliest_send(&self, now: SimTime, p: &DcqcnParams) -> SimTime {
        match self {
            RateControl::LineRate | RateControl::Dctcp(_) | RateControl::Uec(_) => now,
            RateControl::Dcqcn(d) => d.earliest_send(now, p),
            RateControl::Swift(s) => s.earliest_send(now),
            RateControl::Hpcc(h) => h.earliest_send(now),
            RateControl::Timely(t) => t.earliest_send(now),
        }
    }

    /// Called when a packet of `wire_bytes` starts on the wire.
    #[inline]
    pub fn on_send(&mut self, now: SimTime, wire_bytes: u32, p: &DcqcnParams) {
        match self {
            RateControl::LineRate
            | RateControl::Dctcp(_)
            | RateControl::Swift(_)
            | RateControl::Uec(_) => {}
            RateControl::Dcqcn(d) => d.on_send(now, wire_bytes, p),
            RateControl::Hpcc(h) => h.on_send(now, wire_bytes),
            RateControl::Timely(t) => t.on_send(now, wire_bytes),
        }
    }

    /// A CNP for this QP arrived.
    pub fn on_cnp(&mut self, now: SimTime, p: &DcqcnParams) {
        if let RateControl::Dcqcn(d) = self {
            d.on_cnp(now, p)
        }
    }

    pub fn dcqcn(&self) -> Option<&Dcqcn> {
        match self {
            RateControl::Dcqcn(d) => Some(d),
            _ => None,
        }
    }

    pub fn swift(&self) -> Option<&super::swift::Swift> {
        match self {
            RateControl::Swift(s) => Some(s),
            _ => None,
        }
    }

    /// Keeps a congestion window (DCTCP, Swift, HPCC, UEC's).
    #[inline]
    pub fn is_window(&self) -> bool {
        matches!(
            self,
            RateControl::Dctcp(_)
                | RateControl::Swift(_)
                | RateControl::Hpcc(_)
                | RateControl::Uec(_)
        )
    }

    /// Reacts to each ACK (a window, or TIMELY): takes an ACK per packet,
    /// and may send again after one.
    #[inline]
    pub fn ack_driven(&self) -> bool {
        self.is_window() || matches!(self, RateControl::Timely(_))
    }

    /// The congestion control it runs.
    pub fn cc(&self) -> super::Cc {
        match self {
            RateControl::LineRate => super::Cc::None,
            RateControl::Dcqcn(_) => super::Cc::Dcqcn,
            RateControl::Dctcp(_) => super::Cc::Dctcp,
            RateControl::Swift(_) => super::Cc::Swift,
            RateControl::Hpcc(_) => super::Cc::Hpcc,
            RateControl::Timely(_) => super::Cc::Timely,
            RateControl::Uec(_) => super::Cc::Uec,
        }
    }

    pub fn hpcc(&self) -> Option<&super::hpcc::Hpcc> {
        match self {
            RateControl::Hpcc(h) => Some(h),
            _ => None,
        }
    }

    pub fn timely(&self) -> Option<&super::timely::Timely> {
        match self {
            RateControl::Timely(t) => Some(t),
            _ => None,
        }
    }

    pub fn uec(&self) -> Option<&super::uec::Uec> {
        match self {
            RateControl::Uec(u) => Some(u),
            _ => None,
        }
    }

    pub fn dctcp(&self) -> Option<&super::dctcp::Dctcp> {
        match self {
            RateControl::Dctcp(d) => Some(d),
            _ => None,
        }
    }
}
