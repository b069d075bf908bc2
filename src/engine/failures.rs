//! Failures in the event loop: links and switches that go down and come
//! back, links that slow down, and routing that reconverges a fixed delay
//! later. Until then switches keep forwarding on the old routes, and every
//! frame put on a dead link, or on the wire of a link when it died, is
//! lost and counted against the failure.

use super::{io, Event, Simulation, Wires};
use crate::scenario::failures::{FailureConfig, Target};
use crate::topology::routing::Routes;
use crate::topology::{LinkId, PortId, QpId, Topology};
use crate::units::{Rate, SimTime};
use crate::wire::Packet;

/// What one failure did.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct FailureStats {
    pub name: String,
    pub at: SimTime,
    pub recover: Option<SimTime>,
    pub degrade: Option<Rate>,
    pub lost_packets: u64,
    pub lost_bytes: u64,
    /// When the last frame was lost to it.
    pub last_loss_at: Option<SimTime>,
    /// QPs that lost a packet to it.
    pub affected_qps: u64,
    /// When the last affected QP delivered in-order data again (`None`
    /// if some never did).
    pub recovered_at: Option<SimTime>,
    pending: u64,
    /// Whether some QP was ever pending on it, and its latest recovery
    /// (what a parallel run merges `recovered_at` from).
    had_pending: bool,
    latest_recovery: Option<SimTime>,
    /// QPs whose path changed when routing reconverged after it (static
    /// balancers only: dynamic ones move flows all the time).
    pub flows_moved: Option<u64>,
    /// When routing reconverged after it.
    pub reconverged_at: Option<SimTime>,
}

/// A QP's path at a reconvergence.
enum Active {
    Finished,
    /// Follows from the header: these egress ports.
    Static(Vec<PortId>),
    /// Chosen packet by packet or flowlet by flowlet.
    Dynamic,
}

/// No failure to blame (yet).
const NONE: u32 = u32::MAX;

#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct FailureState {
    /// Active failures holding each link down.
    link_down: Vec<u16>,
    /// NVLink switch chips down in each host's domain.
    nvlink_down: Vec<u32>,
    /// The failure that last took each link down.
    link_cause: Vec<u32>,
    /// Each link's rate before any slowdown.
    rate0: Vec<Rate>,
    /// Routes on the whole fabric, which balancers re-derive from.
    routes0: Option<Routes>,
    pub stats: Vec<FailureStats>,
    /// Per QP: the failure it lost a packet to and has not recovered from,
    /// and the last failure that counted it as affected.
    qp_lost: Vec<u32>,
    qp_counted: Vec<u32>,
    /// Failures and recoveries routing has not reacted to yet.
    unconverged: Vec<u32>,
    pub lost_packets: u64,
    pub lost_bytes: u64,
    pub reconvergences: u64,
    /// In a partition of a parallel run, where a loss and the receiver
    /// of its QP may be in different partitions: the data lost here this
    /// window, for the receivers' partitions, and the in-order deliveries
    /// of the QPs received here, to replay both in one queue's order
    /// once the window's losses are all known (`replay`).
    pub(super) partitioned: bool,
    pub(super) notices: Vec<LossNotice>,
    deliveries: Vec<Delivery>,
    /// QPs received here with a loss they have not recovered from.
    pending_here: u64,
}

/// Data of QP `q` lost to failure `cause` at `at` (time, and key of the
/// event handled).
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct LossNotice {
    pub at: (SimTime, u32),
    pub q: QpId,
    /// The PSN lost: it costs the QP something only if its receiver did
    /// not have it yet.
    pub psn: u32,
    pub cause: u32,
}

/// A delivery to QP `q` at `at`, which moved its receiver's next
/// expected PSN from `before` to `after`.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
struct Delivery {
    at: (SimTime, u32),
    q: QpId,
    before: u32,
    after: u32,
}

