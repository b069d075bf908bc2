//! Every NIC of the fabric, run by its caller: the queue pairs (requester
//! and responder halves) with their rate control and MRC path state, each
//! port's round-robin ring of QPs with data, each NIC's reorder buffer,
//! PCIe pacing of the sending GPU, CNP generation, and the packets a NIC
//! builds (data, ACK/NAK, CNP).
//!
//! `Nics` owns that state and its counters. Its functions take the time
//! and the packet arena and return what the caller must do: put a frame
//! on a port (`Frame`), schedule a timer, or account a transfer's
//! progress (`Rx`). The caller (the engine) owns the ports' egress, the
//! transfers and the task graph.

use super::rate::RateControl;
use super::transport::{Msg, ReorderPool, TimerAction};
use super::TransportConfig;
use crate::topology::{FlowId, GpuId, NicId, PortId, QpId};
use crate::units::SimTime;
use crate::wire::frame::{ecn, Framing};
use crate::wire::{Opcode, Packet, PacketArena, PacketId};
use std::collections::VecDeque;

/// Both halves of a queue pair and where they sit. The messages of one
/// connection (a collective's sender, receiver and channel) share its
/// QPs; any other transfer has QPs of its own.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct QpState {
    /// The first transfer posted on it (names it in outputs).
    pub flow: FlowId,
    pub src_nic: NicId,
    pub dst_nic: NicId,
    /// The sending GPU, whose PCIe link its payload crosses.
    pub src_gpu: GpuId,
    pub src_port: PortId,
    pub dst_port: PortId,
    pub udp_sport: u16,
    /// DSCP of its data and ACKs, and the egress queue (class) they take.
    pub dscp: u8,
    pub queue: u8,
    /// ECMP header CRC (unseeded) of its data packets and of the ACK/NAKs
    /// going back.
    pub header_crc: [u32; 2],
    /// MRC: the header CRC of its data packets on each path, and of the
    /// ACKs that come back with the same UDP source port (empty for RC).
    pub path_crc: Vec<u32>,
    pub path_crc_back: Vec<u32>,
    /// MRC over several NIC ports (planes): every port of the NIC, the
    /// first being `src_port`; otherwise just `src_port`.
    pub planes: Vec<PortId>,
    /// Which of `planes` have the QP on their round-robin ring (a bit each).
    pub in_ring: u8,
    pub req: super::transport::Requester,
    pub resp: super::transport::Responder,
    /// A workload rate cap: this QP's share (bits/s) and when it may send
    /// next.
    pub cap_bps: f64,
    pub cap_next: SimTime,
    /// Notification point: when this QP's receiver last sent a CNP.
    pub cnp_last: Option<SimTime>,
    pub cnps_sent: u64,
    pub cnps_received: u64,
}

/// The UDP source port of an MRC QP's path: spread over the ephemeral
/// range from the QP's own port.
pub fn mrc_sport(base: u16, path: u8) -> u16 {
    49152 + ((base as u32 - 49152 + path as u32 * 1031) % 16384) as u16
}

/// A frame a NIC built, for its caller to offer to `port` in `queue`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    pub port: PortId,
    pub queue: u8,
    pub id: PacketId,
}

/// What a port's QPs did when the port offered them the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pull {
    /// QP `q` sent data packet `id`; `timer` is its retransmission timer
    /// to schedule, and `last` names the transfer whose last packet it
    /// was, sent for the first time.
    Sent {
        q: QpId,
        id: PacketId,
        /// The egress queue (class) it goes out of.
        queue: u8,
        timer: Option<SimTime>,
        last: Option<FlowId>,
    },
    /// Nothing may go before this time (rate, cap, PCIe, path pacing or
    /// a PFC pause of its class).
    WaitUntil(SimTime),
    /// No QP of the port has data.
    Idle,
}

/// The traffic classes a NIC port may not send in now (PFC), a bit per
/// queue, and when each pause ends.
#[derive(Clone, Copy, Debug)]
pub struct Held<'a> {
    pub mask: u8,
    /// By queue: until when it is paused (read only where `mask` says).
    pub until: &'a [SimTime],
}

impl Held<'_> {
    /// Nothing held.
    pub const NONE: Held<'static> = Held {
        mask: 0,
        until: &[],
    };
}

/// When the receiver of a CE-marked packet sends its CNP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CnpWhen {
    /// Not at all (no DCQCN, or one went out less than the interval ago).
    Never,
    Now,
    At(SimTime),
}

