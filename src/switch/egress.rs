//! Every port's egress, switch or NIC, run by its caller: admission into
//! the shared buffer or a PFC account, WRED marking, trimming, the
//! priority queues, the transmitter, and the pause state both ways (the
//! pauses a port sends for its ingress accounts, and those it honours).
//!
//! `Egress` owns that state for all ports and switches (one array per
//! field, indexed by `PortId` or switch, as the benchmarks measured) and
//! its counters. Its functions take the time and the packet arena from the
//! caller through `Io` and hand back what must happen later as `Timed`
//! actions for the caller to schedule; frames that do not simply go on
//! (dropped, lost to a dead link, trimmed, or captured) are reported as
//! `Fate`s for the caller to account, in order. A NIC port whose queues
//! are empty tells its caller, which owns the QPs, that it may send a data
//! packet now (`NicTurn`).
//!
//! Routing a frame to its egress port (`classify`, `forward`, `balance`)
//! happens before: `switch_mut` gives the caller the switch for that.

use super::classify::QUEUES;
use super::ecn::Mark;
use super::pfc::PfcPrio;
use super::port::{PortDrops, PortState};
use super::qos::{pause_time, MarkPoint, PfcConfig, WatchdogAction};
use super::schedule::{held, Dequeued, EgressQueues, Queued, CONTROL, LOCAL};
use super::SwitchState;
use crate::nic::nics::Held;
use crate::topology::{NicId, Owner, PortId, QpId, Topology};
use crate::units::{Rate, SimTime};
use crate::wire::frame::{self, ecn, Framing};
use crate::wire::{Opcode, Packet, PacketArena, PacketId};

/// `pfc_slot` of a priority that is not lossless.
pub const NO_SLOT: u8 = u8::MAX;

/// Something egress asks its caller to make happen at a later time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timed {
    /// The frame reaches the port at the far end of the link.
    Arrive(PortId, PacketId),
    /// The port finishes serializing: call `tx_done`.
    TxDone(PortId),
    /// A paused or rate-limited port may send again: call `wake`.
    Wake(PortId),
    /// Re-send the pause on this port and priority if still congested.
    PfcRefresh(PortId, u8),
    /// The watchdog looks at this port and priority.
    Watchdog(PortId, u8),
}

/// What became of a frame that did not simply go on. The frame is
/// already freed from the arena (except `Trimmed` and `Sent`); the caller
/// keeps the totals its owner needs (payload, failures, captures).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub enum Fate {
    /// Dropped: no buffer or headroom, WRED, or the watchdog.
    Dropped(Packet),
    /// Lost on the dead link of this port.
    Lost(PortId, Packet),
    /// Trimmed to its header: this much payload is gone.
    Trimmed(u32),
    /// Put on the link out of this port (only while `capturing`), with
    /// its INT records under HPCC.
    Sent(PortId, Packet, Option<Box<crate::wire::int::Int>>),
}

/// What egress needs from its caller besides its own state.
pub trait Io {
    fn now(&self) -> SimTime;
    fn packets(&mut self) -> &mut PacketArena;
    /// Schedules `what` at `t`.
    fn at(&mut self, t: SimTime, what: Timed);
    /// Whether NIC port `p` has QPs with data waiting for it.
    fn nic_backlog(&self, p: PortId) -> bool;
}

/// A NIC port that is idle, with its data queue open: the caller may put
/// one data packet on it now with `transmit`.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NicTurn(pub Option<NicId>);

impl NicTurn {
    const NONE: NicTurn = NicTurn(None);

    fn or(self, other: NicTurn) -> NicTurn {
        NicTurn(self.0.or(other.0))
    }
}

/// Settings every port's egress reads.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct EgressConfig {
    pub mark_on: MarkPoint,
    pub pfc: PfcConfig,
    /// Queues whose data packets are trimmed rather than dropped.
    pub trim: [bool; QUEUES],
    pub framing: Framing,
    /// The queue and DSCP trimmed headers (and CNPs) go out with.
    pub header_queue: u8,
    pub header_dscp: u8,
    /// The queues NIC data packets go out of (a bit each): one per
    /// traffic class the workloads use.
    pub nic_data_classes: u8,
    /// PFC priorities, for switch ports ([0]) and NIC ports ([1]): the
    /// priority a port's pause frames name for each queue, and the queues
    /// (a bit each) a pause naming each priority stops.
    pub pause_priority: [[u8; QUEUES]; 2],
    pub paused_by: [[u8; QUEUES]; 2],
}

impl EgressConfig {
    /// Switches name and obey each lossless queue's `pfc_priority`; a NIC
    /// names and obeys the priority it gives the traffic of each queue
    /// (`pcp` of the DSCPs it sends there, `nic_dscps`), as a NIC stops
    /// only the priority a pause names. Where both agree with the queue
    /// numbers, every pause names its queue and stops it.
    pub fn priorities(
        qos: &super::qos::QosConfig,
        nic_dscps: &[u8],
    ) -> ([[u8; QUEUES]; 2], [[u8; QUEUES]; 2]) {
        let switch: [u8; QUEUES] =
            std::array::from_fn(|q| qos.queues[q].pfc_priority.unwrap_or(q as u8));
        let mut nic = switch;
        let mut paused_by = [[0u8; QUEUES]; 2];
        for q in 0..QUEUES {
            paused_by[0][switch[q] as usize] |= 1 << q;
        }
        let mut given = [false; QUEUES];
        for &d in nic_dscps {
            let q = qos.map.queue_of(d) as usize;
            let p = qos.map.pcp_of(d);
            if !given[q] {
                nic[q] = p;
                given[q] = true;
            }
            paused_by[1][p as usize] |= 1 << q;
        }
        for q in (0..QUEUES).filter(|&q| !given[q]) {
            paused_by[1][nic[q] as usize] |= 1 << q;
        }
        ([switch, nic], paused_by)
    }
}

/// Fabric-wide counts of what egress did.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct EgressCounters {
    /// Frames of every kind put on any link.
    pub link_transmissions: u64,
    pub ecn_marks: u64,
    pub wred_drops: u64,
    /// Packets of a lossless class dropped for lack of buffer or headroom.
    pub lossless_drops: u64,
    pub trimmed_packets: u64,
    pub watchdog_events: u64,
    pub watchdog_drops: u64,
    /// PFC frames with a pause time, and with quanta 0 (resume).
    pub pfc_pause_frames: u64,
    pub pfc_resume_frames: u64,
}

/// When egress first did each thing, in picoseconds.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct EgressFirsts {
    pub ecn_mark_ps: Option<u64>,
    /// First pause sent by a switch of each tier, and by a NIC.
    pub pause_by_tier_ps: [Option<u64>; 3],
    pub pause_by_nic_ps: Option<u64>,
    pub resume_ps: Option<u64>,
    pub watchdog_ps: Option<u64>,
    pub lossless_drop_ps: Option<u64>,
}

/// Sets `slot` to `now` if it is unset.
#[inline]
pub fn first(slot: &mut Option<u64>, now: SimTime) {
    if slot.is_none() {
        *slot = Some(now.0);
    }
}

/// Sets `slot` to the earlier of itself and `other` (merging the first
/// times of partitions of a run).
pub fn earlier(slot: &mut Option<u64>, other: Option<u64>) {
    *slot = match (*slot, other) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
}

