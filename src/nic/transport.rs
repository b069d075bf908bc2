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
//! Responder: delivers in PSN order and acknowledges cumulatively. A
//! Write First/Middle/Last packet ahead of a gap is either discarded with
//! one NAK per gap (go-back-N), or held in the NIC's reorder buffer until
//! the gap fills (discarded and NAKed when the buffer is full); a Write
//! Only packet carries its RETH and is placed wherever it arrives.
//! Duplicates are re-acknowledged. PSNs are not wrapped at 24 bits: a
//! transfer is one message whose packets are numbered from 0.

use super::rate::RateControl;
use super::WriteMode;
use crate::units::SimTime;
use crate::wire::Opcode;

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
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
    /// The MRC-like multipath sender, which replaces go-back-N.
    pub mrc: Option<Box<super::mrc::Mrc>>,
}

/// One packet the requester wants to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outgoing {
    pub psn: u32,
    pub opcode: Opcode,
    pub payload: u32,
    pub retransmission: bool,
    /// Which of the QP's paths it takes (plane by plane); 0 without MRC.
    pub path: u16,
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
            mrc: None,
        }
    }

    /// Sends over many paths with selective acknowledgement (MRC-like).
    /// `planes`: NIC ports the QP sprays over.
    pub fn with_mrc(mut self, cfg: super::mrc::MrcConfig, planes: u32) -> Self {
        self.mrc = Some(Box::new(super::mrc::Mrc::with_planes(
            cfg,
            self.n_pkts,
            planes,
        )));
        self
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
        match &self.mrc {
            None => self.next < self.n_pkts,
            Some(m) => m.has_data(),
        }
    }

    pub fn is_done(&self) -> bool {
        self.una == self.n_pkts
    }

    /// When a path will take the next packet: `now` without MRC or with a
    /// usable path, else when the first resting path is back (`MAX` while
    /// every path waits on a probe's fate).
    #[inline]
    pub fn path_ready(&self, now: SimTime, plane: u8) -> SimTime {
        match &self.mrc {
            None => now,
            Some(m) => m.ready_at(now, plane),
        }
    }

    fn arm(&mut self, now: SimTime, rto: SimTime) -> Option<SimTime> {
        if self.rto_deadline == SimTime::MAX {
            self.rto_deadline = now + rto;
            if !self.timer_event {
                self.timer_event = true;
                return Some(self.rto_deadline);
            }
        }
        None
    }

    /// Takes the next packet to send. Returns it and, if the retransmission
    /// timer was idle and has no event pending, the time to schedule one.
    /// `plane`: which of the QP's NIC ports sends it (MRC over several
    /// planes; 0 otherwise).
    pub fn send_next(
        &mut self,
        now: SimTime,
        rto: SimTime,
        plane: u8,
    ) -> (Outgoing, Option<SimTime>) {
        debug_assert!(self.has_data());
        if let Some(m) = &mut self.mrc {
            let (psn, path, again) = m.next_on(now, plane);
            let out = Outgoing {
                psn,
                opcode: self.opcode_of(psn),
                payload: self.payload_of(psn),
                retransmission: again,
                path,
            };
            if again {
                self.retx_packets += 1;
                self.retx_bytes += out.payload as u64;
            }
            return (out, self.arm(now, rto));
        }
        let psn = self.next;
        let out = Outgoing {
            psn,
            opcode: self.opcode_of(psn),
            payload: self.payload_of(psn),
            retransmission: psn < self.high,
            path: 0,
        };
        if out.retransmission {
            self.retx_packets += 1;
            self.retx_bytes += out.payload as u64;
        }
        self.next += 1;
        self.high = self.high.max(self.next);
        (out, self.arm(now, rto))
    }

    /// A cumulative ACK for every PSN up to and including `psn`. Returns
    /// true when this ACK completed the transfer.
    pub fn on_ack(&mut self, now: SimTime, psn: u32, rto: SimTime) -> bool {
        if let Some(m) = &mut self.mrc {
            // Selective: this PSN only.
            let done = m.on_ack(psn);
            self.una = m.una;
            if done {
                self.rto_deadline = SimTime::MAX;
            }
            return done;
        }
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
        if let Some(m) = &mut self.mrc {
            // This PSN's headers came back trimmed.
            m.on_trim(now, psn);
            return;
        }
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
        if let Some(m) = &mut self.mrc {
            let (n, next) = m.on_timer(now, rto);
            if n > 0 {
                self.timeouts += 1;
                self.rto_deadline = if next == SimTime::MAX {
                    now + rto
                } else {
                    next
                };
                return TimerAction::Retransmit(self.rto_deadline);
            }
            if next == SimTime::MAX {
                // Nothing outstanding: the next send re-arms the timer.
                self.timer_event = false;
                self.rto_deadline = SimTime::MAX;
                return TimerAction::Lapse;
            }
            self.rto_deadline = next;
            return TimerAction::Wait(next);
        }
        self.timeouts += 1;
        self.next = self.una;
        self.rto_deadline = now + rto;
        TimerAction::Retransmit(self.rto_deadline)
    }
}