/// What a frame arriving at a NIC means for its caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rx {
    /// Nothing beyond the NIC's own state.
    Nothing,
    /// A reply (ACK or NAK) to offer.
    Reply(Frame),
    /// A CNP cut the rate of the QP sending from this port.
    RateCut(PortId),
    /// The sender of QP `q` has every acknowledgement of a message
    /// (`pop_acked`).
    Acked(QpId),
    /// The QP has data to (re)send: kick its ports.
    Resend(QpId),
    /// Data of QP `q`: whether it carried a CE mark (see
    /// `congestion_experienced`), payload bytes now delivered in order,
    /// whether a message is now received in full (`pop_received`), and
    /// the reply it asks for (build it with `reply`).
    Data {
        q: QpId,
        ce: bool,
        delivered: u64,
        completed: bool,
        reply: Option<(Opcode, u32)>,
    },
}

/// Counts of what the NICs sent and received.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct NicCounters {
    pub data_packets_sent: u64,
    pub acks_sent: u64,
    pub naks_sent: u64,
    pub cnps_sent: u64,
    pub cnps_received: u64,
}

#[derive(serde::Serialize, serde::Deserialize)]
pub struct Nics {
    qps: Vec<QpState>,
    /// Tenant of each QP, which TELB policies match at switches.
    tenants: Vec<u16>,
    /// NIC ports (indexed by `PortId`): QPs with data, served round robin,
    /// each with its plane (its place in `planes` of the port), so that
    /// finding it does not read the QP's plane list.
    rings: Vec<VecDeque<(QpId, u8)>>,
    /// Each NIC's reorder buffer.
    reorder: Vec<ReorderPool>,
    /// Per GPU: when its PCIe link is free for the next packet's payload
    /// (empty when no GPU's PCIe is slower than its NIC).
    pcie_next: Vec<SimTime>,
    pcie_ps_per_byte: f64,
    /// The queue NIC data and ACKs go out of, and CNPs (from the
    /// scenario's DSCP-to-queue map).
    data_queue: u8,
    cnp_queue: u8,
    cfg: TransportConfig,
    framing: Framing,
    pub counters: NicCounters,
}

