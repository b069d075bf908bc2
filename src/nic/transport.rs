//! The two halves of a reliable-connected queue pair (InfiniBand RC over
//! RoCEv2), as caller-driven state machines: they take `now`, return what
//! should happen, and never touch the event queue.
//!
//! Requester: an RDMA Write of `total` bytes becomes `n` packets of at most
//! `mtu` payload, PSN 0..n. It keeps `una` (oldest unacknowledged PSN) and
//! `next` (next PSN to send). A cumulative ACK moves `una`; a NAK (PSN
//! sequence error) or a retransmission timeout sends it back to the oldest
//! missing PSN (go-back-N).
//!
//! Responder: accepts only the expected PSN. Out-of-order packets are
//! counted and discarded, and the first one after a gap triggers one NAK;
//! duplicates are re-acknowledged. The reorder buffer that lets a NIC hold
//! out-of-order packets instead is not modelled yet. PSNs are not wrapped
//! at 24 bits: a transfer is one message whose packets are numbered from 0.

use super::rate::RateControl;
use super::WriteMode;
use crate::units::SimTime;
use crate::wire::Opcode;

#[derive(Clone, Debug)]
pub struct Requester {
    pub total_bytes: u64,
    pub n_pkts: u32,
    mtu: u32,
    mode: WriteMode,
    pub next: u32,
    pub una: u32,
    /// Highest PSN ever sent, plus one.
    pub high: u32,
    /// When the retransmission timer expires; `SimTime::MAX` when disarmed.
    pub rto_deadline: SimTime,
    /// Whether a timer event is pending in the event queue.
    pub timer_event: bool,
    pub rate: RateControl,
    pub retx_packets: u64,
    pub retx_bytes: u64,
    pub timeouts: u32,
    pub naks: u32,
}

/// One packet the requester wants to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outgoing {
    pub psn: u32,
    pub opcode: Opcode,
    pub payload: u32,
    pub retransmission: bool,
}

/// What a timer event should lead to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerAction {
    /// Nothing outstanding: let the timer lapse.
    Lapse,
    /// Not due yet: schedule the event again at this time.
    Wait(SimTime),
    /// Timed out: the requester went back to `una`; resume sending and
    /// schedule the timer at this time.
    Retransmit(SimTime),
}

impl Requester {
    pub fn new(total_bytes: u64, mtu: u32, mode: WriteMode) -> Self {
        let n_pkts = total_bytes.div_ceil(mtu as u64).max(1) as u32;
        Requester {
            total_bytes,
            n_pkts,
            mtu,
            mode,
            next: 0,
            una: 0,
            high: 0,
            rto_deadline: SimTime::MAX,
            timer_event: false,
            rate: RateControl::LineRate,
            retx_packets: 0,
            retx_bytes: 0,
            timeouts: 0,
            naks: 0,
        }
    }

    pub fn payload_of(&self, psn: u32) -> u32 {
        if psn + 1 < self.n_pkts {
            self.mtu
        } else {
            (self.total_bytes - self.mtu as u64 * (self.n_pkts as u64 - 1)) as u32
        }
    }

    pub fn opcode_of(&self, psn: u32) -> Opcode {
        match self.mode {
            WriteMode::WriteOnly => Opcode::WriteOnly,
            WriteMode::FirstMiddleLast => match (psn, self.n_pkts) {
                (_, 1) => Opcode::WriteOnly,
                (0, _) => Opcode::WriteFirst,
                (p, n) if p + 1 == n => Opcode::WriteLast,
                _ => Opcode::WriteMiddle,
            },
        }
    }

    #[inline]
    pub fn has_data(&self) -> bool {
        self.next < self.n_pkts
    }

    pub fn is_done(&self) -> bool {
        self.una == self.n_pkts
    }

    /// Takes the next packet to send. Returns it and, if the retransmission
    /// timer was idle and has no event pending, the time to schedule one.
    pub fn send_next(&mut self, now: SimTime, rto: SimTime) -> (Outgoing, Option<SimTime>) {
        debug_assert!(self.has_data());
        let psn = self.next;
        let out = Outgoing {
            psn,
            opcode: self.opcode_of(psn),
            payload: self.payload_of(psn),
            retransmission: psn < self.high,
        };
        if out.retransmission {
            self.retx_packets += 1;
            self.retx_bytes += out.payload as u64;
        }
        self.next += 1;
        self.high = self.high.max(self.next);
        let mut schedule = None;
        if self.rto_deadline == SimTime::MAX {
            self.rto_deadline = now + rto;
            if !self.timer_event {
                self.timer_event = true;
                schedule = Some(self.rto_deadline);
            }
        }
        (out, schedule)
    }

    /// A cumulative ACK for every PSN up to and including `psn`. Returns
    /// true when this ACK completed the transfer.
    pub fn on_ack(&mut self, now: SimTime, psn: u32, rto: SimTime) -> bool {
        let was_done = self.is_done();
        let acked = (psn + 1).min(self.n_pkts);
        if acked > self.una {
            self.una = acked;
            self.next = self.next.max(self.una);
            self.rto_deadline = if self.una < self.high {
                now + rto
            } else {
                SimTime::MAX
            };
        }
        !was_done && self.is_done()
    }

    /// A NAK asking for `psn`: everything before it arrived; resend from
    /// it (go-back-N).
    pub fn on_nak(&mut self, now: SimTime, psn: u32, rto: SimTime) {
        self.naks += 1;
        if psn > 0 {
            self.on_ack(now, psn - 1, rto);
        }
        if psn < self.next && psn >= self.una {
            self.next = psn;
        }
    }

