//! The engine's side of the flow level: transfers start, finish and
//! are acknowledged on `crate::fluid`'s network instead of packet by
//! packet; the task graph, NVLink and collectives run over it as over
//! packets.

use super::{Event, Simulation};
use crate::fluid::Sub;
use crate::nic::transport::Requester;
use crate::topology::{FlowId, PortId, QpId};
use crate::units::SimTime;
use crate::wire::frame::Opcode;

impl Simulation {
    /// Transfer `f` starts on the fluid network: a sub-flow per QP.
    pub(super) fn fluid_start(&mut self, f: FlowId) {
        let now = self.now;
        let fl = self.flow_mut(f);
        let (first, n, bytes, dst, cap, ideal) = (
            fl.first_qp,
            fl.n_qps,
            fl.spec.bytes,
            fl.spec.dst_nic,
            fl.spec.rate,
            fl.ideal_fct,
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
            let wire = crate::runtime::ideal::message_wire(&req, framing);
            let route = self.route_of(q, dst);
            // Alone, one uncapped QP's share is the whole transfer, whose
            // ideal time the build worked out already.
            let alone = if n == 1 && cap.is_none() {
                ideal
            } else {
                crate::runtime::ideal::ideal_fct(
                    &self.topo,
                    framing,
                    &[&req],
                    std::slice::from_ref(&route),
                    pcie,
                )
            };
            let gpu = self.nics.qp(q).src_gpu;
            let mut uses: Vec<(u32, f64)> = self
                .qp_split(q, dst)
                .into_iter()
                .map(|(p, share)| (p.0, share))
                .collect();
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
            let mut sub = Sub::new(f, q, wire, sub_cap, uses);
            let qp = self.nics.qp(q);
            sub.src = qp.src_nic.0;
            sub.pfc = self.scenario.qos.queues[qp.queue as usize].lossless
                && matches!(qp.req.rate, crate::nic::rate::RateControl::LineRate);
            sub.latency = SimTime(alone.0.saturating_sub(busy.ceil() as u64));
            sub.ack_latency = ack_latency;
            // Under DCQCN it starts at its QP's rate (a cut carries over).
            let cc = self.nics.fluid_dcqcn(q, now, (0, 0, SimTime::ZERO));
            if let Some((bps, _)) = cc {
                sub.cc = true;
                sub.cc_rate = bps / 8e12;
            }
            subs.push((sub, cc.and_then(|c| c.1)));
        }
        let fluid = self.fluid.as_mut().expect("a fluid run");
        for (s, change) in subs {
            let rate = s.cc_rate;
            let id = fluid.add(s, now);
            if change.is_some() {
                fluid.set_cc_rate(id, rate, change);
            }
        }
        self.fluid_cc_next();
        self.fluid_share_later();
    }

    /// A tick of the flow level's congestion control: marks counted, the
    /// CNPs and bytes sent handed to each QP's DCQCN, the rates it sets
    /// taken up at the next share. The next tick is due `fluid::TICK`
    /// later while a queue holds bytes, or else when the first QP's rate
    /// moves by itself (a recovery stage).
    pub(super) fn fluid_cc(&mut self) {
        let now = self.now;
        let fluid = self.fluid.as_mut().expect("a fluid run");
        if fluid.cc_next != now {
            return; // a stale event: an earlier one took its place
        }
        fluid.cc_next = SimTime::MAX;
        let egress = &mut self.egress;
        let d = &self.scenario.transport.dcqcn;
        let gap = d.rate_decrease_interval.max(d.cnp_interval);
        let ticks = fluid.tick(now, gap, &mut |p, b| egress.fluid_sent(p, b));
        for t in ticks {
            if let Some((bps, change)) = self.nics.fluid_dcqcn(t.qp, now, (t.sent, t.cnps, gap)) {
                fluid.set_cc_rate(t.id, bps / 8e12, change);
            }
        }
        self.fluid_cc_next();
        self.fluid_share_later();
    }

    /// How often marks are counted while a queue holds bytes.
    fn fluid_cc_interval(&self) -> SimTime {
        crate::fluid::TICK
    }

    /// A `FluidCc` when the next tick is due, unless one is due by then.
    fn fluid_cc_next(&mut self) {
        let (now, interval) = (self.now, self.fluid_cc_interval());
        let fluid = self.fluid.as_mut().expect("a fluid run");
        let t = fluid.cc_due(now, interval).max(now + SimTime(1));
        if t < fluid.cc_next && t != SimTime::MAX {
            fluid.cc_next = t;
            self.queue.push(t, Event::FluidCc);
        }
    }

    /// Rates are shared anew once the current instant's other events are
    /// handled (`Event::FluidShare` is the last kind due at a time).
    pub(super) fn fluid_share_later(&mut self) {
        let fluid = self.fluid.as_mut().expect("a fluid run");
        if !fluid.pending && fluid.changed() {
            fluid.pending = true;
            self.queue.push(self.now, Event::FluidShare);
        }
    }