impl Nics {
    /// `ports` is the number of ports of the fabric (rings are indexed by
    /// `PortId`), `nics` and `gpus` the numbers of NICs and GPUs; data
    /// and ACKs go out of `data_queue`, CNPs out of `cnp_queue`;
    /// `pcie_one_way` bytes/s paces a GPU's payload when `pcie_binds`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        qps: Vec<QpState>,
        tenants: Vec<u16>,
        (ports, nics, gpus): (usize, usize, usize),
        (data_queue, cnp_queue): (u8, u8),
        cfg: TransportConfig,
        framing: Framing,
        pcie_one_way: u64,
        pcie_binds: bool,
    ) -> Nics {
        Nics {
            qps,
            tenants,
            rings: (0..ports).map(|_| VecDeque::new()).collect(),
            reorder: vec![
                ReorderPool {
                    capacity: cfg.reorder_buffer,
                    ..Default::default()
                };
                nics
            ],
            pcie_next: if pcie_binds {
                vec![SimTime::ZERO; gpus]
            } else {
                Vec::new()
            },
            pcie_ps_per_byte: 1e12 / pcie_one_way as f64,
            data_queue,
            cnp_queue,
            cfg,
            framing,
            counters: NicCounters::default(),
        }
    }

    pub fn qps(&self) -> &[QpState] {
        &self.qps
    }

    #[inline]
    pub fn qp(&self, q: QpId) -> &QpState {
        &self.qps[q.idx()]
    }

    /// Flow level: QP `q`'s DCQCN hears of `sent` more wire bytes and of
    /// `cnps` CNPs (its receiver sent them, `gap` apart up to now).
    /// Returns its rate (bits per second) and when that next changes by
    /// itself; `None` for a QP without DCQCN.
    pub fn fluid_dcqcn(
        &mut self,
        q: QpId,
        now: SimTime,
        (sent, cnps, gap): (u64, u32, SimTime),
    ) -> Option<(f64, Option<SimTime>)> {
        let qp = &mut self.qps[q.idx()];
        let RateControl::Dcqcn(d) = &mut qp.req.rate else {
            return None;
        };
        let n = u64::from(cnps);
        qp.cnps_sent += n;
        qp.cnps_received += n;
        self.counters.cnps_sent += n;
        self.counters.cnps_received += n;
        Some(d.on_fluid(now, (sent, cnps, gap), &self.cfg.dcqcn))
    }

    /// Tenant of each QP.
    pub fn tenants(&self) -> &[u16] {
        &self.tenants
    }

    pub fn reorder(&self) -> &[ReorderPool] {
        &self.reorder
    }

    /// Picoseconds per byte of a GPU's PCIe link, where it paces.
    pub fn pcie_ps_per_byte(&self) -> Option<f64> {
        (!self.pcie_next.is_empty()).then_some(self.pcie_ps_per_byte)
    }

    /// The queue NIC data packets go out of.
    pub fn data_queue(&self) -> u8 {
        self.data_queue
    }

    /// Whether port `p` has QPs with data waiting for it.
    #[inline]
    pub fn backlog(&self, p: PortId) -> bool {
        !self.rings[p.idx()].is_empty()
    }

    /// Posts a message of `bytes` for transfer `flow` on QP `q`: at its
    /// sender (`tx`) and at its receiver (`rx`), which a partitioned run
    /// may do in different partitions. The caller then activates it.
    pub fn post(&mut self, q: QpId, flow: FlowId, bytes: u64, (tx, rx): (bool, bool)) {
        let qp = &mut self.qps[q.idx()];
        if tx {
            qp.req.post(flow.0, bytes);
        }
        if rx {
            qp.resp.post(flow.0, bytes);
        }
    }

    /// The oldest message of QP `q` its sender has every acknowledgement
    /// of, if any.
    pub fn pop_acked(&mut self, q: QpId) -> Option<Msg> {
        self.qps[q.idx()].req.pop_acked()
    }

    /// The oldest message of QP `q` its receiver has in full, if any.
    pub fn pop_received(&mut self, q: QpId) -> Option<Msg> {
        self.qps[q.idx()].resp.pop_received()
    }

    /// Puts a QP with data to send on its ports' round-robin rings; the
    /// caller then kicks `qp(q).planes`.
    pub fn activate(&mut self, q: QpId) {
        let qp = &mut self.qps[q.idx()];
        if !qp.req.has_data() {
            return;
        }
        for (k, &p) in qp.planes.iter().enumerate() {
            if qp.in_ring & (1 << k) == 0 {
                qp.in_ring |= 1 << k;
                self.rings[p.idx()].push_back((q, k as u8));
            }
        }
    }

    /// The next data packet from port `p`'s QPs, round robin: the first
    /// QP whose rate, cap, PCIe and path allow it sends.
    #[inline]
    pub fn pull(
        &mut self,
        now: SimTime,
        p: PortId,
        nic: NicId,
        held: Held,
        packets: &mut PacketArena,
    ) -> Pull {
        let rto = self.cfg.rto;
        let mut earliest = SimTime::MAX;
        for _ in 0..self.rings[p.idx()].len() {
            let Some((q, plane)) = self.rings[p.idx()].pop_front() else {
                break;
            };
            let qp = &mut self.qps[q.idx()];
            debug_assert_eq!(qp.planes[plane as usize], p);
            let plane = plane as usize;
            if !qp.req.has_data() || !qp.req.window_open() {
                // Nothing to send, or its window is full: an ACK puts it
                // back (`activate`).
                qp.in_ring &= !(1 << plane);
                continue;
            }
            if held.mask != 0 && held.mask & (1 << qp.queue) != 0 {
                // Its class is paused: the QPs of other classes go on.
                earliest = earliest.min(held.until[qp.queue as usize]);
                self.rings[p.idx()].push_back((q, plane as u8));
                continue;
            }
            let mut t = qp
                .req
                .rate
                .earliest_send(now, &self.cfg.dcqcn)
                .max(qp.cap_next)
                .max(qp.req.path_ready(now, plane as u8));
            if !self.pcie_next.is_empty() {
                // The payload crosses the sending GPU's PCIe link first.
                t = t.max(self.pcie_next[qp.src_gpu.idx()]);
            }
            if t > now {
                earliest = earliest.min(t);
                self.rings[p.idx()].push_back((q, plane as u8));
                continue;
            }
            let (out, timer) = qp.req.send_next(now, rto, plane as u8);
            let last = (out.ends && !out.retransmission).then_some(FlowId(out.flow));
            let pkt = Packet {
                src: nic,
                dst: qp.dst_nic,
                qp: q,
                psn: out.psn,
                payload: out.payload,
                wire_bytes: self.framing.wire_bytes(out.opcode, out.payload),
                header_crc: qp.header_crc[0],
                udp_sport: qp.udp_sport,
                opcode: out.opcode,
                tos: Packet::tos_of(qp.dscp, ecn::ECT0),
                flow: out.flow,
            };
            let pkt = if qp.path_crc.is_empty() {
                pkt
            } else {
                // Paths are numbered plane by plane; each uses one of the
                // QP's entropy values.
                let k = qp
                    .req
                    .mrc
                    .as_ref()
                    .map_or(out.path as usize, |m| m.entropy_of(out.path))
                    % qp.path_crc.len();
                Packet {
                    header_crc: qp.path_crc[k],
                    udp_sport: mrc_sport(qp.udp_sport, k as u8),
                    ..pkt
                }
            };
            qp.req.rate.on_send(now, pkt.wire_bytes, &self.cfg.dcqcn);
            if qp.cap_bps > 0.0 {
                let gap = pkt.wire_bytes as f64 * 8e12 / qp.cap_bps;
                qp.cap_next = now + SimTime(gap.ceil() as u64);
            }
            if qp.req.has_data() {
                self.rings[p.idx()].push_back((q, plane as u8));
            } else {
                qp.in_ring &= !(1 << plane);
            }
            if !self.pcie_next.is_empty() {
                let g = qp.src_gpu.idx();
                let busy = (out.payload as f64 * self.pcie_ps_per_byte).ceil() as u64;
                self.pcie_next[g] = self.pcie_next[g].max(now) + SimTime(busy);
            }
            self.counters.data_packets_sent += 1;
            let id = packets.alloc(pkt);
            if packets.int_on() {
                // HPCC: the switches stamp its records from here.
                packets.set_int(id, Default::default());
            }
            return Pull::Sent {
                q,
                id,
                queue: qp.queue,
                timer,
                last,
            };
        }
        if earliest < SimTime::MAX {
            Pull::WaitUntil(earliest)
        } else {
            Pull::Idle
        }
    }

    /// A frame (already out of the arena) arrived at NIC port `at`, with
    /// the INT records it carries (HPCC's ACKs).
    #[inline]
    pub fn receive(
        &mut self,
        now: SimTime,
        at: PortId,
        (pkt, int): (&Packet, Option<&crate::wire::int::Int>),
        packets: &mut PacketArena,
    ) -> Rx {
        let q = pkt.qp;
        let rto = self.cfg.rto;
        match pkt.opcode {
            Opcode::Pause | Opcode::Heartbeat => {
                unreachable!("link-local frames are handled on arrival")
            }
            Opcode::Trimmed => {
                // Only the headers made it: ask for the payload again.
                match self.qps[q.idx()].resp.on_trimmed(pkt.psn) {
                    Some((opcode, psn)) => {
                        Rx::Reply(self.reply(q, at, (pkt, None), (opcode, psn), packets))
                    }
                    None => Rx::Nothing,
                }
            }
            Opcode::Cnp => {
                let qp = &mut self.qps[q.idx()];
                qp.cnps_received += 1;
                self.counters.cnps_received += 1;
                qp.req.rate.on_cnp(now, &self.cfg.dcqcn);
                Rx::RateCut(qp.src_port)
            }
            Opcode::Ack => {
                let qp = &mut self.qps[q.idx()];
                if let Some(m) = &mut qp.req.mrc {
                    // The copy acknowledged took the path the ACK names
                    // (its source port, on the plane it came back on),
                    // not necessarily the PSN's latest transmission.
                    let k = (0..qp.path_crc.len())
                        .position(|k| mrc_sport(qp.udp_sport, k as u8) == pkt.udp_sport)
                        .unwrap_or(0);
                    let plane = qp.planes.iter().position(|&x| x == at).unwrap_or(0);
                    // (An entropy value retired since: no path to credit.)
                    if let Some(path) = m.path_of_entropy(plane, k) {
                        m.on_echo(now, path, pkt.ecn() == ecn::CE);
                        m.delivered_on(path);
                    }
                }
                let before = qp.req.una;
                let acked = qp.req.on_ack(now, pkt.psn, rto);
                let opened = qp.req.window_feedback(
                    &self.cfg.windows,
                    now,
                    before,
                    (pkt.flow, pkt.ecn() == ecn::CE, int),
                    false,
                );
                let probe = qp.req.mrc.is_some() && qp.req.has_data();
                if opened {
                    self.activate(q);
                }
                if acked {
                    // The engine kicks a windowed QP's ports after this too.
                    Rx::Acked(q)
                } else if opened {
                    Rx::Resend(q)
                } else if probe {
                    // An acknowledged probe may have reopened a path.
                    self.activate(q);
                    Rx::Resend(q)
                } else {
                    Rx::Nothing
                }
            }
            Opcode::Nak => {
                let qp = &mut self.qps[q.idx()];
                let before = qp.req.una;
                qp.req.on_nak(now, pkt.psn, rto);
                qp.req.window_feedback(
                    &self.cfg.windows,
                    now,
                    before,
                    (pkt.flow, false, int),
                    true,
                );
                self.activate(q);
                Rx::Resend(q)
            }
            _ => {
                let qp = &mut self.qps[q.idx()];
                // A window may be under the ACK coalescing: an ACK per packet.
                let ack_every = if qp.req.rate.ack_driven() {
                    1
                } else {
                    self.cfg.ack_every
                };
                if pkt.ecn() == ecn::CE {
                    qp.resp.ce_packets = qp.resp.ce_packets.wrapping_add(1);
                }
                let pool = &mut self.reorder[pkt.dst.idx()];
                let out = qp.resp.on_data(pkt.psn, pkt.payload, ack_every, pool);
                Rx::Data {
                    q,
                    ce: pkt.ecn() == ecn::CE,
                    delivered: out.delivered,
                    completed: out.completed,
                    reply: out.reply,
                }
            }
        }
    }

    /// The receiver of QP `q` answers data packet `pkt` (arrived at `at`,
    /// with INT records `int` under HPCC, which the answer echoes) with an
    /// ACK or NAK, in the data's traffic class.
    pub fn reply(
        &mut self,
        q: QpId,
        at: PortId,
        (pkt, int): (&Packet, Option<&crate::wire::int::Int>),
        (opcode, psn): (Opcode, u32),
        packets: &mut PacketArena,
    ) -> Frame {
        let qp = &self.qps[q.idx()];
        let dscp = qp.dscp;
        let reply = Packet {
            src: pkt.dst,
            dst: pkt.src,
            qp: q,
            psn,
            payload: 0,
            wire_bytes: self.framing.wire_bytes(opcode, 0),
            header_crc: qp.header_crc[1],
            udp_sport: qp.udp_sport,
            opcode,
            tos: Packet::tos_of(dscp, ecn::ECT0),
            flow: if qp.req.rate.dctcp().is_some() {
                qp.resp.ce_packets
            } else {
                crate::wire::packet::NO_FLOW
            },
        };
        // MRC acknowledges on the path (UDP source port) the data took, so
        // that ACKs spread, and fail, path by path like the data, and
        // echoes the data's CE mark for the sender's path health.
        let reply = match (0..qp.path_crc_back.len())
            .find(|&k| mrc_sport(qp.udp_sport, k as u8) == pkt.udp_sport)
        {
            Some(k) => Packet {
                header_crc: qp.path_crc_back[k],
                udp_sport: pkt.udp_sport,
                tos: Packet::tos_of(
                    dscp,
                    if pkt.ecn() == ecn::CE {
                        ecn::CE
                    } else {
                        ecn::ECT0
                    },
                ),
                ..reply
            },
            None => reply,
        };
        match opcode {
            Opcode::Nak => self.counters.naks_sent += 1,
            _ => self.counters.acks_sent += 1,
        }
        // MRC answers through the port (plane) the data came in on.
        let port = if qp.path_crc.is_empty() {
            qp.dst_port
        } else {
            at
        };
        let id = packets.alloc(reply);
        if let Some(int) = int {
            packets.set_int(id, *int);
        }
        Frame {
            port,
            queue: qp.queue,
            id,
        }
    }

    /// A CE-marked data packet of QP `q` reached its receiver: whether and
    /// when it sends a CNP (not within the CNP interval of the last one).
    pub fn congestion_experienced(&mut self, now: SimTime, q: QpId) -> CnpWhen {
        let tc = &self.cfg;
        let qp = &mut self.qps[q.idx()];
        if qp.req.rate.dcqcn().is_none() {
            // Only DCQCN's QPs get CNPs.
            return CnpWhen::Never;
        }
        if qp
            .cnp_last
            .is_some_and(|t| now.saturating_sub(t) < tc.dcqcn.cnp_interval)
        {
            return CnpWhen::Never;
        }
        qp.cnp_last = Some(now);
        let delay = tc.dcqcn.cnp_delay;
        if delay == SimTime::ZERO {
            CnpWhen::Now
        } else {
            CnpWhen::At(now + delay)
        }
    }

    /// The receiver of QP `q` sends a CNP back to the sender.
    pub fn cnp(&mut self, q: QpId, packets: &mut PacketArena) -> Frame {
        let qp = &mut self.qps[q.idx()];
        qp.cnps_sent += 1;
        self.counters.cnps_sent += 1;
        let pkt = Packet {
            src: qp.dst_nic,
            dst: qp.src_nic,
            qp: q,
            psn: 0,
            payload: 0,
            wire_bytes: self.framing.wire_bytes(Opcode::Cnp, 0),
            header_crc: qp.header_crc[1],
            udp_sport: qp.udp_sport,
            opcode: Opcode::Cnp,
            tos: Packet::tos_of(self.cfg.cnp_dscp, ecn::NOT_ECT),
            flow: crate::wire::packet::NO_FLOW,
        };
        Frame {
            port: qp.dst_port,
            queue: self.cnp_queue,
            id: packets.alloc(pkt),
        }
    }

    /// QP `q`'s retransmission timer is due. On `Retransmit` the QP is
    /// back on its rings: the caller kicks its ports.
    pub fn timer(&mut self, now: SimTime, q: QpId) -> TimerAction {
        let action = self.qps[q.idx()].req.on_timer(now, self.cfg.rto);
        if let TimerAction::Retransmit(_) = action {
            self.qps[q.idx()].req.window_timeout(&self.cfg.windows, now);
            self.activate(q);
        }
        action
    }

    /// The paths a multipath (MRC) QP's data packets take now, as the
    /// port each leaves by and a data packet on it as the switches see it
    /// (its entropy value's UDP source port and header CRC); empty for a
    /// QP on one path.
    pub fn mrc_paths(&self, q: QpId) -> Vec<(PortId, Packet)> {
        let qp = &self.qps[q.idx()];
        let Some(m) = qp.req.mrc.as_ref() else {
            return Vec::new();
        };
        if qp.path_crc.is_empty() || qp.planes.is_empty() {
            return Vec::new();
        }
        let base = self.probe(q, false);
        (0..m.path_count())
            .map(|path| {
                let k = m.entropy_of(path as u16) % qp.path_crc.len();
                let port = qp.planes[m.plane_of(path) % qp.planes.len()];
                let pkt = Packet {
                    header_crc: qp.path_crc[k],
                    udp_sport: mrc_sport(qp.udp_sport, k as u8),
                    ..base
                };
                (port, pkt)
            })
            .collect()
    }

    /// A data packet (reverse: an ACK) of QP `q` as the switches see it,
    /// for working out its static path.
    pub fn probe(&self, q: QpId, reverse: bool) -> Packet {
        let qp = &self.qps[q.idx()];
        let (src, dst, opcode) = if reverse {
            (qp.dst_nic, qp.src_nic, Opcode::Ack)
        } else {
            (qp.src_nic, qp.dst_nic, Opcode::WriteMiddle)
        };
        Packet {
            src,
            dst,
            qp: q,
            psn: 0,
            payload: 0,
            wire_bytes: 0,
            header_crc: qp.header_crc[usize::from(reverse)],
            udp_sport: qp.udp_sport,
            opcode,
            tos: Packet::tos_of(qp.dscp, ecn::ECT0),
            flow: crate::wire::packet::NO_FLOW,
        }
    }
}