impl FailureState {
    pub fn new(
        cfg: &FailureConfig,
        topo: &Topology,
        routes: &Routes,
        qps: usize,
        mut push: impl FnMut(SimTime, Event),
    ) -> Self {
        if cfg.events.is_empty() {
            return FailureState::default();
        }
        for (i, f) in cfg.events.iter().enumerate() {
            push(f.at, Event::Fail(i as u32));
            if let Some(t) = f.recover {
                push(t, Event::Recover(i as u32));
            }
        }
        FailureState {
            link_down: vec![0; topo.links.len()],
            link_cause: vec![NONE; topo.links.len()],
            rate0: topo.links.iter().map(|l| topo.port(l.a).rate).collect(),
            routes0: Some(routes.clone()),
            stats: cfg
                .events
                .iter()
                .map(|f| FailureStats {
                    name: f.target.name(topo),
                    at: f.at,
                    recover: f.recover,
                    degrade: f.degrade,
                    lost_packets: 0,
                    lost_bytes: 0,
                    last_loss_at: None,
                    affected_qps: 0,
                    recovered_at: None,
                    pending: 0,
                    had_pending: false,
                    latest_recovery: None,
                    flows_moved: None,
                    reconverged_at: None,
                })
                .collect(),
            qp_lost: vec![NONE; qps],
            qp_counted: vec![NONE; qps],
            ..Default::default()
        }
    }

    pub fn any(&self) -> bool {
        !self.stats.is_empty()
    }
}

fn links_of(topo: &Topology, t: Target) -> Vec<LinkId> {
    match t {
        Target::Link(l) => vec![l],
        Target::Switch(s) => topo.switches[s.idx()]
            .ports
            .iter()
            .map(|&p| topo.port(p).link)
            .collect(),
        Target::NvlinkSwitches { .. } => Vec::new(),
        Target::Nics {
            host, first, gpus, ..
        } => {
            let mut links: Vec<LinkId> = topo.hosts[host.idx()].gpus
                [first as usize..(first + gpus) as usize]
                .iter()
                .flat_map(|g| &topo.nics[topo.gpus[g.idx()].nic.idx()].ports)
                .map(|&p| topo.port(p).link)
                .collect();
            links.sort_unstable();
            links.dedup();
            links
        }
    }
}

impl Simulation {
    #[inline(never)]
    pub(super) fn fail(&mut self, i: u32, up: bool) {
        let f = self.scenario.failures.events[i as usize].clone();
        if let Target::NvlinkSwitches { host, count } = f.target {
            return self.fail_nvlink(host, count, up);
        }
        for l in links_of(&self.topo, f.target) {
            let link = self.topo.links[l.idx()];
            if let Some(r) = f.degrade {
                let r = if up { self.failures.rate0[l.idx()] } else { r };
                for p in [link.a, link.b] {
                    self.topo.ports[p.idx()].rate = r;
                    if self.owns_port(p) {
                        self.egress.set_rate(p, r);
                    }
                }
                let down = self.failures.link_down[l.idx()] > 0;
                self.fluid_links(&[(link.a, down), (link.b, down)]);
                continue;
            }
            let n = &mut self.failures.link_down[l.idx()];
            if up {
                *n = n.saturating_sub(1);
            } else {
                *n += 1;
                self.failures.link_cause[l.idx()] = i;
            }
            let down = *n > 0;
            for p in [link.a, link.b] {
                if self.owns_port(p) {
                    let turn = self.egress.set_down(&mut io!(self), p, down);
                    self.after(p, turn);
                }
            }
            self.fluid_links(&[(link.a, down), (link.b, down)]);
        }
        self.failures.unconverged.push(i);
        let t = self.now + self.scenario.failures.reconverge;
        self.queue.push(t, Event::Reconverge);
    }

    /// `count` of `host`'s NVLink switch chips go down (or come back):
    /// each GPU there keeps the share of its NVLink the others carry.
    /// Routes are not involved; copies under way slow down at once.
    fn fail_nvlink(&mut self, host: crate::topology::HostId, count: u32, up: bool) {
        let crate::scenario::hosts::ScaleUp::Switched { switches } = self.scenario.host.scale_up
        else {
            return;
        };
        let down = &mut self.failures.nvlink_down;
        if down.len() <= host.idx() {
            down.resize(host.idx() + 1, 0);
        }
        let n = &mut down[host.idx()];
        *n = if up {
            n.saturating_sub(count)
        } else {
            *n + count
        };
        let lost = f64::from((*n).min(switches)) / f64::from(switches);
        self.runtime(|rt, k| rt.nvlink_lost(k, host.0, lost));
    }

