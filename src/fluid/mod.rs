//! The flow level's network (`simulation.fidelity = "flow"`): sub-flows
//! on their paths' resources at max-min fair rates, worked out again only
//! where something changed. A leaf: it knows ports, QPs and flows by id
//! and nothing of the engine, which drives it (`engine::fluid`) as it
//! would a fabric of queues.
//!
//! Each QP's share of a transfer is a sub-flow on the path its packets
//! would take (the same QPs, the same ECMP hash, so the same collisions).
//! The sub-flows share every link and each GPU's PCIe max-min fairly
//! (progressive filling); a rate cap caps its sub-flows. Bytes are
//! counted on the wire (headers, preamble and gap of every packet) and
//! PCIe carries the payload. A sub-flow alone takes exactly its ideal
//! completion time: what its bytes take at its path's narrowest rate,
//! plus the rest of that time (the pipeline through the hops,
//! propagation) as a fixed latency after its last byte leaves. Its
//! acknowledgement comes back the path's propagation and one ACK frame
//! per hop later.
//!
//! Rates are worked out again only where something changed, and once
//! per instant: a sub-flow that starts or ends marks its resources, and
//! at the end of that instant (`Event::FluidShare`, the last kind of
//! event due at a time) the connected component of the sharing graph
//! around the marked resources (resources linked through the sub-flows
//! that use them) is filled anew. Max-min fair rates of one component
//! do not depend on any other, so the rest keep theirs. Each sub-flow
//! moves on lazily: its bytes left are brought up to date only when its
//! rate changes or it finishes, and a heap holds when each will have
//! sent its last byte at the rates in force.
//!
//! Congestion control (`enable_cc`, DCQCN's QPs): a sub-flow under a rate
//! controller is capped at its QP's rate, and each switch port keeps a
//! virtual queue, the bytes its senders' rates put into it beyond its
//! capacity (`d q / d t = D - C`, at least 0, at most the buffer), where D
//! counts each sub-flow at its sending rate: its QP's rate, and its share
//! of its NIC port and PCIe. WRED on that queue marks a sub-flow's
//! packets with the probability its depth gives (combined over its
//! ports), and the expected marks add up; each whole one is a CNP, which
//! the engine hands to the QP's own reaction point (`nic::dcqcn`) on a
//! tick (`tick`). While a port's queue holds bytes the port is busy
//! whatever its senders' rates: the sub-flows through it are not held to
//! their QPs' rates until it has drained.
//!
//! PFC (`pfc`): lossless QPs without congestion control send until they
//! are paused. Where a component's ingress counters would reach xOFF
//! within the first half of what its senders have left, its rates are
//! PFC's steady state instead of max-min: each egress serves its ingress
//! ports equally, and a paused port slows everything in its FIFO.
//!
//! Not modelled, by construction: drops and retransmissions, the
//! window-based congestion controls and TIMELY (a fluid under them is at
//! its fair share at once), ACK traffic on the reverse links. The task
//! graph, NVLink and collectives' passes run as in the packet
//! simulation, over this network.

pub mod boundary;
mod cc;
mod pfc;

pub use cc::{Marking, Tick, TICK};

