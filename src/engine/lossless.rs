//! The lossless fabric's NIC side in the event loop: NIC pause storms and
//! CNPs. The switch side (pause, resume, refresh, the watchdog) is in
//! `switch::egress`.

use super::{first, io, Event, Simulation, Wires};
use crate::nic::nics::CnpWhen;
use crate::topology::QpId;

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
        match self.nics.congestion_experienced(self.now, q) {
            CnpWhen::Never => {}
            CnpWhen::Now => self.send_cnp(q),
            CnpWhen::At(t) => self.queue.push(t, Event::Cnp(q)),
        }
    }

    /// The receiver of QP `q` sends a CNP back to the sender.
    pub(super) fn send_cnp(&mut self, q: QpId) {
        let f = self.nics.cnp(q, &mut self.packets);
        first(&mut self.records.firsts.cnp_ps, self.now);
        self.offer(f.port, f.queue, f.id);
    }
}
