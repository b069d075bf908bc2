//! The two halves of a reliable-connected queue pair (InfiniBand RC over
//! RoCEv2), as caller-driven state machines: they take `now`, return what
//! should happen, and never touch the event queue.
//!
//! Messages (RDMA Writes, one per transfer) are posted on a QP in order
//! and share its PSN space, as the work requests of one RC connection do:
//! a message of `b` bytes takes the next `ceil(b / mtu)` PSNs (at least
//! one). Both halves keep the messages they have not finished, oldest
//! first, and hand each back once done (`pop_acked`, `pop_received`).
//!
//! Requester: sends the posted PSNs in order, at most `mtu` payload each.
//! It keeps `una` (oldest unacknowledged PSN) and `next` (next PSN to
//! send). A cumulative ACK moves `una`; a NAK (PSN sequence error) or a
//! retransmission timeout sends it back to the oldest missing PSN
//! (go-back-N), across message boundaries as an RC QP does.
//!
//! Responder: delivers in PSN order and acknowledges cumulatively. A
//! Write First/Middle/Last packet ahead of a gap is either discarded with
//! one NAK per gap (go-back-N), or held in the NIC's reorder buffer until
//! the gap fills (discarded and NAKed when the buffer is full); a Write
//! Only packet carries its RETH and is placed wherever it arrives.
//! Duplicates are re-acknowledged; the packet that completes a message is
//! acknowledged at once. PSNs are not wrapped at 24 bits: a QP's packets
//! are numbered from 0.

use super::rate::RateControl;
use super::{WindowParams, WriteMode};
use crate::units::SimTime;
use crate::wire::Opcode;
use std::collections::VecDeque;

/// Packets a message of `bytes` takes (an empty one still sends one).
pub fn packets_of(bytes: u64, mtu: u32) -> u32 {
    bytes.div_ceil(mtu as u64).max(1) as u32
}

/// A message posted on a QP: its transfer, its PSNs, and what it cost
/// the sender (the requester's side) or the receiver (the responder's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Msg {
    pub flow: u32,
    pub first: u32,
    pub n_pkts: u32,
    pub bytes: u64,
    /// Requester: payload bytes sent again. Responder: packets that came
    /// out of order.
    pub again: u64,
    /// Requester: retransmission timeouts while it was the oldest
    /// unacknowledged. Responder: NAKs sent for it.
    pub stalls: u64,
}

impl Msg {
    #[inline]
    fn end(&self) -> u32 {
        self.first + self.n_pkts
    }

    fn payload_of(&self, psn: u32, mtu: u32) -> u32 {
        if psn + 1 < self.end() {
            mtu
        } else {
            (self.bytes - mtu as u64 * (self.n_pkts as u64 - 1)) as u32
        }
    }
}

/// Messages not yet finished, oldest first: appends one of `bytes` after
/// `next_psn`, finds the one holding a PSN.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
struct Posted(VecDeque<Msg>);

impl Posted {
    fn post(&mut self, flow: u32, first: u32, bytes: u64, mtu: u32) -> Msg {
        let m = Msg {
            flow,
            first,
            n_pkts: packets_of(bytes, mtu),
            bytes,
            ..Msg::default()
        };
        self.0.push_back(m);
        m
    }

    /// The message holding `psn`, if it is still posted.
    #[inline]
    fn of(&self, psn: u32) -> Option<&Msg> {
        match self.0.len() {
            1 => self.0.front().filter(|m| psn >= m.first && psn < m.end()),
            _ => {
                let i = self.0.partition_point(|m| m.end() <= psn);
                self.0.get(i).filter(|m| psn >= m.first)
            }
        }
    }

    fn of_mut(&mut self, psn: u32) -> Option<&mut Msg> {
        let i = self.0.partition_point(|m| m.end() <= psn);
        self.0.get_mut(i).filter(|m| psn >= m.first)
    }

    /// The oldest message, if every PSN before `upto` covers it.
    fn pop_below(&mut self, upto: u32) -> Option<Msg> {
        if self.0.front().is_some_and(|m| m.end() <= upto) {
            self.0.pop_front()
        } else {
            None
        }
    }