/// The egress side of every port, and the switches' buffers and pipelines.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Egress {
    ports: Vec<PortState>,
    /// Each port's priority queues (apart: see `port`).
    queues: Vec<EgressQueues>,
    drops: Vec<PortDrops>,
    /// Owner of each port, apart from `ports` so that an arrival does not
    /// pull the ingress port's whole state into cache.
    owners: Vec<Owner>,
    /// Each port's line rate, for rates with no exact `ps_per_byte` and
    /// for pause times.
    rates: Vec<Rate>,
    /// Each port's link rate: `rates` unless a hybrid run gave part of it
    /// to fluids (`set_packet_rate`); pauses and fluids count at it.
    line_rates: Vec<Rate>,
    /// Wire bytes fluids moved out of each port (`fluid_sent`), once any
    /// has: the rest of `tx_wire_bytes` went as packets.
    fluid_tx: Vec<u64>,
    switches: Vec<SwitchState>,
    /// Tier of each switch (which tier paused first).
    tiers: Vec<u8>,
    /// PFC state per port and lossless priority: `pfc[port * n + slot]`.
    pfc: Vec<PfcPrio>,
    /// Slot of each priority in `pfc`, `NO_SLOT` if not lossless.
    pfc_slot: [u8; QUEUES],
    pfc_slots: usize,
    /// Some port runs without PFC (`PortPfc::off`): admission and
    /// release must look (the common case reads nothing more).
    pfc_off: bool,
    /// Earliest pending wake-up of each port's transmitter.
    wake_at: Vec<SimTime>,
    /// Some link has gone down: frames offered or sent must check their
    /// port's `down` flag (a cache miss the common case skips).
    links_failed: bool,
    /// Report every frame put on a link as `Fate::Sent`.
    pub capturing: bool,
    /// Some queue has a shaper (the common case checks nothing).
    shaping: bool,
    /// NICs send in more than one class (`held`).
    nic_classes: bool,
    /// Switches stamp INT records on the data packets they send (HPCC).
    int: bool,
    cfg: EgressConfig,
    fates: Vec<Fate>,
    pub counters: EgressCounters,
    pub firsts: EgressFirsts,
}

impl Egress {
    /// `pfc` holds `pfc_slots` entries per port, `pfc_slot` says which
    /// priority each is for.
    pub fn new(
        topo: &Topology,
        cfg: EgressConfig,
        queues: Vec<EgressQueues>,
        switches: Vec<SwitchState>,
        (pfc_slot, pfc_slots, pfc): ([u8; QUEUES], usize, Vec<PfcPrio>),
    ) -> Egress {
        let n = topo.ports.len();
        let shaping = queues.iter().any(|q| q.has_shapers());
        let nic_classes = cfg.nic_data_classes.count_ones() > 1;
        let int = cfg.framing.int_bytes > 0;
        let pfc_off = pfc.iter().any(|p| p.cfg.off);
        Egress {
            ports: PortState::from_topology(topo),
            queues,
            drops: vec![PortDrops::default(); n],
            owners: topo.ports.iter().map(|p| p.owner).collect(),
            rates: topo.ports.iter().map(|p| p.rate).collect(),
            line_rates: topo.ports.iter().map(|p| p.rate).collect(),
            fluid_tx: Vec::new(),
            switches,
            tiers: topo.switches.iter().map(|s| s.tier).collect(),
            pfc,
            pfc_slot,
            pfc_slots,
            pfc_off,
            wake_at: vec![SimTime::MAX; n],
            links_failed: false,
            capturing: false,
            shaping,
            nic_classes,
            int,
            cfg,
            fates: Vec::new(),
            counters: EgressCounters::default(),
            firsts: EgressFirsts::default(),
        }
    }

    // ---- what readers see ----

    pub fn ports(&self) -> &[PortState] {
        &self.ports
    }

    /// A flow-level run (`engine::fluid`) moved `wire` bytes out of port
    /// `p` as a fluid: its byte and busy-time counters take them, as if
    /// serialized.
    pub fn fluid_sent(&mut self, p: PortId, bytes: u64) {
        let rate = self.line_rates[p.idx()];
        let port = &mut self.ports[p.idx()];
        port.tx_wire_bytes += bytes;
        port.busy_ps += rate.serialize(bytes).0;
        if self.fluid_tx.is_empty() {
            self.fluid_tx = vec![0; self.ports.len()];
        }
        self.fluid_tx[p.idx()] += bytes;
    }

    /// Wire bytes packets have sent out of port `p` so far.
    pub fn packet_tx_bytes(&self, p: PortId) -> u64 {
        let fluid = self.fluid_tx.get(p.idx()).copied().unwrap_or(0);
        self.ports[p.idx()].tx_wire_bytes - fluid
    }

    pub fn queues(&self) -> &[EgressQueues] {
        &self.queues
    }

    /// Frames dropped at admission while headed for each port.
    pub fn drops(&self) -> &[PortDrops] {
        &self.drops
    }

    #[inline]
    pub fn owner(&self, p: PortId) -> Owner {
        self.owners[p.idx()]
    }

    /// Whether port `p` is a NIC's.
    fn is_nic(&self, p: PortId) -> bool {
        matches!(self.owners[p.idx()], Owner::Nic(_))
    }

    pub fn owners(&self) -> &[Owner] {
        &self.owners
    }

    pub fn switches(&self) -> &[SwitchState] {
        &self.switches
    }

    pub fn switch_mut(&mut self, s: usize) -> &mut SwitchState {
        &mut self.switches[s]
    }

    pub fn switches_mut(&mut self) -> &mut [SwitchState] {
        &mut self.switches
    }

    pub fn pfc(&self) -> &[PfcPrio] {
        &self.pfc
    }

    pub fn pfc_slot(&self) -> [u8; QUEUES] {
        self.pfc_slot
    }

    pub fn pfc_slots(&self) -> usize {
        self.pfc_slots
    }

    /// Port `p`'s queue record, for sampling (which resets its window).
    pub fn queues_mut(&mut self, p: usize) -> &mut EgressQueues {
        &mut self.queues[p]
    }

    /// Whether some frame did not simply go on since the last `take_fates`.
    #[inline]
    pub fn has_fates(&self) -> bool {
        !self.fates.is_empty()
    }

    /// The frames that did not simply go on, in order. Hand the emptied
    /// vector back with `give_back_fates` to keep its allocation.
    pub fn take_fates(&mut self) -> Vec<Fate> {
        std::mem::take(&mut self.fates)
    }

    pub fn give_back_fates(&mut self, mut v: Vec<Fate>) {
        if self.fates.is_empty() {
            v.clear();
            self.fates = v;
        }
    }

    #[inline]
    pub fn pfc_index(&self, p: PortId, prio: u8) -> Option<usize> {
        let slot = self.pfc_slot[prio as usize];
        (slot != NO_SLOT).then(|| p.idx() * self.pfc_slots + slot as usize)
    }

    /// Time PFC slot `i`'s transmitter has spent paused up to `now`.
    pub fn paused_ps(&self, i: usize, now: SimTime) -> u64 {
        let st = &self.pfc[i];
        let open = st.paused_since.map_or(0, |since| {
            let port = i / self.pfc_slots;
            let prio = (0..QUEUES).find(|&q| self.pfc_slot[q] as usize == i % self.pfc_slots);
            let until = prio.map_or(now, |q| self.queues[port].paused_until[q]);
            until.min(now).saturating_sub(since).0
        });
        st.paused_ps + open
    }