    /// The timer event fired at `now`.
    pub fn on_timer(&mut self, now: SimTime, rto: SimTime) -> TimerAction {
        self.timer_event = false;
        if self.is_done() || self.rto_deadline == SimTime::MAX {
            self.rto_deadline = SimTime::MAX;
            return TimerAction::Lapse;
        }
        self.timer_event = true;
        if now < self.rto_deadline {
            return TimerAction::Wait(self.rto_deadline);
        }
        self.timeouts += 1;
        self.next = self.una;
        self.rto_deadline = now + rto;
        TimerAction::Retransmit(self.rto_deadline)
    }
}

#[derive(Clone, Debug, Default)]
pub struct Responder {
    pub n_pkts: u32,
    pub expected: u32,
    since_ack: u32,
    nak_sent: bool,
    pub out_of_order: u64,
    pub duplicates: u64,
    pub naks_sent: u64,
    pub delivered_bytes: u64,
}

/// What the responder does with one data packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxOutcome {
    /// A reply to send: ACK or NAK with its PSN.
    pub reply: Option<(Opcode, u32)>,
    /// The packet was accepted in order.
    pub accepted: bool,
    /// This packet completed the transfer.
    pub completed: bool,
}

impl Responder {
    pub fn new(n_pkts: u32) -> Self {
        Responder {
            n_pkts,
            ..Default::default()
        }
    }

    pub fn on_data(&mut self, psn: u32, payload: u32, ack_every: u32) -> RxOutcome {
        if psn == self.expected {
            self.expected += 1;
            self.nak_sent = false;
            self.delivered_bytes += payload as u64;
            self.since_ack += 1;
            let last = self.expected == self.n_pkts;
            let reply = if last || self.since_ack >= ack_every {
                self.since_ack = 0;
                Some((Opcode::Ack, psn))
            } else {
                None
            };
            RxOutcome {
                reply,
                accepted: true,
                completed: last,
            }
        } else if psn > self.expected {
            self.out_of_order += 1;
            let reply = if self.nak_sent {
                None
            } else {
                self.nak_sent = true;
                self.naks_sent += 1;
                Some((Opcode::Nak, self.expected))
            };
            RxOutcome {
                reply,
                accepted: false,
                completed: false,
            }
        } else {
            self.duplicates += 1;
            RxOutcome {
                reply: Some((Opcode::Ack, self.expected - 1)),
                accepted: false,
                completed: false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RTO: SimTime = SimTime::from_us(100);

    #[test]
    fn segments_a_write_into_first_middle_last() {
        let r = Requester::new(10_000, 4096, WriteMode::FirstMiddleLast);
        assert_eq!(r.n_pkts, 3);
        assert_eq!(
            (0..3).map(|p| r.opcode_of(p)).collect::<Vec<_>>(),
            vec![Opcode::WriteFirst, Opcode::WriteMiddle, Opcode::WriteLast]
        );
        assert_eq!((0..3).map(|p| r.payload_of(p)).sum::<u32>(), 10_000);
        let w = Requester::new(10_000, 4096, WriteMode::WriteOnly);
        assert!((0..3).all(|p| w.opcode_of(p) == Opcode::WriteOnly));
    }

    #[test]
    fn nak_goes_back_and_counts_retransmissions() {
        let mut r = Requester::new(5 * 1000, 1000, WriteMode::FirstMiddleLast);
        for _ in 0..5 {
            r.send_next(SimTime::ZERO, RTO);
        }
        r.on_nak(SimTime(10), 2, RTO);
        assert_eq!((r.una, r.next), (2, 2));
        let (o, _) = r.send_next(SimTime(20), RTO);
        assert!(o.retransmission);
        assert_eq!(r.retx_bytes, 1000);
        assert!(r.on_ack(SimTime(30), 4, RTO));
        assert!(r.is_done());
    }

    #[test]
    fn timer_waits_then_retransmits_then_lapses() {
        let mut r = Requester::new(3000, 1000, WriteMode::FirstMiddleLast);
        let (_, t) = r.send_next(SimTime::ZERO, RTO);
        assert_eq!(t, Some(RTO));
        r.send_next(SimTime(1), RTO);
        r.on_ack(SimTime(50), 0, RTO);
        assert_eq!(r.on_timer(RTO, RTO), TimerAction::Wait(SimTime(50) + RTO));
        let t2 = SimTime(50) + RTO;
        assert_eq!(r.on_timer(t2, RTO), TimerAction::Retransmit(t2 + RTO));
        assert_eq!(r.next, 1);
        r.on_ack(t2, 2, RTO);
        assert_eq!(r.on_timer(t2 + RTO, RTO), TimerAction::Lapse);
    }

    #[test]
    fn responder_naks_once_per_gap_and_acks_coalesced() {
        let mut s = Responder::new(6);
        assert_eq!(s.on_data(0, 10, 2).reply, None);
        assert_eq!(s.on_data(1, 10, 2).reply, Some((Opcode::Ack, 1)));
        assert_eq!(s.on_data(3, 10, 2).reply, Some((Opcode::Nak, 2)));
        assert_eq!(s.on_data(4, 10, 2).reply, None);
        assert_eq!(s.out_of_order, 2);
        assert!(s.on_data(2, 10, 2).accepted);
        assert_eq!(s.on_data(1, 10, 2).reply, Some((Opcode::Ack, 2)));
        s.on_data(3, 10, 2);
        s.on_data(4, 10, 2);
        let last = s.on_data(5, 10, 2);
        assert!(last.completed);
        assert_eq!(last.reply, Some((Opcode::Ack, 5)));
        assert_eq!(s.delivered_bytes, 60);
    }
}