    fn front_done(&self, upto: u32) -> bool {
        self.0.front().is_some_and(|m| m.end() <= upto)
    }
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Requester {
    /// Bytes and packets of every message posted so far.
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
    /// The longest a timeout of this QP waited (its timer's length).
    pub longest_wait: SimTime,
    /// The MRC-like multipath sender, which replaces go-back-N.
    pub mrc: Option<Box<super::mrc::Mrc>>,
    /// Messages posted and not yet acknowledged in full.
    msgs: Posted,
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
    /// The transfer whose message it belongs to, and whether it is that
    /// message's last packet.
    pub flow: u32,
    pub ends: bool,
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
    /// A requester with nothing posted yet.
    pub fn new(mtu: u32, mode: WriteMode) -> Self {
        Requester {
            total_bytes: 0,
            n_pkts: 0,
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
            longest_wait: SimTime::ZERO,
            naks: 0,
            mrc: None,
            msgs: Posted::default(),
        }
    }

    /// A requester with one message of `bytes` for transfer `flow`.
    pub fn one(flow: u32, bytes: u64, mtu: u32, mode: WriteMode) -> Self {
        let mut r = Requester::new(mtu, mode);
        r.post(flow, bytes);
        r
    }

    /// Posts a message of `bytes` for transfer `flow` after those posted.
    pub fn post(&mut self, flow: u32, bytes: u64) -> Msg {
        let m = self.msgs.post(flow, self.n_pkts, bytes, self.mtu);
        self.n_pkts += m.n_pkts;
        if let Some(mrc) = &mut self.mrc {
            mrc.extend(m.n_pkts);
        }
        self.total_bytes += bytes;
        m
    }

    /// The oldest message once every packet of it is acknowledged.
    pub fn pop_acked(&mut self) -> Option<Msg> {
        self.msgs.pop_below(self.una)
    }

    /// Messages not yet acknowledged in full, oldest first.
    pub fn unfinished(&self) -> impl Iterator<Item = &Msg> {
        self.msgs.0.iter()
    }

    /// Sends over many paths with selective acknowledgement (MRC-like).
    /// `planes`: NIC ports the QP sprays over.
    pub fn with_mrc(mut self, cfg: super::mrc::MrcConfig, planes: u32) -> Self {
        self.mrc = Some(Box::new(
            super::mrc::Mrc::with_planes(cfg, self.n_pkts, planes)
                .with_entropies(super::mrc::entropies(cfg.paths)),
        ));
        self
    }

    /// Payload of a posted PSN not yet acknowledged.
    pub fn payload_of(&self, psn: u32) -> u32 {
        self.msgs
            .of(psn)
            .map_or(self.mtu, |m| m.payload_of(psn, self.mtu))
    }

    /// Opcode of a posted PSN not yet acknowledged.
    pub fn opcode_of(&self, psn: u32) -> Opcode {
        self.describe(psn).0
    }

    /// Of a posted PSN not yet acknowledged: its opcode, its payload, its
    /// message's transfer and whether it is that message's last packet,
    /// from one look-up.
    #[inline]
    fn describe(&self, psn: u32) -> (Opcode, u32, u32, bool) {
        let Some(m) = self.msgs.of(psn) else {
            return (
                Opcode::WriteMiddle,
                self.mtu,
                crate::wire::packet::NO_FLOW,
                false,
            );
        };
        let last = psn + 1 == m.end();
        let opcode = match self.mode {
            WriteMode::WriteOnly => Opcode::WriteOnly,
            WriteMode::FirstMiddleLast => match (psn == m.first, last) {
                (true, true) => Opcode::WriteOnly,
                (true, false) => Opcode::WriteFirst,
                (false, true) => Opcode::WriteLast,
                (false, false) => Opcode::WriteMiddle,
            },
        };
        (opcode, m.payload_of(psn, self.mtu), m.flow, last)
    }

    /// Counts a resend of `psn` against the QP and its message.
    fn count_again(&mut self, psn: u32, payload: u32) {
        self.retx_packets += 1;
        self.retx_bytes += payload as u64;
        if let Some(m) = self.msgs.of_mut(psn) {
            m.again += payload as u64;
        }
    }

    /// Whether a congestion window leaves room for another packet (always,
    /// without one).
    #[inline]
    pub fn window_open(&self) -> bool {
        match &self.rate {
            RateControl::Dctcp(d) => d.open(self.next - self.una),
            RateControl::Swift(s) => s.open(self.next - self.una),
            RateControl::Hpcc(h) => h.open(self.next - self.una, self.mtu),
            RateControl::Uec(u) => u.open(self.mrc.as_ref().map_or(0, |m| m.in_flight())),
            _ => true,
        }
    }

    /// An ACK or NAK at `now` moved `una` from `before`, with the
    /// receiver's CE count `ce`, whether the packet it answers was marked
    /// (`echo`, MRC's ACKs) and the INT records `int` it echoes: the
    /// QP's congestion control, if ACKs drive it, reacts (`nak`: a loss),
    /// with its settings from `cc`. Returns whether the QP may send now
    /// (false if ACKs do not drive it: nothing changed).
    pub fn window_feedback(
        &mut self,
        cc: &WindowParams,
        now: SimTime,
        before: u32,
        (ce, echo, int): (u32, bool, Option<&crate::wire::int::Int>),
        nak: bool,
    ) -> bool {
        let (una, next) = (self.una, self.next);
        let newly = una.saturating_sub(before);
        match &mut self.rate {
            RateControl::Dctcp(d) => {
                d.on_ack(&cc.dctcp, newly, ce, una, next);
                if nak {
                    d.on_loss(&cc.dctcp, una, next);
                }
            }
            RateControl::Swift(s) => {
                if nak {
                    s.on_loss(&cc.swift, now);
                } else {
                    s.on_ack(&cc.swift, now, una, newly);
                }
            }
            RateControl::Hpcc(h) => {
                if let Some(int) = int.filter(|_| !nak) {
                    h.on_ack(&cc.hpcc, int, una, next);
                }
            }
            RateControl::Timely(t) => {
                if nak {
                    t.on_loss();
                } else {
                    t.on_ack(&cc.timely, now, una);
                }
            }
            RateControl::Uec(u) => {
                let Some(m) = &self.mrc else {
                    return false;
                };
                if nak {
                    u.on_loss(&cc.uec, now, 1, m.in_flight());
                } else {
                    let newly = u32::from(m.newly_acked);
                    u.on_ack(&cc.uec, now, (echo, m.last_rtt, newly, m.in_flight()));
                }
            }
            RateControl::LineRate | RateControl::Dcqcn(_) => return false,
        }
        self.has_data() && self.window_open()
    }

    /// The retransmission timer fired: a congestion window shrinks.
    pub fn window_timeout(&mut self, cc: &WindowParams, now: SimTime) {
        match &mut self.rate {
            RateControl::Dctcp(d) => d.on_timeout(&cc.dctcp, now),
            RateControl::Swift(s) => s.on_loss(&cc.swift, now),
            RateControl::Timely(t) => t.on_loss(),
            RateControl::Uec(u) => {
                if let Some(m) = &self.mrc {
                    u.on_loss(&cc.uec, now, m.queued_resends(), m.in_flight());
                }
            }
            _ => {}
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
            let rto = m.timeout(rto);
            let (opcode, payload, flow, ends) = self.describe(psn);
            let out = Outgoing {
                psn,
                opcode,
                payload,
                retransmission: again,
                path,
                flow,
                ends,
            };
            if again {
                self.count_again(psn, out.payload);
            }
            return (out, self.arm(now, rto));
        }
        let psn = self.next;
        let (opcode, payload, flow, ends) = self.describe(psn);
        let out = Outgoing {
            psn,
            opcode,
            payload,
            retransmission: psn < self.high,
            path: 0,
            flow,
            ends,
        };
        if out.retransmission {
            self.count_again(psn, out.payload);
        }
        match &mut self.rate {
            RateControl::Swift(s) => s.on_send(psn, now),
            RateControl::Timely(t) => t.on_packet(psn, now),
            _ => {}
        }
        self.next += 1;
        self.high = self.high.max(self.next);
        (out, self.arm(now, rto))
    }

    /// A cumulative ACK for every PSN up to and including `psn`. Returns
    /// true when a message is now acknowledged in full (`pop_acked`).
    pub fn on_ack(&mut self, now: SimTime, psn: u32, rto: SimTime) -> bool {
        if let Some(m) = &mut self.mrc {
            // Selective: this PSN only.
            let done = m.on_ack(psn);
            m.detect_losses(now);
            self.una = m.una;
            if done {
                self.rto_deadline = SimTime::MAX;
            }
            return done && self.msgs.front_done(self.una);
        }
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
        self.msgs.front_done(self.una)
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
            let rto = m.timeout(rto);
            let (n, next) = m.on_timer(now, rto);
            if n > 0 {
                self.timeouts += 1;
                self.longest_wait = self.longest_wait.max(rto);
                if let Some(m) = self.msgs.0.front_mut() {
                    m.stalls += 1;
                }
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
        self.longest_wait = self.longest_wait.max(rto);
        if let Some(m) = self.msgs.0.front_mut() {
            m.stalls += 1;
        }
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
    /// Packets and bytes of every message posted so far.
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
    /// PSNs received ahead of `expected` (placed or held), as a bitmap
    /// whose first word holds PSNs from 64 * `ahead_base`; empty until
    /// the first out-of-order arrival, and trimmed as `expected` passes.
    ahead: VecDeque<u64>,
    ahead_base: u32,
    /// Bytes this QP holds in the reorder buffer, and the most it held.
    pub held_bytes: u64,
    pub max_held_bytes: u64,
    /// Out-of-order packets discarded for lack of reorder buffer.
    pub discarded: u64,
    pub out_of_order: u64,
    pub duplicates: u64,
    pub naks_sent: u64,
    pub delivered_bytes: u64,
    /// Data packets that arrived CE-marked (a running count ACKs carry
    /// back for a congestion window).
    pub ce_packets: u32,
    /// Trimmed packets (headers only) received.
    pub trimmed: u64,
    /// MRC-like: place every packet and acknowledge each PSN selectively.
    sack: bool,
    /// Messages posted and not yet received in full.
    msgs: Posted,
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
    /// A message is now received in full (`pop_received`).
    pub completed: bool,
}

impl Responder {
    /// A receiver of packets of at most `mtu` payload, nothing posted.
    pub fn new(mtu: u32, mode: WriteMode, policy: OooPolicy) -> Self {
        Responder {
            mtu,
            place: mode == WriteMode::WriteOnly,
            policy,
            ..Default::default()
        }
    }

    /// Expects a message of `bytes` for transfer `flow` after those
    /// posted (the same call as the requester's `post`).
    pub fn post(&mut self, flow: u32, bytes: u64) -> Msg {
        let m = self.msgs.post(flow, self.n_pkts, bytes, self.mtu);
        self.n_pkts += m.n_pkts;
        self.total_bytes += bytes;
        m
    }

    /// The oldest message once every packet of it is here.
    pub fn pop_received(&mut self) -> Option<Msg> {
        self.msgs.pop_below(self.expected)
    }

    /// Messages not yet received in full, oldest first.
    pub fn unfinished(&self) -> impl Iterator<Item = &Msg> {
        self.msgs.0.iter()
    }

    /// Whether this packet completed a message.
    #[inline]
    fn completes(&self) -> bool {
        self.msgs.front_done(self.expected)
    }

    /// The MRC-like receiver: every packet is placed where it belongs and
    /// acknowledged by its own PSN.
    pub fn with_sack(mut self) -> Self {
        self.sack = true;
        self.place = true;
        self
    }

    fn payload_of(&self, psn: u32) -> u64 {
        self.msgs
            .of(psn)
            .map_or(self.mtu, |m| m.payload_of(psn, self.mtu)) as u64
    }

    #[inline]
    fn is_ahead(&self, psn: u32) -> bool {
        let w = psn / 64;
        w >= self.ahead_base
            && self
                .ahead
                .get((w - self.ahead_base) as usize)
                .is_some_and(|w| w & (1 << (psn % 64)) != 0)
    }

    fn set_ahead(&mut self, psn: u32, on: bool) {
        let w = psn / 64;
        if w < self.ahead_base {
            return;
        }
        let i = (w - self.ahead_base) as usize;
        if i >= self.ahead.len() {
            if !on {
                return;
            }
            self.ahead.resize(i + 1, 0);
        }
        if on {
            self.ahead[i] |= 1 << (psn % 64);
        } else {
            self.ahead[i] &= !(1 << (psn % 64));
        }
    }

    /// Drops the bitmap's words wholly below `expected` (all clear).
    fn trim_ahead(&mut self) {
        while self.ahead_base < self.expected / 64 {
            if self.ahead.pop_front().is_none() {
                self.ahead_base = self.expected / 64;
                break;
            }
            self.ahead_base += 1;
        }
    }

    /// Counts an out-of-order arrival against its message.
    fn count_ooo(&mut self, psn: u32) {
        self.out_of_order += 1;
        if let Some(m) = self.msgs.of_mut(psn) {
            m.again += 1;
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
            self.count_nak(psn);
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
            self.trim_ahead();
        } else {
            self.count_ooo(psn);
            self.set_ahead(psn, true);
        }
        self.delivered_bytes += payload as u64;
        RxOutcome {
            reply: ack,
            accepted: true,
            delivered: payload as u64,
            completed: self.completes(),
        }
    }

    fn count_nak(&mut self, psn: u32) {
        self.naks_sent += 1;
        if let Some(m) = self.msgs.of_mut(psn) {
            m.stalls += 1;
        }
    }

    fn nak_once(&mut self) -> Option<(Opcode, u32)> {
        if self.nak_sent {
            None
        } else {
            self.nak_sent = true;
            self.count_nak(self.expected);
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
            if !self.ahead.is_empty() {
                self.trim_ahead();
            }
            self.delivered_bytes += delivered;
            let last = self.completes();
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
            self.count_ooo(psn);
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

    fn responder(bytes: u64, mtu: u32, mode: WriteMode, policy: OooPolicy) -> Responder {
        let mut r = Responder::new(mtu, mode, policy);
        r.post(0, bytes);
        r
    }

    /// Two messages on one QP follow each other in its PSN space; each is
    /// handed back once acknowledged (sender) or received (receiver), and
    /// a go-back-N resend crosses the boundary as on a real RC QP.
    #[test]
    fn messages_share_a_qps_psn_space() {
        let mut r = Requester::one(7, 2500, 1000, WriteMode::FirstMiddleLast);
        let second = r.post(8, 1000);
        assert_eq!((second.first, second.n_pkts, r.n_pkts), (3, 1, 4));
        assert_eq!(
            (0..4).map(|p| r.opcode_of(p)).collect::<Vec<_>>(),
            vec![
                Opcode::WriteFirst,
                Opcode::WriteMiddle,
                Opcode::WriteLast,
                Opcode::WriteOnly
            ]
        );
        assert_eq!((r.payload_of(2), r.payload_of(3)), (500, 1000));
        assert_eq!(
            (r.describe(2).2, r.describe(2).3, r.describe(1).3),
            (7, true, false)
        );
        for _ in 0..4 {
            r.send_next(SimTime::ZERO, RTO, 0);
        }
        // PSN 2 lost: the NAK resends it and the next message's packet.
        r.on_nak(SimTime(5), 2, RTO);
        assert!(r.pop_acked().is_none());
        let (a, _) = r.send_next(SimTime(6), RTO, 0);
        let (b, _) = r.send_next(SimTime(6), RTO, 0);
        assert_eq!((a.psn, b.psn), (2, 3));
        assert!(r.on_ack(SimTime(9), 2, RTO));
        let m = r.pop_acked().unwrap();
        assert_eq!((m.flow, m.again), (7, 500));
        assert!(r.pop_acked().is_none());
        assert!(r.on_ack(SimTime(9), 3, RTO));
        assert_eq!(r.pop_acked().map(|m| (m.flow, m.again)), Some((8, 1000)));
        assert!(r.is_done());

        let mut s = Responder::new(1000, WriteMode::FirstMiddleLast, OooPolicy::Nak);
        s.post(7, 2500);
        s.post(8, 1000);
        let mut pool = ReorderPool::default();
        let p = &mut pool;
        s.on_data(0, 1000, 8, p);
        s.on_data(1, 1000, 8, p);
        assert_eq!(s.on_data(3, 1000, 8, p).reply, Some((Opcode::Nak, 2)));
        // The first message is complete and acknowledged at once.
        let o = s.on_data(2, 500, 8, p);
        assert_eq!((o.completed, o.reply), (true, Some((Opcode::Ack, 2))));
        let m = s.pop_received().unwrap();
        assert_eq!((m.flow, m.again, m.stalls), (7, 0, 1));
        assert!(s.pop_received().is_none());
        let o = s.on_data(3, 1000, 8, p);
        assert!(o.completed);
        assert_eq!(s.pop_received().map(|m| (m.flow, m.again)), Some((8, 1)));
    }

    #[test]
    fn segments_a_write_into_first_middle_last() {
        let r = Requester::one(0, 10_000, 4096, WriteMode::FirstMiddleLast);
        assert_eq!(r.n_pkts, 3);
        assert_eq!(
            (0..3).map(|p| r.opcode_of(p)).collect::<Vec<_>>(),
            vec![Opcode::WriteFirst, Opcode::WriteMiddle, Opcode::WriteLast]
        );
        assert_eq!((0..3).map(|p| r.payload_of(p)).sum::<u32>(), 10_000);
        let w = Requester::one(0, 10_000, 4096, WriteMode::WriteOnly);
        assert!((0..3).all(|p| w.opcode_of(p) == Opcode::WriteOnly));
    }

    #[test]
    fn nak_goes_back_and_counts_retransmissions() {
        let mut r = Requester::one(0, 5 * 1000, 1000, WriteMode::FirstMiddleLast);
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
        let mut r = Requester::one(0, 3000, 1000, WriteMode::FirstMiddleLast);
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
        let mut s = responder(60, 10, WriteMode::FirstMiddleLast, OooPolicy::Nak);
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
        let mut s = responder(55, 10, WriteMode::FirstMiddleLast, OooPolicy::Reorder);
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
        let mut s = responder(40, 10, WriteMode::WriteOnly, OooPolicy::Nak);
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