    /// The cache lines an arrival at `p` of a frame of `queue` will read.
    #[inline]
    pub fn prefetch_arrival(&self, p: PortId, queue: u8) {
        let slot = self.pfc_slot[queue as usize];
        if slot != NO_SLOT {
            if let Some(entry) = self.pfc.get(p.idx() * self.pfc_slots + slot as usize) {
                crate::cache::prefetch_read(entry);
            }
        }
    }

    #[inline]
    pub fn prefetch_port(&self, p: PortId) {
        crate::cache::prefetch_read(&self.ports[p.idx()]);
    }

    #[inline]
    pub fn prefetch_switch(&self, s: usize) {
        crate::cache::prefetch_read(&self.switches[s]);
    }

    /// Whether `p`'s link is down (checked only once some link failed).
    #[inline]
    pub fn is_down(&self, p: PortId) -> bool {
        self.links_failed && self.ports[p.idx()].down
    }

    // ---- the transmitter ----

    /// Called when a port may have something new to send: starts the
    /// transmitter if idle, or asks to be woken when the current frame is
    /// done.
    #[inline(always)]
    pub fn kick(&mut self, io: &mut impl Io, p: PortId) -> NicTurn {
        let port = &mut self.ports[p.idx()];
        if port.tx_event {
            return NicTurn::NONE;
        }
        if io.now() >= port.busy_until {
            self.start_tx(io, p)
        } else {
            port.tx_event = true;
            let at = port.busy_until;
            io.at(at, Timed::TxDone(p));
            NicTurn::NONE
        }
    }

    /// The frame being serialized on `p` is done.
    pub fn tx_done(&mut self, io: &mut impl Io, p: PortId) -> NicTurn {
        self.ports[p.idx()].tx_event = false;
        self.start_tx(io, p)
    }

    /// A `Wake` of port `p` is due.
    pub fn wake(&mut self, io: &mut impl Io, p: PortId) -> NicTurn {
        if io.now() >= self.wake_at[p.idx()] {
            self.wake_at[p.idx()] = SimTime::MAX;
        }
        self.kick(io, p)
    }

    /// Asks for a `Wake` of port `p` at `at` unless an earlier one is due.
    pub fn wake_at(&mut self, io: &mut impl Io, p: PortId, at: SimTime) {
        if at < self.wake_at[p.idx()] {
            self.wake_at[p.idx()] = at;
            io.at(at, Timed::Wake(p));
        }
    }

    /// Offers a frame to an egress port: straight onto the wire if the
    /// port is idle with nothing waiting, else into its priority queue.
    /// `e.ingress` is the port it came in on (`LOCAL` if made here).
    #[inline(always)]
    pub fn offer(&mut self, io: &mut impl Io, p: PortId, queue: u8, e: Queued) -> NicTurn {
        let port = &self.ports[p.idx()];
        if self.links_failed && port.down {
            // Forwarded to a dead link before routing reacts: lost here
            // and now, not after queueing behind frames that are lost too.
            self.lose_queued(io, p, queue, e);
            return NicTurn::NONE;
        }
        let now = io.now();
        let qs = &self.queues[p.idx()];
        if port.idle(now)
            && !(port.ever_paused && qs.is_paused(queue, now))
            && !(self.shaping && qs.is_shaped(queue, now))
        {
            let qs = &mut self.queues[p.idx()];
            qs.count_direct(queue);
            if self.shaping {
                qs.shaper_sent(queue as usize, e.wire_bytes, now);
            }
            self.transmit(io, p, e, queue);
            NicTurn::NONE
        } else {
            self.queues[p.idx()].enqueue(queue, e.id, e.wire_bytes, e.ingress);
            self.ports[p.idx()].queued += 1;
            self.kick(io, p)
        }
    }

    /// Sends a frame out of port `p` ahead of any queued traffic (PFC
    /// frames, GLB heartbeats).
    pub fn send_control(&mut self, io: &mut impl Io, p: PortId, pkt: Packet) -> NicTurn {
        let wire = pkt.wire_bytes;
        let id = io.packets().alloc(pkt);
        let e = Queued {
            id,
            wire_bytes: wire,
            ingress: LOCAL,
        };
        if self.ports[p.idx()].idle(io.now()) {
            self.transmit(io, p, e, CONTROL);
            NicTurn::NONE
        } else {
            self.queues[p.idx()].enqueue_control(id, wire);
            self.ports[p.idx()].queued += 1;
            self.kick(io, p)
        }
    }