use crate::topology::{FlowId, PortId, QpId};
use crate::units::SimTime;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The fluid network's state: the max-min solver over resources (ports,
/// then each GPU's PCIe) and the sub-flows on them.
#[derive(Default)]
pub struct Fluid {
    /// Sub-flows by id; ids of finished ones are reused (`free`).
    subs: Vec<Sub>,
    free: Vec<u32>,
    /// Capacity of each resource, wire bytes per picosecond: the ports
    /// (by port id), then each GPU's PCIe (payload bytes per picosecond).
    cap: Vec<f64>,
    /// Resources below this number are ports.
    ports: u32,
    /// The sub-flows using each resource.
    users: Vec<Vec<u32>>,
    /// Resources whose sub-flows changed since rates were last shared.
    dirty: Vec<u32>,
    /// A share is due at the end of the current instant.
    pub pending: bool,
    /// When each sub-flow sends its last byte at its rate: (time, id,
    /// generation); entries of an older generation are stale.
    due: BinaryHeap<Reverse<(SimTime, u32, u32)>>,
    /// When the engine's next look at finished sub-flows that counts is
    /// due (earlier ones went, later ones are stale); the engine keeps it.
    pub next: SimTime,
    /// Scratch: marks of the current component search (`epoch`), and each
    /// resource's number in the component while it is filled.
    seen_res: Vec<u32>,
    seen_sub: Vec<u32>,
    epoch: u32,
    local: Vec<u32>,
    /// How often rates were shared and over how many sub-flows in all
    /// (`perf.json`).
    pub shares: u64,
    pub shared_subs: u64,
    /// Congestion control's state, when a rate controller runs, and when
    /// its next tick is due (the engine keeps it, as `next`).
    cc: Option<Box<cc::Cc>>,
    pub cc_next: SimTime,
    /// Which switch ports would queue in packets (`watch`), when asked.
    watch: Option<Box<Watch>>,
    /// The fabric's devices, where lossless senders without congestion
    /// control are paused rather than shared (`pfc`).
    pfc: Option<Box<pfc::Pfc>>,
}

/// Switch ports a run has saturated with transfers from two or more NICs,
/// or from one NIC faster than the port: where packets would queue
/// (`engine::hybrid` makes their switches its packet region).
struct Watch {
    switch_port: Vec<bool>,
    /// Each NIC's line rate (wire bytes per picosecond), by `Sub::src`.
    line: Vec<f64>,
    hot: Vec<bool>,
}

/// One sub-flow: a QP's share of a transfer.
#[derive(Clone, Debug)]
pub struct Sub {
    pub flow: FlowId,
    pub qp: QpId,
    /// Wire bytes still to send at `since`.
    left: f64,
    since: SimTime,
    /// Wire bytes in all, and those already counted on its ports.
    wire: u64,
    counted: u64,
    /// Wire bytes per picosecond.
    rate: f64,
    /// Its rate cap (wire bytes per picosecond), if any.
    cap: f64,
    /// The resources it uses and how much of each per wire byte, and its
    /// place in each one's list of users.
    uses: Vec<(u32, f64)>,
    at: Vec<u32>,
    /// From its last byte leaving to its receiver having it, and on to
    /// the acknowledgement.
    pub latency: SimTime,
    pub ack_latency: SimTime,
    gen: u32,
    live: bool,
    /// The ring pass whose stream it is (`runtime::streams`), or
    /// `u32::MAX` for a QP's share of a transfer.
    pub pass: u32,
    /// The NIC it leaves from (`u32::MAX` for a ring stream), which
    /// `watch` tells apart.
    pub src: u32,
    /// A lossless QP without congestion control: it sends until paused
    /// (`pfc`).
    pub pfc: bool,
    /// Under a rate controller: its QP's rate (wire bytes per picosecond)
    /// and when that next moves by itself, its sending rate, its marks not
    /// yet turned into a CNP, and its bytes left at the last tick.
    pub cc: bool,
    pub cc_rate: f64,
    cc_next: SimTime,
    cnp_at: Option<SimTime>,
    demand: f64,
    marks: f64,
    left_at_tick: f64,
}

impl Sub {
    /// A sub-flow of `wire` bytes over `uses`, capped at `cap` (wire bytes
    /// per picosecond; infinite for none).
    pub fn new(flow: FlowId, qp: QpId, wire: u64, cap: f64, uses: Vec<(u32, f64)>) -> Sub {
        Sub {
            flow,
            qp,
            left: wire as f64,
            since: SimTime::ZERO,
            wire,
            counted: 0,
            rate: 0.0,
            cap,
            at: Vec::with_capacity(uses.len()),
            uses,
            latency: SimTime::ZERO,
            ack_latency: SimTime::ZERO,
            gen: 0,
            live: false,
            pass: u32::MAX,
            src: u32::MAX,
            pfc: false,
            cc: false,
            cc_rate: f64::INFINITY,
            cc_next: SimTime::MAX,
            cnp_at: None,
            demand: 0.0,
            marks: 0.0,
            left_at_tick: wire as f64,
        }
    }
}