    /// Every switch moves to routes over the links that are up now.
    #[inline(never)]
    pub(super) fn reconverge(&mut self) {
        if self.failures.unconverged.is_empty() {
            return;
        }
        let before = self.active_routes();
        let down = &self.failures.link_down;
        self.routes = Routes::compute_live(&self.topo, |l| down[l.idx()] == 0);
        let routes0 = self
            .failures
            .routes0
            .as_ref()
            .expect("failures keep routes");
        for (s, sw) in self.egress.switches_mut().iter_mut().enumerate() {
            sw.balancer
                .reroute(&routes0.switches[s], &self.routes.switches[s], &self.topo);
        }
        self.fluid_reroute();
        let after = self.active_routes();
        // Counted only when every QP still sending follows a static path.
        let moved = before
            .iter()
            .zip(&after)
            .try_fold(0u64, |n, (a, b)| match (a, b) {
                (Active::Static(a), Active::Static(b)) => Some(n + u64::from(a != b)),
                (Active::Finished, _) | (_, Active::Finished) => Some(n),
                _ => None,
            });
        self.failures.reconvergences += 1;
        for i in std::mem::take(&mut self.failures.unconverged) {
            let st = &mut self.failures.stats[i as usize];
            if st.reconverged_at.is_none() {
                st.reconverged_at = Some(self.now);
                st.flows_moved = moved;
            }
        }
    }

    /// Where every QP still sending goes (in a partition, those it
    /// sends; the others' are counted where they are sent).
    fn active_routes(&self) -> Vec<Active> {
        let mine = |q: usize| self.part.as_ref().is_none_or(|p| p.qp_mine[q]);
        (0..self.nics.qps().len() as u32)
            .map(|q| {
                if !mine(q as usize) || self.nics.qps()[q as usize].req.is_done() {
                    return Active::Finished;
                }
                match self.qp_route(QpId(q)) {
                    Some(r) => Active::Static(r),
                    None => Active::Dynamic,
                }
            })
            .collect()
    }

    /// A frame (already freed) is lost to a failure: on a dead port, or
    /// with no route.
    #[inline(never)]
    pub(super) fn lost(&mut self, p: Option<PortId>, pkt: &Packet) {
        let cause = match p {
            Some(p) => self.failures.link_cause[self.topo.port(p).link.idx()],
            None => self.failures.unconverged.last().copied().unwrap_or(NONE),
        };
        self.failures.lost_packets += 1;
        self.failures.lost_bytes += pkt.wire_bytes as u64;
        if let Some(st) = self.failures.stats.get_mut(cause as usize) {
            st.lost_packets += 1;
            st.lost_bytes += pkt.wire_bytes as u64;
            st.last_loss_at = Some(self.now);
            // Only data counts against a QP (control frames carry no QP).
            if pkt.opcode.is_data() {
                if self.failures.partitioned {
                    self.failures.notices.push(LossNotice {
                        at: (self.now, self.keying.handling),
                        q: pkt.qp,
                        psn: pkt.psn,
                        cause,
                    });
                } else {
                    // A late duplicate of data received costs nothing.
                    let r = &self.nics.qps()[pkt.qp.idx()].resp;
                    if pkt.psn >= r.expected {
                        self.failures.affect(pkt.qp, cause);
                    }
                }
            }
        }
        self.dropped(pkt);
    }

    /// A QP delivered data (its next expected PSN was `before`): if a
    /// failure had cost it a packet, it has made progress again.
    #[inline]
    pub(super) fn progressed(&mut self, q: QpId, before: u32) {
        if self.failures.partitioned {
            self.failures.deliveries.push(Delivery {
                at: (self.now, self.keying.handling),
                q,
                before,
                after: self.nics.qp(q).resp.expected,
            });
            return;
        }
        let now = self.now;
        self.failures.recover(q, now);
    }