/// What a receiver does with a Write First/Middle/Last packet that
/// arrives ahead of a gap (such packets must be delivered in order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum OooPolicy {
    /// Discard it and send one NAK per gap (go-back-N).
    #[default]
    Nak,
    /// Hold it in the NIC's reorder buffer until the gap fills; when the
    /// buffer is full, discard it and NAK as above.
    Reorder,
}

/// A NIC's reorder buffer, shared by the QPs it receives on.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct ReorderPool {
    pub capacity: u64,
    pub used: u64,
    pub peak: u64,
}

#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Responder {
    pub n_pkts: u32,
    total_bytes: u64,
    mtu: u32,
    /// Write Only: every packet carries its RETH and is placed in memory
    /// where it belongs, whenever it arrives.
    place: bool,
    policy: OooPolicy,
    pub expected: u32,
    since_ack: u32,
    nak_sent: bool,
    /// PSNs received ahead of `expected` (placed or held), as a bitmap;
    /// allocated at the first out-of-order arrival.
    ahead: Vec<u64>,
    /// Bytes this QP holds in the reorder buffer, and the most it held.
    pub held_bytes: u64,
    pub max_held_bytes: u64,
    /// Out-of-order packets discarded for lack of reorder buffer.
    pub discarded: u64,
    pub out_of_order: u64,
    pub duplicates: u64,
    pub naks_sent: u64,
    pub delivered_bytes: u64,
    /// Trimmed packets (headers only) received.
    pub trimmed: u64,
    /// MRC-like: place every packet and acknowledge each PSN selectively.
    sack: bool,
}

/// What the responder does with one data packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxOutcome {
    /// A reply to send: ACK or NAK with its PSN.
    pub reply: Option<(Opcode, u32)>,
    /// The packet was accepted in order.
    pub accepted: bool,
    /// Payload bytes newly delivered (placed in memory) by this packet,
    /// including held packets it released.
    pub delivered: u64,
    /// This packet completed the transfer.
    pub completed: bool,
}

impl Responder {
    /// A receiver of `total_bytes` in `n_pkts` packets of `mtu` payload.
    pub fn new(
        n_pkts: u32,
        total_bytes: u64,
        mtu: u32,
        mode: WriteMode,
        policy: OooPolicy,
    ) -> Self {
        Responder {
            n_pkts,
            total_bytes,
            mtu,
            place: mode == WriteMode::WriteOnly,
            policy,
            ..Default::default()
        }
    }

    /// The MRC-like receiver: every packet is placed where it belongs and
    /// acknowledged by its own PSN.
    pub fn with_sack(mut self) -> Self {
        self.sack = true;
        self.place = true;
        self
    }

    fn payload_of(&self, psn: u32) -> u64 {
        if psn + 1 == self.n_pkts {
            self.total_bytes - self.mtu as u64 * (self.n_pkts as u64 - 1)
        } else {
            self.mtu as u64
        }
    }

    fn is_ahead(&self, psn: u32) -> bool {
        self.ahead
            .get(psn as usize / 64)
            .is_some_and(|w| w & (1 << (psn % 64)) != 0)
    }