impl Nics {
    /// Takes from `other`, the NICs of another partition of the same run,
    /// the sending side of the QPs whose source it runs and the
    /// receiving side of those whose destination it runs, and adds its
    /// counts.
    pub fn absorb(
        &mut self,
        mut other: Nics,
        src_theirs: impl Fn(&QpState) -> bool,
        dst_theirs: impl Fn(&QpState) -> bool,
    ) {
        for (mine, theirs) in self.qps.iter_mut().zip(other.qps.iter_mut()) {
            if src_theirs(theirs) {
                std::mem::swap(&mut mine.req, &mut theirs.req);
                mine.in_ring = theirs.in_ring;
                mine.cap_next = theirs.cap_next;
                mine.cnps_received = theirs.cnps_received;
            }
            if dst_theirs(theirs) {
                std::mem::swap(&mut mine.resp, &mut theirs.resp);
                mine.cnp_last = theirs.cnp_last;
                mine.cnps_sent = theirs.cnps_sent;
            }
        }
        let (c, o) = (&mut self.counters, &other.counters);
        c.data_packets_sent += o.data_packets_sent;
        c.acks_sent += o.acks_sent;
        c.naks_sent += o.naks_sent;
        c.cnps_sent += o.cnps_sent;
        c.cnps_received += o.cnps_received;
    }
}