    /// The classes NIC port `p`'s QPs may not send in now. With one class
    /// there is nothing to tell: the port is not offered to its QPs while
    /// that class is paused.
    #[inline]
    pub fn held(&self, p: PortId, now: SimTime) -> Held<'_> {
        if !self.nic_classes {
            return Held::NONE;
        }
        let qs = &self.queues[p.idx()];
        Held {
            mask: qs.paused_among(self.cfg.nic_data_classes, now),
            until: &qs.paused_until,
        }
    }

    /// Puts the next waiting frame on the wire. The port must be idle with
    /// no `TxDone` pending. A NIC port with nothing queued and its data
    /// queue open hands the turn to its caller.
    #[inline(always)]
    fn start_tx(&mut self, io: &mut impl Io, p: PortId) -> NicTurn {
        if self.links_failed && self.ports[p.idx()].down {
            // A dead port sends nothing: a NIC's QPs wait for the link
            // (or their timeouts); a switch port's queue was emptied when
            // the link failed.
            return NicTurn::NONE;
        }
        let now = io.now();
        while self.ports[p.idx()].queued > 0 {
            match self.queues[p.idx()].dequeue(now) {
                Dequeued::Frame(e, q) => {
                    self.ports[p.idx()].queued -= 1;
                    if q != CONTROL
                        && self.cfg.mark_on == MarkPoint::Dequeue
                        && self.queues[p.idx()].has_wred(q)
                        && !self.mark(io, p, q, e.id)
                    {
                        self.discard_queued(io, p, q, e);
                        continue;
                    }
                    self.transmit(io, p, e, q);
                    return NicTurn::NONE;
                }
                Dequeued::Blocked(until) => {
                    self.wake_at(io, p, until);
                    break;
                }
                Dequeued::Empty => break,
            }
        }
        let Owner::Nic(n) = self.owners[p.idx()] else {
            return NicTurn::NONE;
        };
        // The NIC's QPs may send unless every class they send in is paused.
        let classes = self.cfg.nic_data_classes;
        let qs = &self.queues[p.idx()];
        let held = qs.paused_among(classes, now);
        if held == classes {
            if io.nic_backlog(p) {
                let until = (0..QUEUES)
                    .filter(|&q| held & (1 << q) != 0)
                    .map(|q| qs.paused_until[q])
                    .min()
                    .unwrap_or(now);
                self.wake_at(io, p, until);
            }
            return NicTurn::NONE;
        }
        NicTurn(Some(n))
    }

    /// Serializes a frame on an idle port: schedules its arrival at the
    /// peer, and a `TxDone` only if more is waiting. A switch frees the
    /// frame's buffer as its transmission starts.
    #[inline(always)]
    pub fn transmit(&mut self, io: &mut impl Io, p: PortId, e: Queued, queue: u8) {
        let owner = self.owners[p.idx()];
        let now = io.now();
        if let Owner::Switch(s) = owner {
            if e.ingress != LOCAL {
                self.release(io, s.idx(), e.ingress, queue, held(e.wire_bytes));
            }
            if self.int {
                self.stamp(io, p, e.id, now);
            }
        }
        let port = &mut self.ports[p.idx()];
        let ser = if port.ps_per_byte != 0 {
            SimTime(port.ps_per_byte * e.wire_bytes as u64)
        } else {
            self.rates[p.idx()].serialize(e.wire_bytes as u64)
        };
        let done = now + ser;
        port.busy_until = done;
        port.tx_packets += 1;
        port.tx_wire_bytes += e.wire_bytes as u64;
        port.busy_ps += ser.0;
        let more = port.queued > 0 || (matches!(owner, Owner::Nic(_)) && io.nic_backlog(p));
        if more {
            port.tx_event = true;
        }
        let (peer, mut delay, down) = (port.peer, port.delay, port.down);
        if queue == CONTROL && io.packets().get(e.id).opcode == Opcode::Pause {
            // The partner honours a pause this long after it arrives.
            delay += self.cfg.pfc.response_time;
        }
        self.counters.link_transmissions += 1;
        if self.capturing {
            let pkt = *io.packets().get(e.id);
            let int = io.packets().int(e.id).map(|i| Box::new(*i));
            self.fates.push(Fate::Sent(p, pkt, int));
        }
        if down {
            // Sent into a dead link: the transmitter runs, the frame is lost.
            let pkt = io.packets().take(e.id);
            self.fates.push(Fate::Lost(p, pkt));
        } else {
            io.at(done + delay, Timed::Arrive(peer, e.id));
        }
        if more {
            io.at(done, Timed::TxDone(p));
        }
    }

    /// HPCC: a data packet leaving switch port `p` gets the port's INT
    /// record: the bytes it sent before, the bytes queued behind, its rate.
    #[inline(never)]
    fn stamp(&mut self, io: &mut impl Io, p: PortId, id: PacketId, now: SimTime) {
        if !io.packets().get(id).opcode.is_data() {
            return;
        }
        let hop = crate::wire::int::Hop {
            ts: now,
            tx_bytes: self.ports[p.idx()].tx_wire_bytes,
            qlen: self.queues[p.idx()].total_bytes,
            rate_bps: self.rates[p.idx()].bps(),
        };
        if let Some(int) = io.packets().int_mut(id) {
            int.push(hop);
        }
    }

    // ---- admission at a switch ----

    /// Admission at switch `s` of a packet that came in on `ingress`,
    /// headed for `out`, queue `queue`: the watchdog, WRED on enqueue,
    /// then the shared buffer (lossy classes) or PFC accounting (lossless
    /// ones), trimming what would be dropped, and the offer to `out`.
    #[inline]
    pub fn admit(
        &mut self,
        io: &mut impl Io,
        s: usize,
        ingress: PortId,
        (out, queue): (PortId, u8),
        id: PacketId,
        pkt: &Packet,
    ) {
        let b = pkt.buffer_bytes();
        let slot = self.pfc_slot[queue as usize];
        if slot != NO_SLOT && self.watchdog_dropping(io.now(), out, queue) {
            self.queues[out.idx()].counts[queue as usize].watchdog_drops += 1;
            self.counters.watchdog_drops += 1;
            self.drop_frame(io, id);
            return;
        }
        if self.cfg.mark_on == MarkPoint::Enqueue
            && self.ports[out.idx()].queued > 0
            && self.queues[out.idx()].has_wred(queue)
            && !self.mark(io, out, queue, id)
        {
            if !self.trim(io, s, ingress, out, queue, id) {
                self.count_drop(out, queue, pkt.wire_bytes);
                self.drop_frame(io, id);
            }
            return;
        }
        let i = ingress.idx() * self.pfc_slots + slot as usize;
        // A lossless class from a port whose PFC is off comes in as a
        // lossy one.
        let admitted = if slot != NO_SLOT && !(self.pfc_off && self.pfc[i].cfg.off) {
            let a = self.pfc[i].admit(b, &mut self.switches[s].buffer);
            if a.send_pause {
                // Out of a switch port: never a NIC's turn.
                let _ = self.send_pause(io, ingress, queue);
            }
            if !a.admitted {
                self.counters.lossless_drops += 1;
                first(&mut self.firsts.lossless_drop_ps, io.now());
            }
            a.admitted
        } else {
            let depth = if self.ports[out.idx()].queued == 0 {
                0
            } else {
                self.queues[out.idx()].queue_bytes(queue)
            };
            let a = self.switches[s].buffer.admit(b, depth);
            if !a && slot != NO_SLOT {
                // A lossless class lost where PFC is off.
                self.counters.lossless_drops += 1;
                self.pfc[i].lossless_drops += 1;
                first(&mut self.firsts.lossless_drop_ps, io.now());
            }
            a
        };
        if !admitted {
            if !self.trim(io, s, ingress, out, queue, id) {
                self.count_drop(out, queue, pkt.wire_bytes);
                self.drop_frame(io, id);
            }
            return;
        }
        let e = Queued {
            id,
            wire_bytes: pkt.wire_bytes,
            ingress: ingress.0,
        };
        // A switch port: never a NIC's turn.
        let _ = self.offer(io, out, queue, e);
    }

    /// Packet trimming: a data packet of a trimming class that would be
    /// dropped at switch `s` loses its payload and goes on, as a header,
    /// in the header queue. False if it is not trimmed (not data, not a
    /// trimming class, or no room even for the header).
    #[inline(never)]
    fn trim(
        &mut self,
        io: &mut impl Io,
        s: usize,
        ingress: PortId,
        out: PortId,
        queue: u8,
        id: PacketId,
    ) -> bool {
        let pkt = *io.packets().get(id);
        if !self.cfg.trim[queue as usize] || !pkt.opcode.is_data() || pkt.payload == 0 {
            return false;
        }
        let hq = self.cfg.header_queue;
        // The header is charged to the shared pool, so it must go to a
        // lossy queue.
        if self.pfc_slot[hq as usize] != NO_SLOT {
            return false;
        }
        let wire = self.cfg.framing.wire_bytes(pkt.opcode, 0);
        let depth = self.queues[out.idx()].queue_bytes(hq);
        if !self.switches[s].buffer.admit(held(wire), depth) {
            return false;
        }
        self.fates.push(Fate::Trimmed(pkt.payload));
        self.counters.trimmed_packets += 1;
        self.queues[out.idx()].counts[queue as usize].trims += 1;
        let p = io.packets().get_mut(id);
        p.payload = 0;
        p.opcode = Opcode::Trimmed;
        p.wire_bytes = wire;
        p.tos = Packet::tos_of(self.cfg.header_dscp, ecn::NOT_ECT);
        // Charged to the shared pool like any lossy frame; released when
        // its serialization starts.
        let e = Queued {
            id,
            wire_bytes: wire,
            ingress: ingress.0,
        };
        let _ = self.offer(io, out, hq, e);
        true
    }

    /// Counts a drop at admission against the egress port and queue.
    fn count_drop(&mut self, out: PortId, queue: u8, wire: u32) {
        let d = &mut self.drops[out.idx()];
        d.packets += 1;
        d.wire_bytes += wire as u64;
        self.queues[out.idx()].counts[queue as usize].drops += 1;
    }

    /// Runs WRED for packet `id` in `queue` of switch port `p`; marks it
    /// CE or returns false if it must be dropped.
    #[inline(always)]
    fn mark(&mut self, io: &mut impl Io, p: PortId, queue: u8, id: PacketId) -> bool {
        let qs = &mut self.queues[p.idx()];
        let depth = qs.queue_bytes(queue);
        let Some(w) = qs.wred[queue as usize].as_mut() else {
            return true;
        };
        // Below the minimum with no average to keep: nothing else to read.
        if w.cfg.weight == 0 && depth < w.cfg.min {
            return true;
        }
        let Owner::Switch(s) = self.owners[p.idx()] else {
            return true;
        };
        if !w.hit(depth, &mut self.switches[s.idx()].rng) {
            return true;
        }
        // Only a hit reads the packet record.
        let tos = io.packets().get(id).tos;
        match w.action(tos & 3) {
            Mark::Pass => true,
            Mark::Mark => {
                if tos & 3 != ecn::CE {
                    io.packets().get_mut(id).tos = tos | ecn::CE;
                }
                qs.counts[queue as usize].ecn_marks += 1;
                qs.marks = qs.marks.wrapping_add(1);
                self.counters.ecn_marks += 1;
                first(&mut self.firsts.ecn_mark_ps, io.now());
                true
            }
            Mark::Drop => {
                qs.counts[queue as usize].wred_drops += 1;
                self.counters.wred_drops += 1;
                if self.pfc_slot[queue as usize] != NO_SLOT {
                    self.counters.lossless_drops += 1;
                }
                false
            }
        }
    }

    /// Drops a frame already taken out of a queue of switch port `p`,
    /// giving back its buffer.
    fn discard_queued(&mut self, io: &mut impl Io, p: PortId, queue: u8, e: Queued) {
        if let Owner::Switch(s) = self.owners[p.idx()] {
            if e.ingress != LOCAL {
                self.release(io, s.idx(), e.ingress, queue, held(e.wire_bytes));
            }
        }
        let d = &mut self.drops[p.idx()];
        d.packets += 1;
        d.wire_bytes += e.wire_bytes as u64;
        self.drop_frame(io, e.id);
    }

    /// Gives back the buffer a frame took at switch `s`.
    #[inline(always)]
    fn release(&mut self, io: &mut impl Io, s: usize, ingress: u32, queue: u8, bytes: u32) {
        let slot = self.pfc_slot[queue as usize];
        let i = ingress as usize * self.pfc_slots + slot as usize;
        if slot == NO_SLOT || (self.pfc_off && self.pfc[i].cfg.off) {
            self.switches[s].buffer.release(bytes);
            return;
        }
        if self.pfc[i].release(bytes, &mut self.switches[s].buffer) {
            // Out of a switch port: never a NIC's turn.
            let _ = self.send_resume(io, PortId(ingress), queue);
        }
    }

    fn drop_frame(&mut self, io: &mut impl Io, id: PacketId) {
        let pkt = io.packets().take(id);
        self.fates.push(Fate::Dropped(pkt));
    }

    // ---- failures ----

    /// The link of port `p` goes down or comes back up.
    pub fn set_down(&mut self, io: &mut impl Io, p: PortId, down: bool) -> NicTurn {
        self.links_failed |= down;
        self.ports[p.idx()].down = down;
        if down {
            // Every frame waiting is lost at once, counted against the
            // failure, and gives its buffer back.
            for (e, q) in self.queues[p.idx()].drain_all() {
                self.ports[p.idx()].queued -= 1;
                self.lose_queued(io, p, q, e);
            }
            NicTurn::NONE
        } else {
            self.kick(io, p)
        }
    }

    /// Port `p`'s link now runs at `rate`.
    pub fn set_rate(&mut self, p: PortId, rate: Rate) {
        self.line_rates[p.idx()] = rate;
        self.set_packet_rate(p, rate);
    }

    /// Packets leave port `p` at `rate`, part of its link's (a hybrid
    /// run's fluids take the rest): they serialize at it.
    pub fn set_packet_rate(&mut self, p: PortId, rate: Rate) {
        self.rates[p.idx()] = rate;
        self.ports[p.idx()].ps_per_byte = rate.exact_ps_per_byte().unwrap_or(0);
    }

    /// Port `p`'s link rate.
    pub fn line_rate(&self, p: PortId) -> Rate {
        self.line_rates[p.idx()]
    }

    /// A frame that was (or was about to be) queued at port `p` is lost
    /// to the port's dead link: its buffer is given back at a switch.
    fn lose_queued(&mut self, io: &mut impl Io, p: PortId, queue: u8, e: Queued) {
        if let Owner::Switch(s) = self.owners[p.idx()] {
            if e.ingress != LOCAL && queue != CONTROL {
                self.release(io, s.idx(), e.ingress, queue, held(e.wire_bytes));
            }
        }
        let pkt = io.packets().take(e.id);
        self.fates.push(Fate::Lost(p, pkt));
    }

    // ---- PFC ----

    /// Sends a PFC frame for one priority out of port `p`, ahead of any
    /// queued traffic.
    fn send_pfc(&mut self, io: &mut impl Io, p: PortId, prio: u8, quanta: u16) -> NicTurn {
        let pkt = Packet {
            src: NicId(0),
            dst: NicId(0),
            qp: QpId(0),
            psn: quanta as u32,
            payload: 0,
            wire_bytes: frame::wire_bytes(Opcode::Pause, 0),
            header_crc: 0,
            udp_sport: 0,
            opcode: Opcode::Pause,
            tos: 1 << self.cfg.pause_priority[self.is_nic(p) as usize][prio as usize],
            flow: crate::wire::packet::NO_FLOW,
        };
        let i = self
            .pfc_index(p, prio)
            .expect("PFC only on lossless priorities");
        let now = io.now();
        if quanta == 0 {
            self.pfc[i].resumes_sent += 1;
            self.counters.pfc_resume_frames += 1;
            first(&mut self.firsts.resume_ps, now);
        } else {
            self.pfc[i].pauses_sent += 1;
            self.pfc[i].first_pause.get_or_insert(now);
            self.counters.pfc_pause_frames += 1;
            let slot = match self.owners[p.idx()] {
                Owner::Switch(s) => &mut self.firsts.pause_by_tier_ps[self.tiers[s.idx()] as usize],
                Owner::Nic(_) => &mut self.firsts.pause_by_nic_ps,
            };
            first(slot, now);
        }
        self.send_control(io, p, pkt)
    }

    /// Port `p` pauses its partner on `prio` and keeps it paused.
    pub fn send_pause(&mut self, io: &mut impl Io, p: PortId, prio: u8) -> NicTurn {
        let i = self.pfc_index(p, prio).expect("lossless");
        self.pfc[i].pausing = true;
        let turn = self.send_pfc(io, p, prio, self.cfg.pfc.quanta);
        if !self.pfc[i].refresh_pending {
            self.pfc[i].refresh_pending = true;
            let span = pause_time(self.cfg.pfc.quanta, self.line_rates[p.idx()]);
            let every = self
                .cfg
                .pfc
                .refresh
                .unwrap_or(SimTime(span.0 / 2))
                .max(SimTime(1));
            io.at(io.now() + every, Timed::PfcRefresh(p, prio));
        }
        turn
    }

    fn send_resume(&mut self, io: &mut impl Io, p: PortId, prio: u8) -> NicTurn {
        let i = self.pfc_index(p, prio).expect("lossless");
        self.pfc[i].pausing = false;
        self.send_pfc(io, p, prio, 0)
    }

    /// A `PfcRefresh` is due: the pause goes out again if still needed.
    pub fn pfc_refresh(&mut self, io: &mut impl Io, p: PortId, prio: u8) -> NicTurn {
        let i = self.pfc_index(p, prio).expect("lossless");
        self.pfc[i].refresh_pending = false;
        if self.pfc[i].pausing {
            self.send_pause(io, p, prio)
        } else {
            NicTurn::NONE
        }
    }

    /// A NIC pause storm starts or stops on port `p`.
    pub fn storm(&mut self, io: &mut impl Io, p: PortId, prio: u8, on: bool) -> NicTurn {
        let j = self.pfc_index(p, prio).expect("validated");
        self.pfc[j].storm = on;
        if on {
            self.send_pause(io, p, prio)
        } else if self.pfc[j].pausing && self.pfc[j].bytes <= self.pfc[j].cfg.xon {
            self.send_resume(io, p, prio)
        } else {
            NicTurn::NONE
        }
    }

    /// A PFC frame arrived at port `p`: pause or resume its transmitter
    /// for each priority in the class-enable vector.
    pub fn receive_pause(&mut self, io: &mut impl Io, p: PortId, pkt: &Packet) -> NicTurn {
        let quanta = pkt.psn as u16;
        let now = io.now();
        let mut turn = NicTurn::NONE;
        // The queues the priorities it names stop here.
        let by = &self.cfg.paused_by[self.is_nic(p) as usize];
        let stopped = (0..QUEUES)
            .filter(|&b| pkt.tos & (1 << b) != 0)
            .fold(0u8, |m, b| m | by[b]);
        for prio in 0..QUEUES as u8 {
            if stopped & (1 << prio) == 0 {
                continue;
            }
            let Some(i) = self.pfc_index(p, prio) else {
                continue;
            };
            let qs = &mut self.queues[p.idx()];
            let st = &mut self.pfc[i];
            if st.cfg.off {
                // PFC is off here: the frame is counted and ignored.
                st.pauses_ignored += 1;
                continue;
            }
            if quanta == 0 {
                st.resumes_received += 1;
                let end = now.min(qs.paused_until[prio as usize]);
                st.close_paused(end);
                qs.pause(prio, now);
                turn = turn.or(self.kick(io, p));
                continue;
            }
            st.pauses_received += 1;
            self.ports[p.idx()].ever_paused = true;
            if st.watchdog_until > now {
                continue;
            }
            let until = now + pause_time(quanta, self.line_rates[p.idx()]);
            if !qs.is_paused(prio, now) {
                // The previous stretch, if any, ended when it expired.
                let end = qs.paused_until[prio as usize].min(now);
                st.close_paused(end);
                st.paused_since = Some(now);
                if let (Some(wd), Owner::Switch(_)) = (self.cfg.pfc.watchdog, self.owners[p.idx()])
                {
                    if !st.watchdog_pending {
                        st.watchdog_pending = true;
                        io.at(now + wd.interval, Timed::Watchdog(p, prio));
                    }
                }
            }
            qs.pause(prio, until);
        }
        turn
    }

    /// Whether the watchdog is discarding `prio` traffic for port `out`.
    #[inline]
    fn watchdog_dropping(&self, now: SimTime, out: PortId, prio: u8) -> bool {
        match self.cfg.pfc.watchdog {
            Some(wd) if wd.action == WatchdogAction::Drop => self
                .pfc_index(out, prio)
                .is_some_and(|i| self.pfc[i].watchdog_until > now),
            _ => false,
        }
    }

    /// A `Watchdog` check is due: a queue paused for the whole interval
    /// with frames waiting stops honouring pauses for the recovery time,
    /// and with the drop action loses what it holds.
    pub fn watchdog(&mut self, io: &mut impl Io, p: PortId, prio: u8) {
        let Some(wd) = self.cfg.pfc.watchdog else {
            return;
        };
        let i = self.pfc_index(p, prio).expect("lossless");
        self.pfc[i].watchdog_pending = false;
        let now = io.now();
        if !self.queues[p.idx()].is_paused(prio, now) {
            // Re-armed by the next pause.
            return;
        }
        let since = self.pfc[i].paused_since.unwrap_or(now);
        let stuck = now.saturating_sub(since) >= wd.interval;
        if !stuck || self.queues[p.idx()].queue_len(prio) == 0 {
            let next = if since + wd.interval > now {
                since + wd.interval
            } else {
                now + wd.interval
            };
            self.pfc[i].watchdog_pending = true;
            io.at(next, Timed::Watchdog(p, prio));
            return;
        }
        self.pfc[i].watchdog_events += 1;
        self.counters.watchdog_events += 1;
        first(&mut self.firsts.watchdog_ps, now);
        self.pfc[i].watchdog_until = now + wd.recovery;
        self.pfc[i].close_paused(now);
        self.queues[p.idx()].pause(prio, now);
        if wd.action == WatchdogAction::Drop {
            let frames = self.queues[p.idx()].drain(prio);
            let Owner::Switch(s) = self.owners[p.idx()] else {
                unreachable!("the watchdog runs on switch ports")
            };
            for e in frames {
                self.ports[p.idx()].queued -= 1;
                if e.ingress != LOCAL {
                    self.release(io, s.idx(), e.ingress, prio, held(e.wire_bytes));
                }
                self.queues[p.idx()].counts[prio as usize].watchdog_drops += 1;
                self.counters.watchdog_drops += 1;
                self.drop_frame(io, e.id);
            }
        }
        // The watchdog runs on switch ports: never a NIC's turn.
        let _ = self.kick(io, p);
    }

    /// Checks that the switches' buffers hold exactly what their queues
    /// hold, that each port's count of queued frames is right, and that
    /// every lossless byte is charged to the port it came in on. Returns
    /// a description of the first violation.
    pub fn check_buffers(&self) -> Result<(), String> {
        let buffered: u64 = self
            .switches
            .iter()
            .map(|s| s.buffer.used + s.buffer.headroom_used)
            .sum();
        let queued: u64 = self
            .queues
            .iter()
            .zip(&self.owners)
            .filter(|(_, o)| matches!(o, Owner::Switch(_)))
            .map(|(q, _)| q.total_bytes)
            .sum();
        for (i, (q, p)) in self.queues.iter().zip(&self.ports).enumerate() {
            if q.len() != p.queued as usize {
                return Err(format!(
                    "port {i} counts {} queued frames but holds {}",
                    p.queued,
                    q.len()
                ));
            }
        }
        if buffered != queued {
            return Err(format!(
                "switch buffers hold {buffered} B but their queues hold {queued} B"
            ));
        }
        let mut charged = vec![0u64; self.pfc.len()];
        for (q, o) in self.queues.iter().zip(&self.owners) {
            if !matches!(o, Owner::Switch(_)) {
                continue;
            }
            for (prio, e) in q.iter_queued() {
                if let (Some(i), true) =
                    (self.pfc_index(PortId(e.ingress), prio), e.ingress != LOCAL)
                {
                    charged[i] += held(e.wire_bytes) as u64;
                }
            }
        }
        for (i, (c, st)) in charged.iter().zip(&self.pfc).enumerate() {
            if *c != st.bytes as u64 {
                return Err(format!(
                    "PFC slot {i} is charged {} B but its queued frames hold {c} B",
                    st.bytes
                ));
            }
        }
        Ok(())
    }
}

