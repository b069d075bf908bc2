//! The completion time a transfer would have alone on an idle fabric: the
//! denominator of its slowdown.
//!
//! Its packets leave each NIC port back to back, in the order the NIC
//! sends them (round robin over the QPs on that port), and follow their
//! QPs' own paths (ECMP may send QPs of one transfer different ways). Every
//! link is a FIFO store-and-forward server: a packet starts when it has
//! fully arrived and the link is free, takes its serialization time, and
//! arrives at the next hop a propagation delay later. Links are processed
//! hop by hop; packets meeting at one link are served in arrival order.
//! Nothing else shares the fabric, and ACKs travel on the reverse links,
//! so for a transfer on one path this is exactly what the simulator does
//! with it alone. When its QPs take different paths that meet again,
//! packets arriving at the same picosecond may be served in the other
//! order than the simulator's event order picks, and the two can differ
//! by up to one frame time.
//!
//! Where PCIe can bind (a GPU's half of its PCIe link is slower than its
//! NIC), every packet's payload first crosses the sending GPU's PCIe link,
//! one packet after another whatever NIC port it leaves by, as the NIC
//! paces it in the simulator; the first hop then starts each packet no
//! sooner than the PCIe link is free, and merges the NIC ports in time
//! order since they share it.

use crate::nic::transport::Requester;
use crate::topology::{PortId, Topology};
use crate::units::SimTime;
use crate::wire::frame::Framing;

/// Wire bytes of the packets of `req`, which holds one message: its
/// first and last packet and one middle packet stand for all, since the
/// middle ones have one opcode and a full payload in every write mode.
pub fn message_wire(req: &Requester, framing: Framing) -> u64 {
    let w = |p: u32| u64::from(framing.wire_bytes(req.opcode_of(p), req.payload_of(p)));
    match req.n_pkts {
        0 => 0,
        1 => w(0),
        n => w(0) + u64::from(n - 2) * w(1) + w(n - 1),
    }
}

struct InFlight {
    qp: usize,
    wire: u64,
    /// Arrival at the current hop.
    at: SimTime,
    /// When it started serializing on the previous hop (ties at a link go
    /// to the packet that started earlier, as events scheduled earlier do).
    started: SimTime,
    /// Send order, the last tie-break.
    order: usize,
}

/// `reqs[i]` is QP i of the transfer; `routes[i]` the egress ports its
/// packets leave through, the NIC port first. `pcie_ps_per_byte`: the
/// sending GPU's PCIe pacing, where it binds.
pub fn ideal_fct(
    topo: &Topology,
    framing: Framing,
    reqs: &[&Requester],
    routes: &[Vec<PortId>],
    pcie_ps_per_byte: Option<f64>,
) -> SimTime {
    let ser = |p: PortId, wire: u64| topo.port(p).rate.serialize(wire);
    let mut pkts: Vec<InFlight> = Vec::new();
    // Hop 0: each NIC port sends its QPs' packets round robin, back to back.
    let mut ports: Vec<PortId> = routes.iter().map(|r| r[0]).collect();
    ports.sort();
    ports.dedup();
    if let Some(pcie) = pcie_ps_per_byte {
        first_hop_through_pcie(topo, framing, reqs, routes, &ports, pcie, &mut pkts);
    }
    for port in ports.into_iter().filter(|_| pcie_ps_per_byte.is_none()) {
        let mine: Vec<usize> = (0..reqs.len()).filter(|&i| routes[i][0] == port).collect();
        let mut sent = vec![0u32; mine.len()];
        let mut free = SimTime::ZERO;
        loop {
            let mut any = false;
            for (k, &i) in mine.iter().enumerate() {
                let r = reqs[i];
                if sent[k] == r.n_pkts {
                    continue;
                }
                any = true;
                let psn = sent[k];
                sent[k] += 1;
                let wire = framing.wire_bytes(r.opcode_of(psn), r.payload_of(psn)) as u64;
                let start = free;
                free = start + ser(port, wire);
                pkts.push(InFlight {
                    qp: i,
                    wire,
                    at: free + topo.port(port).delay,
                    started: start,
                    order: pkts.len(),
                });
            }
            if !any {
                break;
            }
        }
    }
    let hops = routes.iter().map(|r| r.len()).max().unwrap_or(0);
    // On one shared path a FIFO keeps the packets in order: no sorting.
    let one_path = routes.iter().all(|r| r == &routes[0]);
    // When each link of this hop is free again; a transfer's QPs use few
    // links per hop, so a short list beats hashing.
    let mut free_at: Vec<(PortId, SimTime)> = Vec::new();
    for h in 1..hops {
        if !one_path {
            pkts.sort_by_key(|p| (p.at, p.started, p.order));
        }
        free_at.clear();
        for p in pkts.iter_mut().filter(|p| routes[p.qp].len() > h) {
            let link = routes[p.qp][h];
            let k = match free_at.iter().position(|&(l, _)| l == link) {
                Some(k) => k,
                None => {
                    free_at.push((link, SimTime::ZERO));
                    free_at.len() - 1
                }
            };
            let start = p.at.max(free_at[k].1);
            let free = start + ser(link, p.wire);
            free_at[k].1 = free;
            p.started = start;
            p.at = free + topo.port(link).delay;
        }
    }
    pkts.iter().map(|p| p.at).max().unwrap_or(SimTime::ZERO)
}

