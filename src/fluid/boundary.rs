//! The boundary of a hybrid run (`simulation.fidelity = "hybrid"`): which
//! transfers went as packets and through which ports, and how the links
//! both packets and fluids cross are shared. A leaf, as the rest of the
//! fluid network: the engine (`engine::hybrid`) decides which transfers
//! cross the packet region, counts the packets' bytes and sets their
//! ports' rates.
//!
//! Every sync the fluids' capacity on such a link is what the packets
//! left over the last sync, and at least the share of it their number
//! gives them beside the packet QPs through it; the packets serialize at
//! the link's rate less what the fluids send there.

use super::Fluid;
use crate::topology::{FlowId, PortId};
use crate::units::SimTime;
use rustc_hash::FxHashMap;

/// Packet transfers on their ports, and the links they share with fluids.
pub struct Boundary {
    /// Per port: QPs of packet transfers through it still sending.
    packet_qps: Vec<u32>,
    /// Packet transfers still sending, with the ports of their QPs.
    live: FxHashMap<FlowId, Vec<PortId>>,
    /// Ports any packet transfer crossed (`in_touched` marks them), and
    /// the packet bytes each had sent at the last sync.
    touched: Vec<PortId>,
    in_touched: Vec<bool>,
    last_bytes: Vec<u64>,
    /// Ports both kinds cross, as of the last sync (`is_shared` marks
    /// them).
    shared: Vec<PortId>,
    is_shared: Vec<bool>,
    last_sync: SimTime,
    /// Transfers run as packets and as fluids (`perf.json`).
    pub packet_flows: u64,
    pub fluid_flows: u64,
}

impl Boundary {
    pub fn new(ports: usize) -> Boundary {
        Boundary {
            packet_qps: vec![0; ports],
            live: FxHashMap::default(),
            touched: Vec::new(),
            in_touched: vec![false; ports],
            last_bytes: vec![0; ports],
            shared: Vec::new(),
            is_shared: vec![false; ports],
            last_sync: SimTime::ZERO,
            packet_flows: 0,
            fluid_flows: 0,
        }
    }

    /// Transfer `f` goes as packets from `now` over `ports` (each of its
    /// QPs' ports, once per QP); `bytes` tells what packets have sent out
    /// of a port so far. Whether a sync must be set going (none is under
    /// way: the next counts from now).
    pub fn packets(
        &mut self,
        now: SimTime,
        f: FlowId,
        ports: Vec<PortId>,
        bytes: impl Fn(PortId) -> u64,
    ) -> bool {
        self.packet_flows += 1;
        let idle = self.live.is_empty() && self.shared.is_empty();
        if idle {
            self.last_sync = now;
            for &p in &self.touched {
                self.last_bytes[p.idx()] = bytes(p);
            }
        }
        for &p in &ports {
            self.packet_qps[p.idx()] += 1;
            if !self.in_touched[p.idx()] {
                self.in_touched[p.idx()] = true;
                self.touched.push(p);
                self.last_bytes[p.idx()] = bytes(p);
            }
        }
        self.live.insert(f, ports);
        idle
    }

    /// Packet transfer `f` has sent its last packet: its QPs leave its
    /// ports (the next sync gives the fluids their room).
    pub fn sent(&mut self, f: FlowId) {
        for p in self.live.remove(&f).unwrap_or_default() {
            self.packet_qps[p.idx()] -= 1;
        }
    }

    /// A sync at `now`: on each port packets crossed (and whose link is
    /// up), the fluids' capacity (`line` gives the link's, wire bytes per
    /// picosecond; `bytes` what packets sent so far). Returns the ports
    /// shared no longer, whose packets have the whole link again, and
    /// whether another sync is due.
    pub fn sync(
        &mut self,
        now: SimTime,
        fluid: &mut Fluid,
        bytes: impl Fn(PortId) -> Option<u64>,
        line: impl Fn(PortId) -> f64,
    ) -> (Vec<PortId>, bool) {
        let span = (now.0 - self.last_sync.0).max(1) as f64;
        self.last_sync = now;
        let before = std::mem::take(&mut self.shared);
        for &p in &before {
            self.is_shared[p.idx()] = false;
        }
        for &p in &self.touched {
            let Some(b) = bytes(p) else {
                continue; // a dead link: its fluids have nothing
            };
            let sent = (b - self.last_bytes[p.idx()]) as f64;
            self.last_bytes[p.idx()] = b;
            let link = line(p);
            let (n_fluid, _) = fluid.load_at(p.0);
            let n_packet = self.packet_qps[p.idx()];
            let cap = if n_packet == 0 || n_fluid == 0 {
                link
            } else {
                self.shared.push(p);
                self.is_shared[p.idx()] = true;
                let by_number = link * n_fluid as f64 / (n_fluid as f64 + f64::from(n_packet));
                (link - sent / span).max(by_number)
            };
            fluid.set_cap(p.0, cap);
        }
        let freed = before
            .into_iter()
            .filter(|p| !self.is_shared[p.idx()])
            .collect();
        (freed, !(self.live.is_empty() && self.shared.is_empty()))
    }

    /// Each port both kinds cross, with the rate (bits per second) its
    /// packets leave at: the link's (`line`, bits per second) less what
    /// the fluids send there now, and at least a hundredth of it.
    pub fn packet_rates<'a>(
        &'a self,
        fluid: &'a Fluid,
        line: impl Fn(PortId) -> f64 + 'a,
    ) -> impl Iterator<Item = (PortId, f64)> + 'a {
        self.shared.iter().map(move |&p| {
            let link = line(p);
            let (_, load) = fluid.load_at(p.0);
            (p, (link - load * 8e12).max(link / 100.0))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fluid::Sub;
    use crate::topology::QpId;

    /// One port of 1 byte/ps, one fluid sub-flow and one packet QP on it:
    /// packets that sent 3/4 of the link leave the fluid its half by
    /// number; packets that sent 1/10 leave it 9/10; once the packets are
    /// done, the fluid has the link, and packets leave at what it leaves.
    #[test]
    fn a_shared_link_goes_by_what_packets_left_and_by_number() {
        let mut fluid = Fluid::new([8_000_000_000_000u64].into_iter(), 0, None);
        let s = Sub::new(FlowId(0), QpId(0), 1 << 40, f64::INFINITY, vec![(0, 1.0)]);
        fluid.add(s, SimTime::ZERO);
        fluid.share(SimTime::ZERO, |_, _| {});
        let mut b = Boundary::new(1);
        let p = PortId(0);
        assert!(b.packets(SimTime::ZERO, FlowId(1), vec![p], |_| 0));
        let line = |_| 1.0;
        let t = SimTime(1000);
        let (freed, more) = b.sync(t, &mut fluid, |_| Some(750), line);
        assert!(freed.is_empty() && more);
        fluid.share(t, |_, _| {});
        assert_eq!(fluid.load_at(0).1, 0.5);
        let rates: Vec<_> = b.packet_rates(&fluid, |_| 8e12).collect();
        assert_eq!(rates, [(p, 4e12)]);
        let t2 = SimTime(2000);
        b.sync(t2, &mut fluid, |_| Some(850), line);
        fluid.share(t2, |_, _| {});
        assert!((fluid.load_at(0).1 - 0.9).abs() < 1e-12);
        b.sent(FlowId(1));
        let (freed, _) = b.sync(SimTime(3000), &mut fluid, |_| Some(850), line);
        assert_eq!(freed, [p]);
        fluid.share(SimTime(3000), |_, _| {});
        assert_eq!(fluid.load_at(0).1, 1.0);
    }
}
