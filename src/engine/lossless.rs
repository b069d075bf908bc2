//! The lossless fabric's NIC side in the event loop: NIC pause storms and
//! CNPs. The switch side (pause, resume, refresh, the watchdog) is in
//! `switch::egress`.

use super::{first, io, Event, Simulation, Wires};
use crate::topology::QpId;
use crate::units::SimTime;
use crate::wire::frame::ecn;
use crate::wire::{Opcode, Packet};

impl Simulation {
    /// A NIC pause storm starts or stops on every port of the NIC.
    pub(super) fn storm(&mut self, i: usize, on: bool) {
        let storm = self.scenario.qos.pfc.storms[i];
        let nic = self.topo.gpus[storm.gpu.idx()].nic;
        let ports = self.topo.nics[nic.idx()].ports.clone();
        for p in ports {
            let turn = self.egress.storm(&mut io!(self), p, storm.priority, on);
            self.after(p, turn);
        }
    }

    /// A CE-marked data packet of QP `q` reached its receiver: send a CNP
    /// unless one went out less than the CNP interval ago.
    pub(super) fn congestion_experienced(&mut self, q: QpId) {
        let tc = &self.scenario.transport;
        if !tc.dcqcn_enabled {
            return;
        }
        let now = self.now;
        let qp = &mut self.qps[q.idx()];
        if qp
            .cnp_last
            .is_some_and(|t| now.saturating_sub(t) < tc.dcqcn.cnp_interval)
        {
            return;
        }
        qp.cnp_last = Some(now);
        let delay = tc.dcqcn.cnp_delay;
        if delay == SimTime::ZERO {
            self.send_cnp(q);
        } else {
            self.queue.push(now + delay, Event::Cnp(q));
        }
    }

    /// The receiver of QP `q` sends a CNP back to the sender.
    pub(super) fn send_cnp(&mut self, q: QpId) {
        let qp = &mut self.qps[q.idx()];
        qp.cnps_sent += 1;
        let flow = &self.flows[qp.flow.idx()].spec;
        let pkt = Packet {
            src: flow.dst_nic,
            dst: flow.src_nic,
            qp: q,
            psn: 0,
            payload: 0,
            wire_bytes: self.scenario.qos.framing.wire_bytes(Opcode::Cnp, 0),
            header_crc: qp.header_crc[1],
            udp_sport: qp.udp_sport,
            opcode: Opcode::Cnp,
            tos: Packet::tos_of(self.scenario.transport.cnp_dscp, ecn::NOT_ECT),
        };
        let port = qp.dst_port;
        self.counters.cnps_sent += 1;
        first(&mut self.firsts.cnp_ps, self.now);
        let id = self.packets.alloc(pkt);
        self.offer(port, self.cnp_queue, id);
    }
}
