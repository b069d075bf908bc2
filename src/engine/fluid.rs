//! The flow-level network (`simulation.fidelity = "flow"`): transfers
//! move as fluids on their paths instead of packet by packet.
//!
//! Each QP's share of a transfer is a sub-flow on the path its packets
//! would take (the same QPs, the same ECMP hash, so the same collisions).
//! The sub-flows share every link and each GPU's PCIe max-min fairly
//! (progressive filling), recomputed whenever one starts or finishes; a
//! rate cap caps its sub-flows. Bytes are counted on the wire (headers,
//! preamble and gap of every packet) and PCIe carries the payload. A
//! sub-flow alone takes exactly its ideal completion time: what its
//! bytes take at its path's narrowest rate, plus the rest of that time
//! (the pipeline through the hops, propagation) as a fixed latency after
//! its last byte leaves. Its acknowledgement comes back the path's
//! propagation and one ACK frame per hop later.
//!
//! Not modelled, by construction: queues, ECN, PFC, drops and
//! retransmissions, the congestion controls (a fluid is at its fair share
//! at once), ACK traffic on the reverse links. The task graph, NVLink and
//! collectives' passes run as in the packet simulation, over this
//! network.

use super::{Event, Simulation};
use crate::nic::transport::Requester;
use crate::topology::{FlowId, PortId, QpId};
use crate::units::SimTime;
use crate::wire::frame::Opcode;

/// The fluid network's state.
#[derive(Default, serde::Serialize, serde::Deserialize)]
pub struct Fluid {
    subs: Vec<Sub>,
    /// Capacity of each resource, wire bytes per picosecond: the ports
    /// (by port id), then each GPU's PCIe (payload bytes per picosecond).
    cap: Vec<f64>,
    /// When the rates were last set.
    since: SimTime,
    /// When the next sub-flow finishes sending (the `FluidNext` that
    /// counts; earlier ones are stale).
    next: SimTime,
    /// Resources below this number are ports.
    ports: u32,
    /// Scratch: each resource's number among those in use while rates
    /// are worked out (`u32::MAX` otherwise).
    local: Vec<u32>,
}

/// Progressive filling's state: each resource's capacity left, the
/// weight and number of its sub-flows not yet frozen, and which are.
struct Filling {
    left: Vec<f64>,
    weight: Vec<f64>,
    unfrozen: Vec<u32>,
    frozen: Vec<bool>,
}

impl Filling {
    /// Sub-flow `i` (`sub`, using `uses` in local numbers) keeps rate
    /// `level`, taking it from its resources.
    fn freeze(&mut self, sub: &mut Sub, uses: &[(u32, f64)], i: usize, level: f64) {
        if self.frozen[i] {
            return;
        }
        self.frozen[i] = true;
        sub.rate = level;
        for &(l, w) in uses {
            self.left[l as usize] -= level * w;
            self.weight[l as usize] -= w;
            self.unfrozen[l as usize] -= 1;
        }
    }
}

/// A rate level, ordered (never NaN: capacities and weights are positive).
#[derive(Clone, Copy)]
struct Level(f64);

impl PartialEq for Level {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o).is_eq()
    }
}

impl Eq for Level {}

impl PartialOrd for Level {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Level {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0)
    }
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct Sub {
    flow: FlowId,
    qp: QpId,
    /// Wire bytes still to send.
    left: f64,
    /// Wire bytes per picosecond.
    rate: f64,
    /// Its rate cap (wire bytes per picosecond), if any.
    cap: f64,
    /// The resources it uses and how much of each per wire byte.
    uses: Vec<(u32, f64)>,
    /// From its last byte leaving to its receiver having it, and on to
    /// the acknowledgement.
    latency: SimTime,
    ack_latency: SimTime,
}

impl Fluid {
    /// A fluid network over ports with these rates (bits per second) and
    /// `gpus` GPUs behind PCIe of `pcie` payload bytes per second (`None`:
    /// PCIe never binds).
    pub fn new(port_bps: impl Iterator<Item = u64>, gpus: usize, pcie: Option<f64>) -> Fluid {
        let mut cap: Vec<f64> = port_bps.map(|b| b as f64 / 8e12).collect();
        let ports = cap.len();
        cap.extend(std::iter::repeat_n(
            pcie.map_or(f64::INFINITY, |b| b / 1e12),
            gpus,
        ));
        Fluid {
            subs: Vec::new(),
            local: vec![u32::MAX; cap.len()],
            cap,
            since: SimTime::ZERO,
            next: SimTime::MAX,
            ports: ports as u32,
        }
    }