impl Egress {
    /// Takes from `other`, the egress of another partition of the same
    /// run, the state of the ports and switches it owns, and adds its
    /// counts.
    pub fn absorb(
        &mut self,
        mut other: Egress,
        port_theirs: impl Fn(usize) -> bool,
        switch_theirs: impl Fn(usize) -> bool,
    ) {
        let n = self.pfc_slots;
        for i in 0..self.ports.len() {
            if !port_theirs(i) {
                continue;
            }
            std::mem::swap(&mut self.ports[i], &mut other.ports[i]);
            std::mem::swap(&mut self.queues[i], &mut other.queues[i]);
            std::mem::swap(&mut self.drops[i], &mut other.drops[i]);
            self.rates[i] = other.rates[i];
            self.line_rates[i] = other.line_rates[i];
            self.wake_at[i] = other.wake_at[i];
            for k in i * n..(i + 1) * n {
                std::mem::swap(&mut self.pfc[k], &mut other.pfc[k]);
            }
        }
        for s in 0..self.switches.len() {
            if switch_theirs(s) {
                std::mem::swap(&mut self.switches[s], &mut other.switches[s]);
            }
        }
        self.links_failed |= other.links_failed;
        let (c, o) = (&mut self.counters, &other.counters);
        c.link_transmissions += o.link_transmissions;
        c.ecn_marks += o.ecn_marks;
        c.wred_drops += o.wred_drops;
        c.lossless_drops += o.lossless_drops;
        c.trimmed_packets += o.trimmed_packets;
        c.watchdog_events += o.watchdog_events;
        c.watchdog_drops += o.watchdog_drops;
        c.pfc_pause_frames += o.pfc_pause_frames;
        c.pfc_resume_frames += o.pfc_resume_frames;
        let (f, o) = (&mut self.firsts, &other.firsts);
        earlier(&mut f.ecn_mark_ps, o.ecn_mark_ps);
        for t in 0..3 {
            earlier(&mut f.pause_by_tier_ps[t], o.pause_by_tier_ps[t]);
        }
        earlier(&mut f.pause_by_nic_ps, o.pause_by_nic_ps);
        earlier(&mut f.resume_ps, o.resume_ps);
        earlier(&mut f.watchdog_ps, o.watchdog_ps);
        earlier(&mut f.lossless_drop_ps, o.lossless_drop_ps);
    }
}