/// Hop 0 when the GPU's PCIe link paces the NIC: each port sends its QPs'
/// packets round robin; the next packet to go is the one whose port can
/// start it first (the lower port on a tie), no sooner than the PCIe link
/// has carried the previous payload, as the simulator's NIC does.
fn first_hop_through_pcie(
    topo: &Topology,
    framing: Framing,
    reqs: &[&Requester],
    routes: &[Vec<PortId>],
    ports: &[PortId],
    pcie_ps_per_byte: f64,
    pkts: &mut Vec<InFlight>,
) {
    struct Port {
        id: PortId,
        mine: Vec<usize>,
        sent: Vec<u32>,
        next: usize,
        free: SimTime,
    }
    let mut state: Vec<Port> = ports
        .iter()
        .map(|&id| {
            let mine: Vec<usize> = (0..reqs.len()).filter(|&i| routes[i][0] == id).collect();
            Port {
                id,
                sent: vec![0; mine.len()],
                mine,
                next: 0,
                free: SimTime::ZERO,
            }
        })
        .collect();
    let mut pcie_free = SimTime::ZERO;
    loop {
        // The QP each port sends next, round robin over those with data.
        let mut best: Option<(SimTime, usize, usize)> = None;
        for (pi, st) in state.iter().enumerate() {
            let n = st.mine.len();
            let Some(k) = (0..n)
                .map(|j| (st.next + j) % n)
                .find(|&k| st.sent[k] < reqs[st.mine[k]].n_pkts)
            else {
                continue;
            };
            let start = st.free.max(pcie_free);
            if best.is_none_or(|(t, _, _)| start < t) {
                best = Some((start, pi, k));
            }
        }
        let Some((start, pi, k)) = best else {
            break;
        };
        let st = &mut state[pi];
        let i = st.mine[k];
        let psn = st.sent[k];
        st.sent[k] += 1;
        st.next = (k + 1) % st.mine.len();
        let r = reqs[i];
        let payload = r.payload_of(psn);
        let wire = framing.wire_bytes(r.opcode_of(psn), payload) as u64;
        st.free = start + topo.port(st.id).rate.serialize(wire);
        pcie_free = start + SimTime((payload as f64 * pcie_ps_per_byte).ceil() as u64);
        pkts.push(InFlight {
            qp: i,
            wire,
            at: st.free + topo.port(st.id).delay,
            started: start,
            order: pkts.len(),
        });
    }
}

/// Ideal completion times of single-QP transfers by size and by their
/// hops' rates and delays.
pub type IdealCache = rustc_hash::FxHashMap<(u64, Vec<(u64, u64)>), SimTime>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nic::WriteMode;

    /// The first, a middle and the last packet give the same wire bytes as
    /// every packet summed, in both write modes and at every size class.
    #[test]
    fn message_wire_equals_the_sum_over_packets() {
        let framing = Framing::default();
        for mode in [WriteMode::FirstMiddleLast, WriteMode::WriteOnly] {
            for bytes in [0u64, 1, 100, 4000, 4001, 8000, 12_345, 1_000_000] {
                let r = Requester::one(0, bytes, 4000, mode);
                let all: u64 = (0..r.n_pkts)
                    .map(|p| u64::from(framing.wire_bytes(r.opcode_of(p), r.payload_of(p))))
                    .sum();
                assert_eq!(message_wire(&r, framing), all, "{mode:?} {bytes} B");
            }
        }
    }
}
