//! The lossless fabric in the event loop: PFC pause and resume frames,
//! their refresh, the watchdog, NIC pause storms and CNPs.

use super::{first, Event, Simulation, NO_SLOT};
use crate::switch::qos::{pause_time, WatchdogAction};
use crate::switch::schedule::{held, LOCAL};
use crate::topology::{NicId, Owner, PortId, QpId};
use crate::units::SimTime;
use crate::wire::frame::{self, ecn};
use crate::wire::{Opcode, Packet};

impl Simulation {
    #[inline]
    pub(super) fn pfc_index(&self, p: PortId, prio: u8) -> Option<usize> {
        let slot = self.pfc_slot[prio as usize];
        (slot != NO_SLOT).then(|| p.idx() * self.pfc_slots + slot as usize)
    }

    /// Time PFC slot `i`'s transmitter has spent paused so far.
    pub fn paused_ps(&self, i: usize) -> u64 {
        let st = &self.pfc[i];
        let open = st.paused_since.map_or(0, |since| {
            let port = i / self.pfc_slots;
            let prio = (0..8).find(|&q| self.pfc_slot[q] as usize == i % self.pfc_slots);
            let until = prio.map_or(self.now, |q| self.queues[port].paused_until[q]);
            until.min(self.now).saturating_sub(since).0
        });
        st.paused_ps + open
    }

    /// Time a pause of the configured quanta lasts on port `p`'s link.
    fn pause_span(&self, p: PortId) -> SimTime {
        pause_time(self.scenario.qos.pfc.quanta, self.topo.ports[p.idx()].rate)
    }

    /// Sends a PFC frame for one priority out of port `p`, ahead of any
    /// queued traffic.
    fn send_pfc(&mut self, p: PortId, prio: u8, quanta: u16) {
        let wire = frame::wire_bytes(Opcode::Pause, 0);
        let pkt = Packet {
            src: NicId(0),
            dst: NicId(0),
            qp: QpId(0),
            psn: quanta as u32,
            payload: 0,
            wire_bytes: wire,
            header_crc: 0,
            udp_sport: 0,
            opcode: Opcode::Pause,
            tos: 1 << prio,
        };
        let i = self
            .pfc_index(p, prio)
            .expect("PFC only on lossless priorities");
        if quanta == 0 {
            self.pfc[i].resumes_sent += 1;
            self.counters.pfc_resume_frames += 1;
            first(&mut self.firsts.resume_ps, self.now);
        } else {
            self.pfc[i].pauses_sent += 1;
            self.pfc[i].first_pause.get_or_insert(self.now);
            self.counters.pfc_pause_frames += 1;
            let slot = match self.owners[p.idx()] {
                Owner::Switch(s) => {
                    &mut self.firsts.pause_by_tier_ps[self.topo.switches[s.idx()].tier as usize]
                }
                Owner::Nic(_) => &mut self.firsts.pause_by_nic_ps,
            };
            first(slot, self.now);
        }
        self.send_control(p, pkt);
    }

    /// Sends a frame out of port `p` ahead of any queued traffic (PFC
    /// frames, GLB heartbeats).
    pub(super) fn send_control(&mut self, p: PortId, pkt: Packet) {
        let wire = pkt.wire_bytes;
        let id = self.packets.alloc(pkt);
        if self.ports[p.idx()].idle(self.now) {
            self.transmit(p, id, wire, crate::switch::schedule::CONTROL, LOCAL);
        } else {
            self.queues[p.idx()].enqueue_control(id, wire);
            self.ports[p.idx()].queued += 1;
            self.kick(p);
        }
    }

    /// Port `p` pauses its partner on `prio` and keeps it paused.
    pub(super) fn send_pause(&mut self, p: PortId, prio: u8) {
        let i = self.pfc_index(p, prio).expect("lossless");
        self.pfc[i].pausing = true;
        self.send_pfc(p, prio, self.scenario.qos.pfc.quanta);
        if !self.pfc[i].refresh_pending {
            self.pfc[i].refresh_pending = true;
            let every = self
                .scenario
                .qos
                .pfc
                .refresh
                .unwrap_or(SimTime(self.pause_span(p).0 / 2))
                .max(SimTime(1));
            self.queue
                .push(self.now + every, Event::PfcRefresh(p, prio));
        }
    }