    /// Moves every sub-flow on to `now` at its rate; `sent` hears of the
    /// wire bytes each port of theirs sent.
    fn advance(&mut self, now: SimTime, mut sent: impl FnMut(PortId, u64)) {
        let dt = (now.0 - self.since.0) as f64;
        self.since = now;
        if dt == 0.0 {
            return;
        }
        let ports = self.ports;
        for s in &mut self.subs {
            let moved = (s.rate * dt).min(s.left);
            s.left -= moved;
            if moved > 0.0 {
                for &(r, _) in s.uses.iter().filter(|u| u.0 < ports) {
                    sent(PortId(r), moved.round() as u64);
                }
            }
        }
    }

    /// Max-min fair rates by progressive filling: every sub-flow's rate
    /// rises together until a resource (or its own cap) is full; those
    /// through a full resource keep that rate, the others rise on. The
    /// resources wait in a heap by the level at which they fill, which
    /// only rises as sub-flows freeze, so a stale entry is put back with
    /// its new level when it comes up: each sub-flow is frozen once.
    fn share(&mut self) {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let n = self.subs.len();
        // The resources in use, numbered locally (`local` maps back to
        // -1 after), and each sub-flow's uses in those numbers.
        let mut global: Vec<u32> = Vec::new();
        let mut at = Vec::with_capacity(n + 1);
        let mut flat: Vec<(u32, f64)> = Vec::new();
        at.push(0u32);
        for s in &self.subs {
            for &(r, w) in &s.uses {
                let l = &mut self.local[r as usize];
                if *l == u32::MAX {
                    *l = global.len() as u32;
                    global.push(r);
                }
                flat.push((*l, w));
            }
            at.push(flat.len() as u32);
        }
        for &r in &global {
            self.local[r as usize] = u32::MAX;
        }
        let m = global.len();
        let mut weight = vec![0.0f64; m];
        let mut users_of = vec![0u32; m + 1];
        for &(l, w) in &flat {
            weight[l as usize] += w;
            users_of[l as usize + 1] += 1;
        }
        for l in 0..m {
            users_of[l + 1] += users_of[l];
        }
        let mut fill = users_of.clone();
        let mut users = vec![0u32; flat.len()];
        for i in 0..n {
            for &(l, _) in &flat[at[i] as usize..at[i + 1] as usize] {
                users[fill[l as usize] as usize] = i as u32;
                fill[l as usize] += 1;
            }
        }
        let level_of = |left: f64, w: f64| (left.max(0.0) / w).max(0.0);
        let mut st = Filling {
            left: global.iter().map(|&r| self.cap[r as usize]).collect(),
            weight,
            unfrozen: (0..m).map(|l| users_of[l + 1] - users_of[l]).collect(),
            frozen: vec![false; n],
        };
        // (level, resource); numbers past m are sub-flows' caps.
        let mut heap: BinaryHeap<Reverse<(Level, u32)>> = (0..m)
            .map(|l| Reverse((Level(level_of(st.left[l], st.weight[l])), l as u32)))
            .collect();
        for (i, s) in self.subs.iter().enumerate() {
            if s.cap.is_finite() {
                heap.push(Reverse((Level(s.cap), (m + i) as u32)));
            }
        }
        while let Some(Reverse((Level(level), id))) = heap.pop() {
            let id = id as usize;
            if id >= m {
                let i = id - m;
                st.freeze(
                    &mut self.subs[i],
                    &flat[at[i] as usize..at[i + 1] as usize],
                    i,
                    level,
                );
                continue;
            }
            if st.unfrozen[id] == 0 {
                continue;
            }
            let now = level_of(st.left[id], st.weight[id]);
            if now > level * (1.0 + 1e-12) {
                heap.push(Reverse((Level(now), id as u32)));
                continue;
            }
            for k in users_of[id]..users_of[id + 1] {
                let i = users[k as usize] as usize;
                st.freeze(
                    &mut self.subs[i],
                    &flat[at[i] as usize..at[i + 1] as usize],
                    i,
                    level,
                );
            }
        }
    }

    /// When the first sub-flow has sent its last byte, at the current rates.
    fn first_done(&self, now: SimTime) -> SimTime {
        self.subs
            .iter()
            .map(|s| {
                if s.left <= 0.5 {
                    now
                } else if s.rate > 0.0 {
                    SimTime(now.0 + (s.left / s.rate).ceil() as u64)
                } else {
                    SimTime::MAX
                }
            })
            .min()
            .unwrap_or(SimTime::MAX)
    }
}