    fn set_ahead(&mut self, psn: u32, on: bool) {
        if self.ahead.is_empty() {
            self.ahead = vec![0; self.n_pkts as usize / 64 + 1];
        }
        let w = &mut self.ahead[psn as usize / 64];
        if on {
            *w |= 1 << (psn % 64);
        } else {
            *w &= !(1 << (psn % 64));
        }
    }

    /// The headers of a packet a switch trimmed: its payload was lost, so
    /// ask for a resend from the oldest missing PSN at once, with the one
    /// NAK per gap that go-back-N allows (NAKing every trimmed packet
    /// would restart the sender over and over).
    pub fn on_trimmed(&mut self, psn: u32) -> Option<(Opcode, u32)> {
        self.trimmed += 1;
        if psn < self.expected || self.is_ahead(psn) {
            return None;
        }
        if self.sack {
            // Selective: ask for exactly this PSN.
            self.naks_sent += 1;
            return Some((Opcode::Nak, psn));
        }
        self.nak_once()
    }

    fn on_data_sack(&mut self, psn: u32, payload: u32) -> RxOutcome {
        let ack = Some((Opcode::Ack, psn));
        if psn < self.expected || self.is_ahead(psn) {
            self.duplicates += 1;
            return RxOutcome {
                reply: ack,
                accepted: false,
                delivered: 0,
                completed: false,
            };
        }
        if psn == self.expected {
            self.expected += 1;
            while self.expected < self.n_pkts && self.is_ahead(self.expected) {
                let e = self.expected;
                self.set_ahead(e, false);
                self.expected += 1;
            }
        } else {
            self.out_of_order += 1;
            self.set_ahead(psn, true);
        }
        self.delivered_bytes += payload as u64;
        RxOutcome {
            reply: ack,
            accepted: true,
            delivered: payload as u64,
            completed: self.expected == self.n_pkts,
        }
    }

    fn nak_once(&mut self) -> Option<(Opcode, u32)> {
        if self.nak_sent {
            None
        } else {
            self.nak_sent = true;
            self.naks_sent += 1;
            Some((Opcode::Nak, self.expected))
        }
    }