#[cfg(test)]
mod tests {
    //! The NICs driven by hand, with no event loop and no egress: the
    //! tests play both ends of the wire.

    use super::*;
    use crate::engine::queue::EventQueue;
    use crate::topology::Topology;

    /// Two single-NIC hosts on one leaf; one 8 KB write from GPU 0 to
    /// GPU 1 (two 4 KB packets) under the default DCQCN (firmware preset:
    /// a CNP at most every 4 us, sent at once).
    const PAIR: &str = r#"
[topology]
kind = "single-rail"
hosts = 2
gpus_per_host = 1
nic_speed = "100G"

[transport]
mtu = 4096

[[workload]]
kind = "transfer"
src = 0
dst = 1
bytes = "8KB"
"#;

    fn pair(sets: &[&str]) -> (Topology, Nics, PacketArena) {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let p = crate::scenario::prepare("nics.toml", PAIR, &sets).unwrap();
        let streams = crate::rng::Streams::new(p.scenario.seed);
        let mut queue = EventQueue::new();
        let qps = crate::engine::build::qps_and_flows(
            &p.topology,
            &p.scenario,
            p.flows.clone(),
            (&Default::default(), p.flows.len() as u64),
            &p.graph.passes,
            &streams,
            &mut queue,
        )
        .qps;
        let tenants = vec![0; qps.len()];
        let nics = crate::engine::build::nics(&p.topology, &p.scenario, qps, tenants);
        (p.topology, nics, PacketArena::default())
    }