    /// In a partition: applies the losses of the last window to the QPs
    /// received here (`notices`, from every partition) and the window's
    /// deliveries, in one queue's order, as `lost` and `progressed` do at
    /// once on one thread.
    pub(super) fn replay_losses(&mut self, mut notices: Vec<LossNotice>) {
        let deliveries = std::mem::take(&mut self.failures.deliveries);
        if notices.is_empty() && self.failures.pending_here == 0 {
            self.failures.deliveries = deliveries;
            self.failures.deliveries.clear();
            return;
        }
        notices.sort_by_key(|n| (n.at, n.q));
        // What a QP's receiver expected next at a loss: after its last
        // delivery before the loss, else before its first after it, else
        // as now.
        let mut seen: std::collections::HashMap<QpId, u32> = Default::default();
        let expected_at = |seen: &std::collections::HashMap<QpId, u32>, n: &LossNotice| {
            seen.get(&n.q).copied().unwrap_or_else(|| {
                deliveries
                    .iter()
                    .find(|d| d.q == n.q && d.at > n.at)
                    .map_or(self.nics.qps()[n.q.idx()].resp.expected, |d| d.before)
            })
        };
        let mut n = notices.into_iter().peekable();
        let mut d = deliveries.iter().peekable();
        loop {
            let loss_first = match (n.peek(), d.peek()) {
                (None, None) => break,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(a), Some(b)) => a.at <= b.at,
            };
            if loss_first {
                let notice = n.next().expect("peeked");
                if notice.psn >= expected_at(&seen, &notice) {
                    self.failures.affect(notice.q, notice.cause);
                }
            } else {
                let delivery = d.next().expect("peeked");
                seen.insert(delivery.q, delivery.after);
                self.failures.recover(delivery.q, delivery.at.0);
            }
        }
        self.failures.deliveries = deliveries;
        self.failures.deliveries.clear();
    }
}

impl FailureState {
    /// Whether link `l` went down at some time of the run so far.
    pub fn was_down(&self, l: LinkId) -> bool {
        self.link_cause.get(l.idx()).is_some_and(|&c| c != NONE)
    }

    /// Data of QP `q`, not yet received in full, was lost to failure
    /// `cause`.
    fn affect(&mut self, q: QpId, cause: u32) {
        let st = &mut self.stats[cause as usize];
        let i = q.idx();
        if self.qp_counted[i] != cause {
            self.qp_counted[i] = cause;
            st.affected_qps += 1;
        }
        if self.qp_lost[i] == NONE {
            self.qp_lost[i] = cause;
            st.pending += 1;
            st.had_pending = true;
            st.recovered_at = None;
            self.pending_here += 1;
        }
    }

    /// QP `q` delivered in-order data at `now`.
    #[inline]
    fn recover(&mut self, q: QpId, now: SimTime) {
        let Some(&f) = self.qp_lost.get(q.idx()) else {
            return;
        };
        if f == NONE {
            return;
        }
        self.qp_lost[q.idx()] = NONE;
        self.pending_here -= 1;
        let st = &mut self.stats[f as usize];
        st.pending -= 1;
        st.latest_recovery = Some(now);
        if st.pending == 0 {
            st.recovered_at = Some(now);
        }
    }

    /// Takes what `other`, another partition of the same run, counted:
    /// losses where they happened, QPs where they are received; routing
    /// reconverged in every partition alike.
    pub(super) fn absorb(&mut self, other: FailureState) {
        self.lost_packets += other.lost_packets;
        self.lost_bytes += other.lost_bytes;
        for (mine, theirs) in self.stats.iter_mut().zip(other.stats) {
            mine.lost_packets += theirs.lost_packets;
            mine.lost_bytes += theirs.lost_bytes;
            mine.last_loss_at = mine.last_loss_at.max(theirs.last_loss_at);
            mine.affected_qps += theirs.affected_qps;
            mine.pending += theirs.pending;
            mine.had_pending |= theirs.had_pending;
            mine.latest_recovery = mine.latest_recovery.max(theirs.latest_recovery);
            mine.flows_moved = match (mine.flows_moved, theirs.flows_moved) {
                (Some(a), Some(b)) => Some(a + b),
                _ => None,
            };
        }
    }

    /// After every partition was absorbed: a failure's QPs recovered when
    /// the last of them did, if none is still pending (as one queue
    /// finds it: the count last fell to zero after the last loss that
    /// raised it).
    pub(super) fn settle(&mut self) {
        for st in &mut self.stats {
            st.recovered_at = if st.had_pending && st.pending == 0 {
                st.latest_recovery
            } else {
                None
            };
        }
    }
}