impl Simulation {
    /// Transfer `f` starts on the fluid network: a sub-flow per QP.
    pub(super) fn fluid_start(&mut self, f: FlowId) {
        let now = self.now;
        let fl = self.flow_mut(f);
        let (first, n, bytes, dst, cap) = (
            fl.first_qp,
            fl.n_qps,
            fl.spec.bytes,
            fl.spec.dst_nic,
            fl.spec.rate,
        );
        let tc = &self.scenario.transport;
        let framing = self.scenario.qos.framing;
        let pcie = self.nics.pcie_ps_per_byte();
        let ports = self.topo.ports.len() as u32;
        let mut subs = Vec::with_capacity(n as usize);
        for i in 0..n {
            let q = QpId(first + i);
            let share = super::build::share(bytes, n, i);
            let req = Requester::one(f.0, share, tc.mtu, tc.write_mode);
            let wire: u64 = (0..req.n_pkts)
                .map(|p| u64::from(framing.wire_bytes(req.opcode_of(p), req.payload_of(p))))
                .sum();
            let route = self.route_of(q, dst);
            let alone = super::ideal::ideal_fct(
                &self.topo,
                framing,
                &[&req],
                std::slice::from_ref(&route),
                pcie,
            );
            let gpu = self.nics.qp(q).src_gpu;
            let mut uses: Vec<(u32, f64)> = route.iter().map(|p| (p.0, 1.0)).collect();
            if pcie.is_some() && wire > 0 {
                uses.push((ports + gpu.0, share as f64 / wire as f64));
            }
            // What its bytes take alone at the path's narrowest rate; the
            // rest of its ideal time is latency.
            let narrowest = route
                .iter()
                .map(|&p| self.topo.port(p).rate.bps())
                .min()
                .unwrap_or(1);
            let mut busy = wire as f64 * 8e12 / narrowest as f64;
            if let Some(ps) = pcie {
                busy = busy.max(share as f64 * ps);
            }
            let sub_cap = cap.map_or(f64::INFINITY, |c| c.bps() as f64 / 8e12 / f64::from(n));
            busy = busy.max(wire as f64 / sub_cap);
            let ack_frame = u64::from(framing.wire_bytes(Opcode::Ack, 0));
            let ack_latency = route.iter().fold(SimTime::ZERO, |t, &p: &PortId| {
                let port = self.topo.port(p);
                t + port.delay + port.rate.serialize(ack_frame)
            });
            subs.push(Sub {
                flow: f,
                qp: q,
                left: wire as f64,
                rate: 0.0,
                cap: sub_cap,
                uses,
                latency: SimTime(alone.0.saturating_sub(busy.ceil() as u64)),
                ack_latency,
            });
        }
        let fluid = self.fluid.as_mut().expect("a fluid run");
        let egress = &mut self.egress;
        fluid.advance(now, |p, b| egress.fluid_sent(p, b));
        fluid.subs.extend(subs);
        self.fluid_reshare();
    }

    /// Rates anew, and the event for the next sub-flow to finish sending.
    fn fluid_reshare(&mut self) {
        let now = self.now;
        let fluid = self.fluid.as_mut().expect("a fluid run");
        fluid.share();
        let next = fluid.first_done(now);
        fluid.next = next;
        if next != SimTime::MAX {
            self.queue.push(next, Event::FluidNext);
        }
    }

    /// Sub-flows whose last byte has left: their receivers have it a
    /// latency later; the rest share what they leave.
    pub(super) fn fluid_next(&mut self) {
        let now = self.now;
        let fluid = self.fluid.as_mut().expect("a fluid run");
        if fluid.next != now {
            return; // a stale event: the rates changed since
        }
        let egress = &mut self.egress;
        fluid.advance(now, |p, b| egress.fluid_sent(p, b));
        let mut done = Vec::new();
        let mut i = 0;
        while i < fluid.subs.len() {
            let s = &fluid.subs[i];
            if s.left <= 0.5 || (s.rate > 0.0 && s.left / s.rate < 1.0) {
                done.push(fluid.subs.remove(i));
            } else {
                i += 1;
            }
        }
        for s in done {
            self.flow_sent(s.flow);
            let at = now + s.latency;
            self.queue.push(at, Event::FluidRx(s.qp, s.flow));
            self.queue
                .push(at + s.ack_latency, Event::FluidAck(s.qp, s.flow));
        }
        self.fluid_reshare();
    }

    /// QP `q`'s share of transfer `f` has reached its receiver.
    pub(super) fn fluid_rx(&mut self, q: QpId, f: FlowId) {
        let fl = self.flow_mut(f);
        let bytes = super::build::share(fl.spec.bytes, fl.n_qps, q.0 - fl.first_qp);
        self.counters.bytes_delivered += bytes;
        self.qp_received(f, 0, 0);
    }
}