    pub fn on_data(
        &mut self,
        psn: u32,
        payload: u32,
        ack_every: u32,
        pool: &mut ReorderPool,
    ) -> RxOutcome {
        let none = RxOutcome {
            reply: None,
            accepted: false,
            delivered: 0,
            completed: false,
        };
        if self.sack {
            return self.on_data_sack(psn, payload);
        }
        if psn == self.expected {
            let mut delivered = payload as u64;
            self.expected += 1;
            self.nak_sent = false;
            self.since_ack += 1;
            // Packets already here behind the gap now follow in order.
            while self.expected < self.n_pkts && self.is_ahead(self.expected) {
                let e = self.expected;
                self.set_ahead(e, false);
                if !self.place {
                    let b = self.payload_of(e);
                    delivered += b;
                    self.held_bytes -= b;
                    pool.used -= b;
                }
                self.expected += 1;
                self.since_ack += 1;
            }
            self.delivered_bytes += delivered;
            let last = self.expected == self.n_pkts;
            let reply = if last || self.since_ack >= ack_every {
                self.since_ack = 0;
                Some((Opcode::Ack, self.expected - 1))
            } else {
                None
            };
            RxOutcome {
                reply,
                accepted: true,
                delivered,
                completed: last,
            }
        } else if psn > self.expected {
            if self.is_ahead(psn) {
                self.duplicates += 1;
                return none;
            }
            self.out_of_order += 1;
            if self.place {
                self.set_ahead(psn, true);
                self.delivered_bytes += payload as u64;
                return RxOutcome {
                    delivered: payload as u64,
                    ..none
                };
            }
            let b = payload as u64;
            if self.policy == OooPolicy::Reorder && pool.used + b <= pool.capacity {
                self.set_ahead(psn, true);
                self.held_bytes += b;
                self.max_held_bytes = self.max_held_bytes.max(self.held_bytes);
                pool.used += b;
                pool.peak = pool.peak.max(pool.used);
                return none;
            }
            if self.policy == OooPolicy::Reorder {
                self.discarded += 1;
            }
            RxOutcome {
                reply: self.nak_once(),
                ..none
            }
        } else {
            self.duplicates += 1;
            RxOutcome {
                reply: Some((Opcode::Ack, self.expected - 1)),
                ..none
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
            r.send_next(SimTime::ZERO, RTO, 0);
        }
        r.on_nak(SimTime(10), 2, RTO);
        assert_eq!((r.una, r.next), (2, 2));
        let (o, _) = r.send_next(SimTime(20), RTO, 0);
        assert!(o.retransmission);
        assert_eq!(r.retx_bytes, 1000);
        assert!(r.on_ack(SimTime(30), 4, RTO));
        assert!(r.is_done());
    }

    #[test]
    fn timer_waits_then_retransmits_then_lapses() {
        let mut r = Requester::new(3000, 1000, WriteMode::FirstMiddleLast);
        let (_, t) = r.send_next(SimTime::ZERO, RTO, 0);
        assert_eq!(t, Some(RTO));
        r.send_next(SimTime(1), RTO, 0);
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
        let mut s = Responder::new(6, 60, 10, WriteMode::FirstMiddleLast, OooPolicy::Nak);
        let mut pool = ReorderPool::default();
        let p = &mut pool;
        assert_eq!(s.on_data(0, 10, 2, p).reply, None);
        assert_eq!(s.on_data(1, 10, 2, p).reply, Some((Opcode::Ack, 1)));
        assert_eq!(s.on_data(3, 10, 2, p).reply, Some((Opcode::Nak, 2)));
        assert_eq!(s.on_data(4, 10, 2, p).reply, None);
        assert_eq!(s.out_of_order, 2);
        assert!(s.on_data(2, 10, 2, p).accepted);
        assert_eq!(s.on_data(1, 10, 2, p).reply, Some((Opcode::Ack, 2)));
        s.on_data(3, 10, 2, p);
        s.on_data(4, 10, 2, p);
        let last = s.on_data(5, 10, 2, p);
        assert!(last.completed);
        assert_eq!(last.reply, Some((Opcode::Ack, 5)));
        assert_eq!(s.delivered_bytes, 60);
    }

    /// A reorder buffer holds packets past a gap and releases them when
    /// it fills; when full, the next one is discarded with a NAK.
    #[test]
    fn reorder_buffer_holds_then_releases_then_overflows() {
        let mut s = Responder::new(6, 55, 10, WriteMode::FirstMiddleLast, OooPolicy::Reorder);
        let mut pool = ReorderPool {
            capacity: 20,
            ..Default::default()
        };
        let p = &mut pool;
        s.on_data(0, 10, 1, p);
        assert_eq!(s.on_data(2, 10, 1, p).reply, None);
        assert_eq!(s.on_data(3, 10, 1, p).reply, None);
        assert_eq!((p.used, s.held_bytes), (20, 20));
        // Full: PSN 5 (5 bytes) is discarded and NAKed.
        assert_eq!(s.on_data(5, 5, 1, p).reply, Some((Opcode::Nak, 1)));
        assert_eq!(s.discarded, 1);
        let o = s.on_data(1, 10, 1, p);
        assert_eq!((o.delivered, o.reply), (30, Some((Opcode::Ack, 3))));
        assert_eq!((p.used, p.peak, s.max_held_bytes), (0, 20, 20));
        s.on_data(4, 10, 1, p);
        assert!(s.on_data(5, 5, 1, p).completed);
        assert_eq!(s.delivered_bytes, 55);
    }

    /// Write Only packets are placed wherever they arrive: no NAK, no
    /// buffer, and the cumulative ACK jumps when the gap fills.
    #[test]
    fn write_only_packets_are_placed_out_of_order() {
        let mut s = Responder::new(4, 40, 10, WriteMode::WriteOnly, OooPolicy::Nak);
        let mut pool = ReorderPool::default();
        let p = &mut pool;
        for psn in [3, 1, 2] {
            let o = s.on_data(psn, 10, 1, p);
            assert_eq!((o.reply, o.delivered), (None, 10));
        }
        assert_eq!((s.out_of_order, s.naks_sent, p.peak), (3, 0, 0));
        let o = s.on_data(0, 10, 1, p);
        assert!(o.completed);
        assert_eq!(o.reply, Some((Opcode::Ack, 3)));
        assert_eq!(s.delivered_bytes, 40);
    }
}