    /// Rates anew where sub-flows started or ended, and the event for the
    /// next sub-flow to finish sending.
    pub(super) fn fluid_share(&mut self) {
        let now = self.now;
        let fluid = self.fluid.as_mut().expect("a fluid run");
        let egress = &mut self.egress;
        fluid.share(now, |p, b| egress.fluid_sent(p, b));
        if fluid.hot() {
            self.fluid_cc_next();
        }
        self.hybrid_packet_rates();
        self.fluid_next_event();
    }

    /// A `FluidNext` at the first time a sub-flow sends its last byte,
    /// unless one is already due by then.
    fn fluid_next_event(&mut self) {
        let fluid = self.fluid.as_mut().expect("a fluid run");
        let t = fluid.next_due();
        if t < fluid.next {
            fluid.next = t;
            self.queue.push(t, Event::FluidNext);
        }
    }

    /// Sub-flows whose last byte has left: their receivers have it a
    /// latency later; the rest share what they leave.
    pub(super) fn fluid_next(&mut self) {
        let now = self.now;
        let fluid = self.fluid.as_mut().expect("a fluid run");
        if fluid.next != now {
            return; // a stale event: an earlier one took its place
        }
        fluid.next = SimTime::MAX;
        let egress = &mut self.egress;
        let done: Vec<Sub> = fluid
            .due_by(now)
            .into_iter()
            .map(|id| fluid.finish(id, now, &mut |p, b| egress.fluid_sent(p, b)))
            .collect();
        self.fluid_share_later();
        self.fluid_next_event();
        for s in done {
            if s.pass != u32::MAX {
                self.runtime(|rt, k| rt.stream_sent(k, s.pass));
                continue;
            }
            self.runtime(|rt, k| rt.flow_sent(k, s.flow));
            let at = now + s.latency;
            self.queue.push(at, Event::FluidRx(s.qp, s.flow));
            self.queue
                .push(at + s.ack_latency, Event::FluidAck(s.qp, s.flow));
        }
    }

    /// QP `q`'s share of transfer `f` has reached its receiver.
    pub(super) fn fluid_rx(&mut self, q: QpId, f: FlowId) {
        let fl = self.flow_mut(f);
        let bytes = super::build::share(fl.spec.bytes, fl.n_qps, q.0 - fl.first_qp);
        self.counters.bytes_delivered += bytes;
        self.runtime(|rt, k| rt.qp_received(k, f, 0, 0));
    }

    /// Links changed (down, back up or slower): each of their ports
    /// carries its rate now, nothing while down.
    pub(super) fn fluid_links(&mut self, ports: &[(PortId, bool)]) {
        let Some(fluid) = self.fluid.as_mut() else {
            return;
        };
        for &(p, down) in ports {
            let cap = if down {
                0.0
            } else {
                self.topo.port(p).rate.bps() as f64 / 8e12
            };
            fluid.set_cap(p.0, cap);
        }
        // A multipath sender leaves a dead path at once (its packets there
        // are lost within a round trip), without waiting for routing.
        if self.scenario.transport.mrc.is_some() {
            self.fluid_reroute_where(|sim, q| !sim.nics.mrc_paths(q).is_empty());
        }
        self.fluid_share_later();
    }

    /// Routing reconverged: every sub-flow on its way takes its QP's
    /// paths over the new routes (a sub-flow stuck behind a dead link
    /// until then moves on).
    pub(super) fn fluid_reroute(&mut self) {
        self.fluid_reroute_where(|_, _| true);
    }

    /// The same for the sub-flows of the QPs `which` picks.
    fn fluid_reroute_where(&mut self, which: impl Fn(&Simulation, QpId) -> bool) {
        let Some(fluid) = self.fluid.as_ref() else {
            return;
        };
        let now = self.now;
        let live = fluid.live();
        let mut moves = Vec::with_capacity(live.len());
        for (id, q, f, pass) in live {
            if !which(self, q) {
                continue;
            }
            if pass != u32::MAX {
                moves.push((id, self.runtime(|rt, k| rt.stream_ports(k, pass))));
                continue;
            }
            let dst = self.flow_mut(f).spec.dst_nic;
            let ports: Vec<(u32, f64)> = self
                .qp_split(q, dst)
                .into_iter()
                .map(|(p, share)| (p.0, share))
                .collect();
            moves.push((id, ports));
        }
        let fluid = self.fluid.as_mut().expect("a fluid run");
        let egress = &mut self.egress;
        let mut sent = |p, b| egress.fluid_sent(p, b);
        for (id, ports) in moves {
            fluid.reroute(id, ports, now, &mut sent);
        }
        self.fluid_share_later();
    }

    /// The run stops: the ports count what sub-flows still on their way
    /// have sent so far.
    pub(super) fn fluid_stop(&mut self) {
        let now = self.now;
        if let Some(fluid) = self.fluid.as_mut() {
            let egress = &mut self.egress;
            let mut sent = |p, b| egress.fluid_sent(p, b);
            fluid.settle_all(now, &mut sent);
        }
    }
}