#[cfg(test)]
mod tests {
    //! Egress driven by hand, with no event loop: the tests play the
    //! caller, scheduling nothing and reading back what egress asked for.

    use super::*;
    use crate::topology::Topology;

    /// One leaf switch with three single-NIC hosts at 100G, a lossless
    /// class on queue 3 with PFC at 20 KB / 10 KB and WRED 20-40 KB, and a
    /// lossy class on queue 0.
    const LEAF: &str = r#"
[topology]
kind = "single-rail"
hosts = 3
gpus_per_host = 1
nic_speed = "100G"
link_delay = "1us"

[switch]
buffer = "1MB"

[[qos.class]]
name = "rocev2"
dscp = [24]
queue = 3
lossless = true
bandwidth_percent = 50
xoff = "20KB"
xon = "10KB"
wred = { min = "20KB", max = "40KB", max_probability = 0.2 }

[[qos.class]]
name = "cnp"
dscp = [48]
queue = 7
strict = true

[[qos.class]]
name = "default"
dscp = [0]
queue = 0
bandwidth_percent = 50

[[workload]]
kind = "transfer"
src = 1
dst = 0
bytes = "4KB"
"#;

    /// The test's side of `Io`: a clock it moves by hand, the packets,
    /// and every action egress asked for.
    struct Caller {
        now: SimTime,
        packets: PacketArena,
        asked: Vec<(SimTime, Timed)>,
        backlog: bool,
    }