impl Sub {
    /// `bytes` more of its wire bytes have left: each port it uses counts
    /// its share of them (all of them on a path; a balancer's split
    /// spreads them).
    fn count_on_ports(&self, bytes: u64, ports: u32, sent: &mut impl FnMut(PortId, u64)) {
        for &(r, share) in self.uses.iter().filter(|u| u.0 < ports) {
            let b = if share == 1.0 {
                bytes
            } else {
                (bytes as f64 * share).round() as u64
            };
            sent(PortId(r), b);
        }
    }
}

/// Progressive filling's state over one component: each resource's
/// capacity left, the weight and number of its sub-flows not yet frozen.
struct Filling {
    left: Vec<f64>,
    weight: Vec<f64>,
    unfrozen: Vec<u32>,
    frozen: Vec<bool>,
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
        let n = cap.len();
        Fluid {
            cap,
            ports: ports as u32,
            users: vec![Vec::new(); n],
            seen_res: vec![0; n],
            local: vec![u32::MAX; n],
            next: SimTime::MAX,
            cc_next: SimTime::MAX,
            ..Fluid::default()
        }
    }

    /// Sub-flow `s` starts at `now`; it has a rate from the next share.
    pub fn add(&mut self, mut s: Sub, now: SimTime) -> u32 {
        s.since = now;
        s.rate = 0.0;
        s.live = true;
        s.at.clear();
        let id = match self.free.pop() {
            Some(i) => {
                s.gen = self.subs[i as usize].gen.wrapping_add(1);
                self.subs[i as usize] = s;
                i
            }
            None => {
                self.subs.push(s);
                self.seen_sub.push(0);
                self.subs.len() as u32 - 1
            }
        };
        self.attach(id);
        id
    }

    /// Sub-flow `id` leaves the network (its bytes are already moved).
    fn remove(&mut self, id: u32) {
        self.detach(id);
        let s = &mut self.subs[id as usize];
        s.live = false;
        s.gen = s.gen.wrapping_add(1);
        self.free.push(id);
    }

    /// Sub-flow `id` stops using its resources; it keeps its list of them.
    fn detach(&mut self, id: u32) {
        let s = &mut self.subs[id as usize];
        let (uses, at) = (std::mem::take(&mut s.uses), std::mem::take(&mut s.at));
        for (&(r, _), &pos) in uses.iter().zip(&at) {
            let list = &mut self.users[r as usize];
            list.swap_remove(pos as usize);
            if let Some(&moved) = list.get(pos as usize) {
                let m = &mut self.subs[moved as usize];
                let k = m.uses.iter().position(|u| u.0 == r).expect("a user of r");
                m.at[k] = pos;
            }
            self.dirty.push(r);
        }
        self.subs[id as usize].uses = uses;
    }

    /// Sub-flow `id` uses the resources of its list.
    fn attach(&mut self, id: u32) {
        let s = &mut self.subs[id as usize];
        s.at.clear();
        for &(r, _) in &s.uses {
            let list = &mut self.users[r as usize];
            s.at.push(list.len() as u32);
            list.push(id);
            self.dirty.push(r);
        }
    }

    /// Resource `r` now carries `cap` (a link down at 0, up again, or
    /// slower): its sub-flows are shared anew at the next share.
    pub fn set_cap(&mut self, r: u32, cap: f64) {
        if self.cap[r as usize] != cap {
            self.cap[r as usize] = cap;
            self.dirty.push(r);
        }
    }

    /// The live sub-flows: id, QP, transfer, and the ring pass whose
    /// stream it is (`u32::MAX` for none).
    pub fn live(&self) -> Vec<(u32, QpId, FlowId, u32)> {
        (0..self.subs.len() as u32)
            .filter(|&i| self.subs[i as usize].live)
            .map(|i| {
                let s = &self.subs[i as usize];
                (i, s.qp, s.flow, s.pass)
            })
            .collect()
    }

    /// Sub-flow `id` (brought up to `now` first) goes over `ports` from
    /// now on, with its other resources (PCIe) as they were.
    pub fn reroute(
        &mut self,
        id: u32,
        ports: Vec<(u32, f64)>,
        now: SimTime,
        sent: &mut impl FnMut(PortId, u64),
    ) {
        self.settle(id, now, sent);
        let n = self.ports;
        let same = {
            let old: Vec<(u32, f64)> = self.subs[id as usize]
                .uses
                .iter()
                .copied()
                .filter(|u| u.0 < n)
                .collect();
            old == ports
        };
        if same {
            return;
        }
        self.detach(id);
        let s = &mut self.subs[id as usize];
        let rest: Vec<(u32, f64)> = s.uses.iter().copied().filter(|u| u.0 >= n).collect();
        s.uses = ports;
        s.uses.extend(rest);
        self.attach(id);
    }

    /// Whether a share is owed: sub-flows started or ended since the last.
    pub fn changed(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// Brings sub-flow `id` up to `now` at its rate; `sent` hears of the
    /// wire bytes its ports sent meanwhile.
    /// Brings every live sub-flow's bytes up to `now` (the run stops).
    pub fn settle_all(&mut self, now: SimTime, sent: &mut impl FnMut(PortId, u64)) {
        for id in 0..self.subs.len() as u32 {
            if self.subs[id as usize].live {
                self.settle(id, now, sent);
            }
        }
    }

    fn settle(&mut self, id: u32, now: SimTime, sent: &mut impl FnMut(PortId, u64)) {
        let ports = self.ports;
        let s = &mut self.subs[id as usize];
        let dt = now.0.saturating_sub(s.since.0) as f64;
        s.since = now;
        if dt > 0.0 && s.rate > 0.0 {
            s.left = (s.left - s.rate * dt).max(0.0);
        }
        let moved = ((s.wire as f64 - s.left).round() as u64).min(s.wire);
        if moved > s.counted {
            s.count_on_ports(moved - s.counted, ports, sent);
            s.counted = moved;
        }
    }

    /// Sub-flow `id` has sent its last byte at `now`: its ports count the
    /// rest of its bytes and it leaves the network.
    pub fn finish(&mut self, id: u32, now: SimTime, sent: &mut impl FnMut(PortId, u64)) -> Sub {
        self.settle(id, now, sent);
        let ports = self.ports;
        let s = &mut self.subs[id as usize];
        if s.wire > s.counted {
            s.count_on_ports(s.wire - s.counted, ports, sent);
            s.counted = s.wire;
        }
        let done = s.clone();
        self.remove(id);
        done
    }

    /// Rates anew over the components of the sharing graph around the
    /// resources that changed; the rest keep theirs.
    pub fn share(&mut self, now: SimTime, mut sent: impl FnMut(PortId, u64)) {
        self.pending = false;
        if self.dirty.is_empty() {
            return;
        }
        if self.cc.is_some() {
            return self.share_cc(now, &mut sent);
        }
        let epoch = self.next_epoch();
        let mut stack = std::mem::take(&mut self.dirty);
        let mut res: Vec<u32> = Vec::new();
        stack.retain(|&r| {
            let new = self.seen_res[r as usize] != epoch;
            self.seen_res[r as usize] = epoch;
            if new {
                res.push(r);
            }
            new
        });
        let mut comp: Vec<u32> = Vec::new();
        while let Some(r) = stack.pop() {
            for &i in &self.users[r as usize] {
                if self.seen_sub[i as usize] == epoch {
                    continue;
                }
                self.seen_sub[i as usize] = epoch;
                comp.push(i);
                for &(r2, _) in &self.subs[i as usize].uses {
                    if self.seen_res[r2 as usize] != epoch {
                        self.seen_res[r2 as usize] = epoch;
                        res.push(r2);
                        stack.push(r2);
                    }
                }
            }
        }
        self.dirty = stack;
        for &i in &comp {
            self.settle(i, now, &mut sent);
        }
        if !self.fill_pfc(&res, &comp) {
            self.fill(&res, &comp);
        }
        for &i in &comp {
            self.due_at(i, now);
        }
        if self.watch.is_some() {
            self.note_hot(&res);
        }
        self.shares += 1;
        self.shared_subs += comp.len() as u64;
    }

    /// From now on, note the switch ports (`switch_port`, by port id) that
    /// rates saturate where packets would queue: with sub-flows from two
    /// or more NICs, or with one from a NIC whose line rate (`line`, by
    /// NIC) is above the port's.
    pub fn watch(&mut self, switch_port: Vec<bool>, line: Vec<f64>) {
        let hot = vec![false; switch_port.len()];
        self.watch = Some(Box::new(Watch {
            switch_port,
            line,
            hot,
        }));
    }

    /// The ports `watch` found saturated so far.
    pub fn hot_ports(&self) -> Vec<PortId> {
        let Some(w) = self.watch.as_deref() else {
            return Vec::new();
        };
        (0..w.hot.len() as u32)
            .filter(|&p| w.hot[p as usize])
            .map(PortId)
            .collect()
    }

    fn note_hot(&mut self, res: &[u32]) {
        let w = self.watch.as_deref_mut().expect("watching");
        for &r in res {
            let ru = r as usize;
            if r >= self.ports || !w.switch_port[ru] || w.hot[ru] || self.cap[ru] <= 0.0 {
                continue;
            }
            let cap = self.cap[ru];
            let (mut load, mut first, mut two, mut faster) = (0.0, None, false, false);
            for &i in &self.users[ru] {
                let s = &self.subs[i as usize];
                let share = s.uses.iter().find(|u| u.0 == r).map_or(1.0, |u| u.1);
                load += s.rate * share;
                match first {
                    None => first = Some(s.src),
                    Some(f) => two |= f != s.src || s.src == u32::MAX,
                }
                faster |= w.line.get(s.src as usize).is_some_and(|&l| l > cap * 1.001);
            }
            if load >= cap * 0.999 && (two || faster) {
                w.hot[ru] = true;
            }
        }
    }

    /// Sub-flows on resource `r` now, and the wire bytes per picosecond
    /// they send through it.
    pub fn load_at(&self, r: u32) -> (usize, f64) {
        let users = &self.users[r as usize];
        let load = users
            .iter()
            .map(|&i| {
                let s = &self.subs[i as usize];
                s.rate * s.uses.iter().find(|u| u.0 == r).map_or(1.0, |u| u.1)
            })
            .sum();
        (users.len(), load)
    }

    /// A new mark for resources and sub-flows seen (`seen_res`,
    /// `seen_sub`).
    fn next_epoch(&mut self) -> u32 {
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.seen_res.iter_mut().for_each(|m| *m = 0);
            self.seen_sub.iter_mut().for_each(|m| *m = 0);
            self.epoch = 1;
        }
        self.epoch
    }

    /// Sub-flow `i` has a new rate at `now`: when it will have sent its
    /// last byte at it goes on the heap (older entries are stale).
    fn due_at(&mut self, i: u32, now: SimTime) {
        let s = &mut self.subs[i as usize];
        s.gen = s.gen.wrapping_add(1);
        let at = if s.left <= 0.5 {
            now
        } else if s.rate > 0.0 {
            SimTime(now.0.saturating_add((s.left / s.rate).ceil() as u64))
        } else {
            return;
        };
        self.due.push(Reverse((at, i, s.gen)));
        let live = self.subs.len() - self.free.len();
        if self.due.len() > 4 * live + 4096 {
            let subs = &self.subs;
            self.due
                .retain(|e| subs[e.0 .1 as usize].live && subs[e.0 .1 as usize].gen == e.0 .2);
        }
    }

    /// Max-min fair rates of sub-flows `comp`, which use resources `res`
    /// and only those, by progressive filling: every sub-flow's rate
    /// rises together until a resource (or its own cap) is full; those
    /// through a full resource keep that rate, the others rise on. The
    /// resources wait in a heap by the level at which they fill, which
    /// only rises as sub-flows freeze, so a stale entry is put back with
    /// its new level when it comes up: each sub-flow is frozen once.
    fn fill(&mut self, res: &[u32], comp: &[u32]) {
        let (n, m) = (comp.len(), res.len());
        for (l, &r) in res.iter().enumerate() {
            self.local[r as usize] = l as u32;
        }
        // Each sub-flow's uses in local numbers, in rows.
        let mut at = Vec::with_capacity(n + 1);
        let mut flat: Vec<(u32, f64)> = Vec::new();
        at.push(0u32);
        for &i in comp {
            for &(r, w) in &self.subs[i as usize].uses {
                flat.push((self.local[r as usize], w));
            }
            at.push(flat.len() as u32);
        }
        for &r in res {
            self.local[r as usize] = u32::MAX;
        }
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
            left: res.iter().map(|&r| self.cap[r as usize]).collect(),
            weight,
            unfrozen: (0..m).map(|l| users_of[l + 1] - users_of[l]).collect(),
            frozen: vec![false; n],
        };
        let mut rate = vec![0.0f64; n];
        let mut freeze = |st: &mut Filling, i: usize, level: f64| {
            if st.frozen[i] {
                return;
            }
            st.frozen[i] = true;
            rate[i] = level;
            for &(l, w) in &flat[at[i] as usize..at[i + 1] as usize] {
                st.left[l as usize] -= level * w;
                st.weight[l as usize] -= w;
                st.unfrozen[l as usize] -= 1;
            }
        };
        // (level, resource); numbers past m are sub-flows' caps.
        let mut heap: BinaryHeap<Reverse<(Level, u32)>> = (0..m)
            .filter(|&l| st.unfrozen[l] > 0)
            .map(|l| Reverse((Level(level_of(st.left[l], st.weight[l])), l as u32)))
            .collect();
        for (k, &i) in comp.iter().enumerate() {
            let c = self.subs[i as usize].cap;
            if c.is_finite() {
                heap.push(Reverse((Level(c), (m + k) as u32)));
            }
        }
        while let Some(Reverse((Level(level), id))) = heap.pop() {
            let id = id as usize;
            if id >= m {
                freeze(&mut st, id - m, level);
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
                freeze(&mut st, users[k as usize] as usize, level);
            }
        }
        for (k, &i) in comp.iter().enumerate() {
            self.subs[i as usize].rate = rate[k];
        }
    }

    /// The sub-flows that have sent their last byte by `now`, taken off
    /// the heap.
    pub fn due_by(&mut self, now: SimTime) -> Vec<u32> {
        let mut out = Vec::new();
        while let Some(&Reverse((t, id, gen))) = self.due.peek() {
            if t > now {
                break;
            }
            self.due.pop();
            let s = &self.subs[id as usize];
            if s.live && s.gen == gen {
                out.push(id);
            }
        }
        out
    }

    /// When the next sub-flow sends its last byte at the current rates.
    pub fn next_due(&mut self) -> SimTime {
        while let Some(&Reverse((t, id, gen))) = self.due.peek() {
            let s = &self.subs[id as usize];
            if s.live && s.gen == gen {
                return t;
            }
            self.due.pop();
        }
        SimTime::MAX
    }

    /// A live sub-flow's rate (wire bytes per picosecond).
    pub fn rate(&self, id: u32) -> f64 {
        self.subs[id as usize].rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::{RngCore, SeedableRng};

    /// A number in 0..n, and a uniform draw in [0, 1).
    fn below(rng: &mut rand_pcg::Pcg64, n: u64) -> u64 {
        rng.next_u64() % n
    }

    fn unit(rng: &mut rand_pcg::Pcg64) -> f64 {
        (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Links of these capacities in bytes per picosecond.
    fn links(caps: &[f64]) -> Fluid {
        Fluid::new(caps.iter().map(|c| (c * 8e12) as u64), 0, None)
    }

    fn sub(id: u32, over: &[u32]) -> Sub {
        Sub::new(
            FlowId(id),
            QpId(id),
            1_000_000,
            f64::INFINITY,
            over.iter().map(|&r| (r, 1.0)).collect(),
        )
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
    }

    /// The parking lot: a long flow over three links, a short one on each.
    /// Max-min gives the long one half of the narrowest link and each
    /// short one the rest of its own.
    #[test]
    fn parking_lot() {
        // Links of these capacities: the long flow's rate, the short ones'.
        let rates = |caps: &[f64]| {
            let mut f = links(caps);
            let long = f.add(sub(0, &[0, 1, 2]), SimTime::ZERO);
            let short: Vec<u32> = (0..3)
                .map(|l| f.add(sub(l + 1, &[l]), SimTime::ZERO))
                .collect();
            f.share(SimTime::ZERO, |_, _| {});
            (
                f.rate(long),
                short.iter().map(|&s| f.rate(s)).collect::<Vec<_>>(),
            )
        };
        let (long, short) = rates(&[1.0, 1.0, 1.0]);
        assert!(close(long, 0.5));
        for s in short {
            assert!(close(s, 0.5));
        }

        let (long, short) = rates(&[1.0, 2.0, 3.0]);
        assert!(close(long, 0.5));
        let want = [0.5, 1.5, 2.5];
        for (&s, &w) in short.iter().zip(&want) {
            assert!(close(s, w), "{s} against {w}");
        }

        // Two long flows and the first link's short one: a third each
        // there; the second and third links give their short flows the
        // rest.
        let mut f = links(&[1.0, 1.0, 1.0]);
        let longs = [
            f.add(sub(0, &[0, 1, 2]), SimTime::ZERO),
            f.add(sub(1, &[0, 1, 2]), SimTime::ZERO),
        ];
        let s1 = f.add(sub(2, &[0]), SimTime::ZERO);
        let s2 = f.add(sub(3, &[1]), SimTime::ZERO);
        f.share(SimTime::ZERO, |_, _| {});
        for l in longs {
            assert!(close(f.rate(l), 1.0 / 3.0));
        }
        assert!(close(f.rate(s1), 1.0 / 3.0));
        assert!(close(f.rate(s2), 1.0 / 3.0));
    }

    /// A capped sub-flow keeps its cap; the others share what it leaves.
    #[test]
    fn a_cap_leaves_the_rest_to_the_others() {
        let mut f = links(&[1.0]);
        let mut capped = sub(0, &[0]);
        capped.cap = 0.1;
        let capped = f.add(capped, SimTime::ZERO);
        let others = [
            f.add(sub(1, &[0]), SimTime::ZERO),
            f.add(sub(2, &[0]), SimTime::ZERO),
        ];
        f.share(SimTime::ZERO, |_, _| {});
        assert!(close(f.rate(capped), 0.1));
        for o in others {
            assert!(close(f.rate(o), 0.45));
        }
    }

    /// Only the component that changed is filled again; the other keeps
    /// its rates.
    #[test]
    fn only_the_component_that_changed_is_shared() {
        let mut f = links(&[1.0, 1.0]);
        let a = [
            f.add(sub(0, &[0]), SimTime::ZERO),
            f.add(sub(1, &[0]), SimTime::ZERO),
        ];
        let b = f.add(sub(2, &[1]), SimTime::ZERO);
        f.share(SimTime::ZERO, |_, _| {});
        assert_eq!(f.shared_subs, 3);
        let c = f.add(sub(3, &[1]), SimTime(10));
        f.share(SimTime(10), |_, _| {});
        assert_eq!(f.shared_subs, 3 + 2, "the first link's two were left alone");
        assert!(close(f.rate(b), 0.5) && close(f.rate(c), 0.5));
        assert!(close(f.rate(a[0]), 0.5) && close(f.rate(a[1]), 0.5));
    }

    /// Bytes move at the rates in force, and a sub-flow is due when its
    /// last byte has left; the ports count exactly its wire bytes.
    #[test]
    fn bytes_move_at_the_rates_in_force() {
        let mut f = links(&[1.0]);
        let mut counted = 0u64;
        let a = f.add(sub(0, &[0]), SimTime::ZERO);
        f.share(SimTime::ZERO, |_, b| counted += b);
        assert_eq!(f.next_due(), SimTime(1_000_000));
        // A second sub-flow halfway: both at half rate from then.
        f.add(sub(1, &[0]), SimTime(500_000));
        f.share(SimTime(500_000), |_, b| counted += b);
        assert_eq!(counted, 500_000);
        assert_eq!(f.next_due(), SimTime(1_500_000));
        let due = f.due_by(SimTime(1_500_000));
        assert_eq!(due, vec![a]);
        let s = f.finish(a, SimTime(1_500_000), &mut |_, b| counted += b);
        assert_eq!(s.counted, 1_000_000);
        f.share(SimTime(1_500_000), |_, b| counted += b);
        // The second has 500,000 left at full rate.
        assert_eq!(f.next_due(), SimTime(2_000_000));
    }

    /// Sub-flows coming and going at random over random paths: the
    /// incremental rates always equal those of filling everything anew.
    #[test]
    fn incremental_rates_equal_a_full_recomputation() {
        let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
        let caps: Vec<f64> = (0..24).map(|i| 1.0 + (i % 5) as f64).collect();
        for _ in 0..20 {
            let mut f = links(&caps);
            let mut live: Vec<(u32, Vec<u32>, f64)> = Vec::new();
            for step in 0..60u64 {
                let now = SimTime(step * 100);
                if !live.is_empty() && unit(&mut rng) < 0.4 {
                    let k = below(&mut rng, live.len() as u64) as usize;
                    let (id, _, _) = live.swap_remove(k);
                    f.finish(id, now, &mut |_, _| {});
                } else {
                    // Paths within a few groups, so that there are
                    // several components.
                    let group = below(&mut rng, 3) as u32 * 8;
                    let mut over: Vec<u32> = (0..1 + below(&mut rng, 3))
                        .map(|_| group + below(&mut rng, 8) as u32)
                        .collect();
                    over.sort_unstable();
                    over.dedup();
                    let cap = if unit(&mut rng) < 0.2 {
                        0.1 + 1.9 * unit(&mut rng)
                    } else {
                        f64::INFINITY
                    };
                    let mut s = sub(step as u32, &over);
                    s.cap = cap;
                    let id = f.add(s, now);
                    live.push((id, over, cap));
                }
                f.share(now, |_, _| {});
                let mut full = links(&caps);
                let ids: Vec<u32> = live
                    .iter()
                    .map(|(_, over, cap)| {
                        let mut s = sub(0, over);
                        s.cap = *cap;
                        full.add(s, now)
                    })
                    .collect();
                full.share(now, |_, _| {});
                for ((id, _, _), full_id) in live.iter().zip(ids) {
                    assert!(
                        close(f.rate(*id), full.rate(full_id)),
                        "{} against {}",
                        f.rate(*id),
                        full.rate(full_id)
                    );
                }
            }
        }
    }
}