    pub(super) fn send_resume(&mut self, p: PortId, prio: u8) {
        let i = self.pfc_index(p, prio).expect("lossless");
        self.pfc[i].pausing = false;
        self.send_pfc(p, prio, 0);
    }

    pub(super) fn pfc_refresh(&mut self, p: PortId, prio: u8) {
        let i = self.pfc_index(p, prio).expect("lossless");
        self.pfc[i].refresh_pending = false;
        if self.pfc[i].pausing {
            self.send_pause(p, prio);
        }
    }

    /// A PFC frame arrived at port `p`: pause or resume its transmitter
    /// for each priority in the class-enable vector.
    pub(super) fn receive_pause(&mut self, p: PortId, pkt: &Packet) {
        let quanta = pkt.psn as u16;
        let now = self.now;
        for prio in 0..8u8 {
            if pkt.tos & (1 << prio) == 0 {
                continue;
            }
            let Some(i) = self.pfc_index(p, prio) else {
                continue;
            };
            let qs = &mut self.queues[p.idx()];
            let st = &mut self.pfc[i];
            if quanta == 0 {
                st.resumes_received += 1;
                let end = now.min(qs.paused_until[prio as usize]);
                st.close_paused(end);
                qs.pause(prio, now);
                self.kick(p);
                continue;
            }
            st.pauses_received += 1;
            self.ports[p.idx()].ever_paused = true;
            if st.watchdog_until > now {
                continue;
            }
            let until = now + pause_time(quanta, self.topo.ports[p.idx()].rate);
            if !qs.is_paused(prio, now) {
                // The previous stretch, if any, ended when it expired.
                let end = qs.paused_until[prio as usize].min(now);
                st.close_paused(end);
                st.paused_since = Some(now);
                if let (Some(wd), Owner::Switch(_)) =
                    (self.scenario.qos.pfc.watchdog, self.owners[p.idx()])
                {
                    if !st.watchdog_pending {
                        st.watchdog_pending = true;
                        self.queue.push(now + wd.interval, Event::Watchdog(p, prio));
                    }
                }
            }
            qs.pause(prio, until);
        }
    }

    /// Whether the watchdog is discarding `prio` traffic for port `out`.
    #[inline]
    pub(super) fn watchdog_dropping(&self, out: PortId, prio: u8) -> bool {
        match self.scenario.qos.pfc.watchdog {
            Some(wd) if wd.action == WatchdogAction::Drop => self
                .pfc_index(out, prio)
                .is_some_and(|i| self.pfc[i].watchdog_until > self.now),
            _ => false,
        }
    }

    pub(super) fn watchdog(&mut self, p: PortId, prio: u8) {
        let Some(wd) = self.scenario.qos.pfc.watchdog else {
            return;
        };
        let i = self.pfc_index(p, prio).expect("lossless");
        self.pfc[i].watchdog_pending = false;
        let now = self.now;
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
            self.queue.push(next, Event::Watchdog(p, prio));
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
                    self.release(s.idx(), e.ingress, prio, held(e.wire_bytes));
                }
                self.queues[p.idx()].counts[prio as usize].watchdog_drops += 1;
                self.counters.watchdog_drops += 1;
                self.drop_packet(e.id);
            }
        }
        self.kick(p);
    }

    /// A NIC pause storm starts or stops on every port of the NIC.
    pub(super) fn storm(&mut self, i: usize, on: bool) {
        let storm = self.scenario.qos.pfc.storms[i];
        let nic = self.topo.gpus[storm.gpu.idx()].nic;
        let ports = self.topo.nics[nic.idx()].ports.clone();
        for p in ports {
            let j = self.pfc_index(p, storm.priority).expect("validated");
            self.pfc[j].storm = on;
            if on {
                self.send_pause(p, storm.priority);
            } else if self.pfc[j].pausing && self.pfc[j].bytes <= self.pfc[j].cfg.xon {
                self.send_resume(p, storm.priority);
            }
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
        self.offer(port, self.cnp_queue, id, pkt.wire_bytes, LOCAL);
    }
}