    impl Io for Caller {
        fn now(&self) -> SimTime {
            self.now
        }
        fn packets(&mut self) -> &mut PacketArena {
            &mut self.packets
        }
        fn at(&mut self, t: SimTime, what: Timed) {
            self.asked.push((t, what));
        }
        fn nic_backlog(&self, _: PortId) -> bool {
            self.backlog
        }
    }

    fn leaf(sets: &[&str]) -> (Topology, Egress, Caller) {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let p = crate::scenario::prepare("egress.toml", LEAF, &sets).unwrap();
        let streams = crate::rng::Streams::new(p.scenario.seed);
        let e = crate::engine::build::egress(&p.topology, &p.routes, &p.scenario, &p.pfc, &streams);
        let caller = Caller {
            now: SimTime::ZERO,
            packets: PacketArena::default(),
            asked: Vec::new(),
            backlog: false,
        };
        (p.topology, e, caller)
    }

    /// A data packet of `payload` bytes from NIC 1 to NIC 0 in `dscp`.
    fn data(dscp: u8, payload: u32) -> Packet {
        Packet {
            src: NicId(1),
            dst: NicId(0),
            qp: QpId(0),
            psn: 0,
            payload,
            wire_bytes: frame::wire_bytes(Opcode::WriteMiddle, payload),
            header_crc: 0,
            udp_sport: 49152,
            opcode: Opcode::WriteMiddle,
            tos: Packet::tos_of(dscp, ecn::ECT0),
            flow: crate::wire::packet::NO_FLOW,
        }
    }

    /// The switch port facing NIC `n`.
    fn facing(topo: &Topology, n: usize) -> PortId {
        topo.port(topo.nics[n].ports[0]).peer
    }

    /// Admits `pkt` at the leaf, in on the port facing NIC 1, out towards
    /// NIC 0 in `queue`.
    fn admit(topo: &Topology, e: &mut Egress, c: &mut Caller, pkt: Packet, queue: u8) -> PacketId {
        let id = c.packets.alloc(pkt);
        e.admit(c, 0, facing(topo, 1), (facing(topo, 0), queue), id, &pkt);
        id
    }