    const Q: QpId = QpId(0);

    /// Pulls from the sender's port at `now`; the packet sent, if any.
    fn pull(n: &mut Nics, topo: &Topology, now: SimTime, arena: &mut PacketArena) -> Pull {
        n.pull(now, topo.nics[0].ports[0], NicId(0), Held::NONE, arena)
    }

    #[test]
    fn a_started_qp_sends_its_packets_in_order_then_its_port_is_idle() {
        let (topo, mut n, mut arena) = pair(&[]);
        let port = topo.nics[0].ports[0];
        assert!(!n.backlog(port));
        assert_eq!(pull(&mut n, &topo, SimTime::ZERO, &mut arena), Pull::Idle);
        n.activate(Q);
        assert!(n.backlog(port));
        let Pull::Sent {
            q, id, timer, last, ..
        } = pull(&mut n, &topo, SimTime::ZERO, &mut arena)
        else {
            panic!("nothing sent")
        };
        assert_eq!((q, last), (Q, None));
        assert!(timer.is_some(), "the first packet arms the timer");
        let p = *arena.get(id);
        assert_eq!(
            (p.src, p.dst, p.psn, p.payload),
            (NicId(0), NicId(1), 0, 4096)
        );
        assert_eq!(p.header_crc, n.qp(Q).header_crc[0]);
        assert_eq!(p.dscp(), 24);
        // The second packet may follow once the first is on the wire.
        let later = SimTime::from_us(1);
        let Pull::Sent { id, last, .. } = pull(&mut n, &topo, later, &mut arena) else {
            panic!("second packet not sent")
        };
        assert_eq!(last, Some(FlowId(0)));
        assert_eq!(arena.get(id).psn, 1);
        assert_eq!(pull(&mut n, &topo, later, &mut arena), Pull::Idle);
        assert!(!n.backlog(port));
        assert_eq!(n.counters.data_packets_sent, 2);
    }

    #[test]
    fn a_cnp_cuts_the_rate_so_the_next_packet_must_wait() {
        let (topo, mut n, mut arena) = pair(&["transport.mtu=1024"]);
        let sender = topo.nics[0].ports[0];
        n.activate(Q);
        let t0 = SimTime::from_us(10);
        let f = n.cnp(Q, &mut arena);
        let cnp = arena.take(f.id);
        assert_eq!(
            n.receive(t0, sender, (&cnp, None), &mut arena),
            Rx::RateCut(sender)
        );
        assert_eq!(n.counters.cnps_received, 1);
        let Pull::Sent { id, .. } = pull(&mut n, &topo, t0, &mut arena) else {
            panic!("nothing sent")
        };
        // At line rate the next 1 KB frame could follow after about 85 ns;
        // at the halved rate it waits twice that.
        let wire = arena.get(id).wire_bytes as u64;
        let line = topo.port(sender).rate.serialize(wire);
        let soon = t0 + line;
        match pull(&mut n, &topo, soon, &mut arena) {
            Pull::WaitUntil(t) => {
                let gap = (t - t0).0 as f64 / line.0 as f64;
                assert!((1.9..2.1).contains(&gap), "{gap}");
            }
            other => panic!("sent at line rate after a rate cut: {other:?}"),
        }
    }

    /// A connection's next message goes out of the same QP at the rate
    /// its DCQCN state left, not at line rate: a cut carries over.
    #[test]
    fn a_message_posted_after_a_rate_cut_starts_at_the_cut_rate() {
        let (topo, mut n, mut arena) = pair(&["transport.mtu=1024"]);
        let sender = topo.nics[0].ports[0];
        n.activate(Q);
        let mut t = SimTime::ZERO;
        while let Pull::Sent { .. } = pull(&mut n, &topo, t, &mut arena) {
            t += SimTime::from_us(1);
        }
        assert_eq!(n.qp(Q).req.next, 8, "the first message is out");
        let f = n.cnp(Q, &mut arena);
        let cnp = arena.take(f.id);
        assert_eq!(
            n.receive(t, sender, (&cnp, None), &mut arena),
            Rx::RateCut(sender)
        );
        n.post(Q, FlowId(0), 4096, (true, true));
        n.activate(Q);
        let Pull::Sent { id, .. } = pull(&mut n, &topo, t, &mut arena) else {
            panic!("the second message sends nothing")
        };
        assert_eq!(arena.get(id).psn, 8, "its PSNs follow the first's");
        let wire = arena.get(id).wire_bytes as u64;
        let line = topo.port(sender).rate.serialize(wire);
        match pull(&mut n, &topo, t + line, &mut arena) {
            Pull::WaitUntil(w) => {
                let gap = (w - t).0 as f64 / line.0 as f64;
                assert!((1.9..2.1).contains(&gap), "{gap}");
            }
            other => panic!("the next message started at line rate: {other:?}"),
        }
    }