    fn arrivals(c: &Caller) -> Vec<(SimTime, PortId, Packet)> {
        c.asked
            .iter()
            .filter_map(|&(t, w)| match w {
                Timed::Arrive(p, id) => Some((t, p, *c.packets.get(id))),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn an_idle_port_sends_at_once_and_a_busy_one_queues_until_its_tx_done() {
        let (topo, mut e, mut c) = leaf(&[]);
        let out = facing(&topo, 0);
        let pkt = data(24, 4096);
        let ser = topo.port(out).rate.serialize(pkt.wire_bytes as u64);
        let delay = topo.port(out).delay;
        admit(&topo, &mut e, &mut c, pkt, 3);
        admit(&topo, &mut e, &mut c, pkt, 3);
        // The first is on the wire; the second waits for the TxDone.
        assert_eq!(
            c.asked,
            vec![
                (ser + delay, Timed::Arrive(topo.port(out).peer, PacketId(0))),
                (ser, Timed::TxDone(out)),
            ]
        );
        assert_eq!(e.ports()[out.idx()].queued, 1);
        assert_eq!(e.queues()[out.idx()].queue_bytes(3), held(pkt.wire_bytes));
        // Both frames hold buffer until their serialization starts.
        assert_eq!(e.switches()[0].buffer.used, held(pkt.wire_bytes) as u64);
        c.now = ser;
        c.asked.clear();
        assert_eq!(e.tx_done(&mut c, out), NicTurn::NONE);
        assert_eq!(
            c.asked,
            vec![(
                ser + ser + delay,
                Timed::Arrive(topo.port(out).peer, PacketId(1))
            )]
        );
        assert_eq!(e.switches()[0].buffer.used, 0);
        assert_eq!(e.counters.link_transmissions, 2);
        e.check_buffers().unwrap();
    }

    #[test]
    fn lossless_bytes_past_xoff_pause_the_ingress_and_a_resume_follows_at_xon() {
        let (topo, mut e, mut c) = leaf(&[]);
        let (ingress, out) = (facing(&topo, 1), facing(&topo, 0));
        let pkt = data(24, 4096);
        // The first goes out at once; the rest queue behind it.
        let mut n = 0;
        while e.counters.pfc_pause_frames == 0 {
            admit(&topo, &mut e, &mut c, pkt, 3);
            n += 1;
            assert!(n < 100, "no pause after {n} packets");
        }
        // Paused once the bytes charged to the ingress passed 20 KB.
        let charged = (n - 1) * held(pkt.wire_bytes);
        assert!(
            charged > 20_000 && charged - held(pkt.wire_bytes) <= 20_000,
            "{charged}"
        );
        let pause = arrivals(&c)
            .into_iter()
            .find(|(_, _, p)| p.opcode == Opcode::Pause)
            .expect("a pause frame on the wire");
        assert_eq!(pause.1, topo.port(ingress).peer, "the pause goes to NIC 1");
        assert_eq!((pause.2.psn, pause.2.tos), (0xFFFF, 1 << 3));
        assert!(e.pfc()[e.pfc_index(ingress, 3).unwrap()].pausing);
        // Draining: the resume goes out once the charge is at xON.
        let mut t = SimTime::ZERO;
        while e.ports()[out.idx()].queued > 0 {
            t = e.ports()[out.idx()].busy_until;
            c.now = t;
            let _ = e.tx_done(&mut c, out);
            let st = &e.pfc()[e.pfc_index(ingress, 3).unwrap()];
            assert_eq!(st.pausing, st.bytes > 10_000, "at {t:?}: {} B", st.bytes);
        }
        assert_eq!(e.counters.pfc_resume_frames, 1);
        let resume = arrivals(&c)
            .into_iter()
            .find(|(_, _, p)| p.opcode == Opcode::Pause && p.psn == 0)
            .expect("a resume frame");
        assert!(resume.0 > SimTime::ZERO && t > SimTime::ZERO);
        assert_eq!(e.firsts.pause_by_tier_ps[0], Some(0));
        e.check_buffers().unwrap();
    }

    #[test]
    fn wred_marks_every_ect_packet_past_its_maximum_and_none_below_its_minimum() {
        let (topo, mut e, mut c) = leaf(&["qos.mark_on=\"enqueue\""]);
        let pkt = data(24, 1024);
        let cfg = e.queues()[facing(&topo, 0).idx()].wred[3]
            .as_ref()
            .unwrap()
            .cfg;
        assert_eq!((cfg.min, cfg.max), (20_000, 40_000));
        let mut marked_below = 0;
        for _ in 0..50 {
            let depth = e.queues()[facing(&topo, 0).idx()].queue_bytes(3);
            let id = admit(&topo, &mut e, &mut c, pkt, 3);
            let ce = c.packets.get(id).ecn() == ecn::CE;
            if depth < cfg.min && ce {
                marked_below += 1;
            }
            if depth >= cfg.max {
                assert!(ce, "unmarked at {depth} B");
            }
        }
        assert_eq!(marked_below, 0);
        assert!(e.counters.ecn_marks > 0);
        let counts = e.queues()[facing(&topo, 0).idx()].counts[3];
        assert_eq!(counts.ecn_marks, e.counters.ecn_marks);
        assert!(e.firsts.ecn_mark_ps.is_some());
    }

    #[test]
    fn wred_on_dequeue_marks_as_frames_leave_by_the_depth_behind_them() {
        let (topo, mut e, mut c) = leaf(&[]);
        let out = facing(&topo, 0);
        let pkt = data(24, 1024);
        for _ in 0..50 {
            admit(&topo, &mut e, &mut c, pkt, 3);
        }
        assert_eq!(e.counters.ecn_marks, 0, "nothing is marked on the way in");
        let mut behind = Vec::new();
        while e.ports()[out.idx()].queued > 0 {
            c.now = e.ports()[out.idx()].busy_until;
            let before = c.asked.len();
            let _ = e.tx_done(&mut c, out);
            let depth = e.queues()[out.idx()].queue_bytes(3);
            for &(_, w) in &c.asked[before..] {
                if let Timed::Arrive(_, id) = w {
                    behind.push((depth, c.packets.get(id).ecn() == ecn::CE));
                }
            }
        }
        assert!(behind.iter().all(|&(d, ce)| ce || d < 40_000));
        assert!(behind.iter().all(|&(d, ce)| !ce || d >= 20_000));
        assert!(e.counters.ecn_marks >= behind.iter().filter(|(d, _)| *d >= 40_000).count() as u64);
        assert!(e.counters.ecn_marks > 0);
    }

    #[test]
    fn a_lossy_frame_past_the_buffer_is_dropped_and_reported_to_the_caller() {
        let (topo, mut e, mut c) = leaf(&["switch.buffer=\"256KB\""]);
        let out = facing(&topo, 0);
        let pkt = data(0, 4096);
        let mut admitted = 0u32;
        while e.drops()[out.idx()].packets == 0 {
            admit(&topo, &mut e, &mut c, pkt, 0);
            admitted += 1;
            assert!(admitted < 100);
        }
        assert!(e.switches()[0].buffer.used <= 256 * 1024);
        let fates = e.take_fates();
        assert_eq!(fates.len(), 1);
        assert!(matches!(fates[0], Fate::Dropped(p) if p.payload == 4096));
        assert_eq!(e.queues()[out.idx()].counts[0].drops, 1);
        // The dropped packet's slot is free again.
        assert_eq!(c.packets.iter_live().count() as u32, admitted - 1);
        e.check_buffers().unwrap();
    }

    #[test]
    fn a_nic_port_hands_its_turn_to_the_caller_unless_its_data_queue_is_paused() {
        let (topo, mut e, mut c) = leaf(&[]);
        let nic_port = topo.nics[0].ports[0];
        assert_eq!(e.kick(&mut c, nic_port), NicTurn(Some(NicId(0))));
        // Paused by its switch on the data queue: no turn, and a wake-up
        // when the pause ends if QPs wait.
        let mut pause = data(24, 0);
        pause.opcode = Opcode::Pause;
        pause.psn = 100;
        pause.tos = 1 << 3;
        c.backlog = true;
        assert_eq!(e.receive_pause(&mut c, nic_port, &pause), NicTurn::NONE);
        assert_eq!(e.kick(&mut c, nic_port), NicTurn::NONE);
        let until = pause_time(100, topo.port(nic_port).rate);
        assert_eq!(c.asked, vec![(until, Timed::Wake(nic_port))]);
        // A resume gives the turn back at once.
        pause.psn = 0;
        assert_eq!(
            e.receive_pause(&mut c, nic_port, &pause),
            NicTurn(Some(NicId(0)))
        );
    }

    #[test]
    fn frames_queued_at_or_offered_to_a_dead_port_are_lost_and_give_their_buffer_back() {
        let (topo, mut e, mut c) = leaf(&[]);
        let out = facing(&topo, 0);
        let pkt = data(24, 4096);
        for _ in 0..3 {
            admit(&topo, &mut e, &mut c, pkt, 3);
        }
        assert_eq!(e.ports()[out.idx()].queued, 2);
        let _ = e.set_down(&mut c, out, true);
        admit(&topo, &mut e, &mut c, pkt, 3);
        let lost: Vec<_> = e
            .take_fates()
            .into_iter()
            .filter(|f| matches!(f, Fate::Lost(p, _) if *p == out))
            .collect();
        assert_eq!(lost.len(), 3, "two queued and one offered");
        assert_eq!(e.switches()[0].buffer.used, 0);
        assert_eq!(e.pfc()[e.pfc_index(facing(&topo, 1), 3).unwrap()].bytes, 0);
        e.check_buffers().unwrap();
    }
}