    #[test]
    fn the_receiver_delivers_in_order_acks_and_sends_cnps_no_closer_than_the_interval() {
        let (topo, mut n, mut arena) = pair(&[]);
        n.activate(Q);
        let Pull::Sent { id, .. } = pull(&mut n, &topo, SimTime::ZERO, &mut arena) else {
            panic!()
        };
        let mut first = arena.take(id);
        first.tos |= ecn::CE;
        let at = topo.nics[1].ports[0];
        let t = SimTime::from_us(2);
        let rx = n.receive(t, at, (&first, None), &mut arena);
        let Rx::Data {
            q,
            ce,
            delivered,
            completed,
            reply,
        } = rx
        else {
            panic!("{rx:?}")
        };
        assert_eq!((q, ce, delivered, completed), (Q, true, 4096, false));
        assert_eq!(reply, None, "acknowledged with the last packet");
        assert_eq!(n.congestion_experienced(t, Q), CnpWhen::Now);
        assert_eq!(
            n.congestion_experienced(t + SimTime::from_us(1), Q),
            CnpWhen::Never,
            "within the 4 us CNP interval"
        );
        assert_eq!(
            n.congestion_experienced(t + SimTime::from_us(4), Q),
            CnpWhen::Now
        );
        let f = n.cnp(Q, &mut arena);
        let cnp = *arena.get(f.id);
        assert_eq!(
            (f.port, cnp.opcode, cnp.src, cnp.dst),
            (at, Opcode::Cnp, NicId(1), NicId(0))
        );
        assert_eq!(cnp.dscp(), 48);
        // The second packet completes the transfer and is acknowledged.
        let Pull::Sent { id, .. } = pull(&mut n, &topo, t, &mut arena) else {
            panic!()
        };
        let second = arena.take(id);
        let Rx::Data {
            completed, reply, ..
        } = n.receive(t, at, (&second, None), &mut arena)
        else {
            panic!()
        };
        assert!(completed);
        let (opcode, psn) = reply.expect("the last packet is acknowledged");
        assert_eq!((opcode, psn), (Opcode::Ack, 1));
        let ack = n.reply(Q, at, (&second, None), (opcode, psn), &mut arena);
        let a = *arena.get(ack.id);
        assert_eq!(
            (ack.port, a.dst, a.header_crc),
            (at, NicId(0), n.qp(Q).header_crc[1])
        );
        // The ACK ends the sender's part.
        assert_eq!(
            n.receive(t, topo.nics[0].ports[0], (&a, None), &mut arena),
            Rx::Acked(Q)
        );
    }

    #[test]
    fn a_gap_gets_a_nak_and_the_nak_puts_the_qp_back_on_its_ring() {
        let (topo, mut n, mut arena) = pair(&[]);
        n.activate(Q);
        let _ = pull(&mut n, &topo, SimTime::ZERO, &mut arena);
        let Pull::Sent { id, .. } = pull(&mut n, &topo, SimTime::from_us(1), &mut arena) else {
            panic!()
        };
        // PSN 1 arrives first: PSN 0 was lost.
        let at = topo.nics[1].ports[0];
        let second = arena.take(id);
        let Rx::Data {
            delivered, reply, ..
        } = n.receive(SimTime::from_us(2), at, (&second, None), &mut arena)
        else {
            panic!()
        };
        assert_eq!(delivered, 0);
        let (opcode, psn) = reply.expect("a NAK for the gap");
        assert_eq!((opcode, psn), (Opcode::Nak, 0));
        let nak = n.reply(Q, at, (&second, None), (opcode, psn), &mut arena);
        assert_eq!(n.counters.naks_sent, 1);
        let sender = topo.nics[0].ports[0];
        assert!(!n.backlog(sender));
        let nak = *arena.get(nak.id);
        assert_eq!(
            n.receive(SimTime::from_us(3), sender, (&nak, None), &mut arena),
            Rx::Resend(Q)
        );
        assert!(n.backlog(sender), "go-back-N: PSN 0 goes again");
        let Pull::Sent { id, .. } = pull(&mut n, &topo, SimTime::from_us(3), &mut arena) else {
            panic!()
        };
        assert_eq!(arena.get(id).psn, 0);
    }

    #[test]
    fn the_timer_resends_what_was_never_acknowledged() {
        let (topo, mut n, mut arena) = pair(&[]);
        n.activate(Q);
        let Pull::Sent { timer, .. } = pull(&mut n, &topo, SimTime::ZERO, &mut arena) else {
            panic!()
        };
        let _ = pull(&mut n, &topo, SimTime::from_us(1), &mut arena);
        let due = timer.expect("armed");
        match n.timer(due, Q) {
            TimerAction::Retransmit(_) => {}
            other => panic!("{other:?}"),
        }
        assert!(n.backlog(topo.nics[0].ports[0]));
        let Pull::Sent { id, .. } = pull(&mut n, &topo, due, &mut arena) else {
            panic!()
        };
        assert_eq!(arena.get(id).psn, 0);
    }
}
