//! Flow level: a ring pass whose hops all cross the network runs as one
//! steady stream (`simulation.flow_rings = "streams"`, the default),
//! not message by message.
//!
//! A ring of n positions moving its data in `steps` steps of `slices`
//! slices sends steps x slices messages on each of its n connections; a
//! ring across 8,192 servers has more than a billion. Once every position
//! has entered, the messages flow as a pipeline: each connection carries
//! about the same bytes, and none can go faster than the slowest, since
//! every position forwards what it receives. So the ring is one sub-flow
//! of the max-min network, at one rate for all its connections, over the
//! union of their paths (a port that two of its connections cross counts
//! its bytes twice), carrying one connection's wire bytes.
//!
//! Fill and drain. The stream starts the step time after the last
//! position entered (with NCCL's launch time), as a ring's first messages
//! do. Sent alone, a slice would take `steps` hops of one message's time
//! t, the hop's unloaded latency L and the step time s between them; the
//! stream's bytes take the time the fluid gives them, T. The last
//! position has everything at
//!
//!   start + T + L + max(0, (steps - 1) (L + s - (slices - 1) t)),
//!
//! where t = T / (steps x slices): with enough slices in flight the
//! pipeline hides the hops' latency, and with few it does not. Every
//! position's part ends then. What this leaves out, and its error against
//! the packet level, is in ACCURACY.md: positions that enter early cannot
//! send ahead, positions finish together, and a stream has no congestion
//! control of its own (as no fluid has).

use super::{Count, Due, Kernel, Runtime};
use crate::nic::transport::{packets_of, Requester};
use crate::topology::QpId;
use crate::units::SimTime;
use crate::workload::pass::{Released, Via};
use rustc_hash::FxHashMap as HashMap;
use std::collections::BTreeMap;

impl Stream {
    /// What its window counted after its last step, for a stream whose
    /// last byte left at `now`: the step's latency in full if it ran at
    /// its window's cap throughout, less what it spent beyond that (at
    /// the rate of a busier fabric, the bytes and not the window set its
    /// pace).
    fn overcount(&self, now: SimTime) -> SimTime {
        let took = now.saturating_sub(self.start).0 as f64;
        let beyond = (took - self.window).max(0.0);
        SimTime((self.step_gap - beyond).clamp(0.0, self.step_gap).round() as u64)
    }
}

impl Streams {
    /// Stream `pass`, under way.
    fn get(&mut self, pass: u32) -> &mut Stream {
        self.under_way.get_mut(&pass).expect("a stream under way")
    }

    /// Stream `pass` starts sending: its bytes would take `window` at
    /// its window's cap, and `gap` ends each of its steps.
    fn begun(&mut self, pass: u32, window: f64, gap: f64) -> &mut Stream {
        self.started += 1;
        let s = self.get(pass);
        (s.window, s.step_gap) = (window, gap);
        s
    }
}

/// The ring passes that run as streams, and those under way.
#[derive(Default)]
pub struct Streams {
    /// Per streamed pass: how many channels of its collective run over
    /// the same GPUs, and so share their NICs.
    channels: Vec<u32>,
    under_way: HashMap<u32, Stream>,
    /// Streams run (`perf.json`).
    pub started: u64,
}

#[derive(Default)]
struct Stream {
    entered: u32,
    /// How long its bytes take at its window's cap, and the latency that
    /// ends each of its steps (a hop's and the step time): a stream that
    /// ran at its cap has counted that latency once too often, after its
    /// last step.
    window: f64,
    step_gap: f64,
    /// Inside one host: its NVLink copies still moving.
    copies: u32,
    /// When it starts sending, and the unloaded latency of one hop.
    start: SimTime,
    hop: SimTime,
    /// When its last position has everything, once the fluid has moved
    /// its bytes.
    done: Option<SimTime>,
}

impl Runtime {
    /// Which passes run as streams: at flow level with `flow_rings =
    /// "streams"`, ring passes whose connections all copy over NVLink or
    /// all write over the network, each carrying bytes.
    pub fn set_up_streams(&mut self) {
        self.streams.channels = crate::workload::pass::channels_of(&self.tasks.graph.passes);
    }

    /// How many channels of pass `p`'s collective run over its GPUs.
    fn channels(&self, p: u32) -> u32 {
        match self.streams.channels.get(p as usize) {
            Some(&n) => n,
            None => {
                let (part, i) = self.tasks.later_pass(p);
                part.channels[i]
            }
        }
    }

    /// Whether pass `pass` runs as a stream.
    pub(crate) fn streamed(&self, pass: u32) -> bool {
        // The workload made them so (`Pass::can_stream`), numbering no
        // messages for them.
        self.tasks.pass(pass).is_some_and(|p| p.streamed)
    }

    /// Position `pos` of streamed pass `pass` enters it: once every
    /// position has, the stream starts a step time later.
    pub(crate) fn stream_enter(&mut self, k: &mut dyn Kernel, pass: u32, _pos: u32) {
        let n = self.tasks.pass(pass).expect("a pass").order.len() as u32;
        let s = self.streams.under_way.entry(pass).or_default();
        s.entered += 1;
        if s.entered < n {
            return;
        }
        let p = &self.tasks.pass(pass).expect("a pass");
        let via = p.conns[0].via;
        // Its window counts each step's time, the first one's too.
        let first = p.latency.launch;
        let hop = if via == Via::Local {
            self.tasks.nvlink.latency
        } else {
            self.unloaded_net_hop_of(k, pass)
        };
        let now = k.now();
        let s = self.streams.get(pass);
        s.start = now + first;
        s.hop = hop;
        k.at(s.start, Due::Stream(pass));
    }

    /// A stream's time has come: it starts sending, or its last position
    /// has everything.
    pub(crate) fn stream_event(&mut self, k: &mut dyn Kernel, pass: u32) {
        let done = self.streams.under_way.get(&pass).and_then(|s| s.done);
        match done {
            None => self.stream_start(k, pass),
            Some(_) => self.stream_end(k, pass),
        }
    }

    /// The stream of pass `pass` goes on the fluid network: one sub-flow
    /// over every connection's paths (each QP of a connection carrying
    /// its share), with one connection's wire bytes.
    fn stream_start(&mut self, k: &mut dyn Kernel, pass: u32) {
        let pi = pass as usize;
        let p = &self.tasks.pass(pi as u32).expect("a pass");
        if p.conns[0].via == Via::Local {
            return self.stream_copies(k, pass);
        }
        let tc = &k.scenario().transport;
        let framing = k.scenario().qos.framing;
        let ports = k.topo().ports.len() as u32;
        let pcie = k.pcie_ps_per_byte();
        let mut uses: BTreeMap<u32, f64> = self.stream_ports(k, pass).into_iter().collect();
        let (mut wire, mut cap) = (0u64, f64::INFINITY);
        for c in 0..p.conns.len() as u32 {
            let bytes = p.bytes_on(c);
            let spec = p
                .conn_spec(k.topo(), c, bytes)
                .expect("a streamed pass writes over the network");
            let first = self.pass_first_qp(pi as u32, c);
            let c_wire = p.over_ring_messages(c, |m| {
                if m == 0 {
                    return 0;
                }
                super::ideal::message_wire(&Requester::one(0, m, tc.mtu, tc.write_mode), framing)
            });
            wire = wire.max(c_wire);
            if pcie.is_some() && c_wire > 0 {
                let gpu = k.qp(QpId(first)).src_gpu;
                *uses.entry(ports + gpu.0).or_default() += bytes as f64 / c_wire as f64;
            }
            if let Some(r) = spec.rate {
                cap = cap.min(r.bps() as f64 / 8e12);
            }
        }
        // What a connection can carry with `slices` messages in flight,
        // each sent while the collective's other channels send theirs on
        // the same NICs, then a hop's latency and a step time before the
        // next: the pipeline's window (see the module's notes).
        let (steps, slices) = p.ring_steps().expect("a streamed pass is a ring");
        let first_qp = QpId(self.pass_first_qp(pi as u32, 0));
        let s = &self.streams.under_way[&pass];
        let dst = p
            .conn_spec(k.topo(), 0, 1)
            .expect("a streamed pass writes over the network")
            .dst_nic;
        let narrowest = k
            .route_of(first_qp, dst)
            .iter()
            .map(|&port| k.topo().port(port).rate.bps())
            .min()
            .unwrap_or(1) as f64
            / 8e12;
        let msg = wire as f64 / (f64::from(steps) * f64::from(slices));
        let together = f64::from(self.channels(pi as u32));
        let cycle = together * msg / narrowest + (s.hop.0 + p.latency.net.0) as f64;
        if msg > 0.0 {
            cap = cap.min(f64::from(slices) * msg / cycle);
        }
        let gap = (s.hop.0 + p.latency.net.0) as f64;
        let window = wire as f64 / cap;
        let mut sub = crate::fluid::Sub::new(
            crate::topology::FlowId(u32::MAX),
            first_qp,
            wire,
            cap,
            uses.into_iter().collect(),
        );
        sub.latency = s.hop;
        sub.pass = pass;
        self.streams.begun(pass, window, gap);
        let now = k.now();
        k.fluid().add(sub, now);
        k.fluid_share_later();
    }

    /// The ports a network stream of pass `pass` crosses, and how many of
    /// its connections' bytes each carries per byte of the stream (each
    /// QP of a connection carries its share; a port that several
    /// connections cross carries each one's), by port.
    pub(crate) fn stream_ports(&self, k: &dyn Kernel, pass: u32) -> Vec<(u32, f64)> {
        let pi = pass as usize;
        let p = &self.tasks.pass(pi as u32).expect("a pass");
        // Its messages take as many of a connection's QPs as the largest
        // of them does.
        let largest = p.ring_sizes().last().copied().unwrap_or(1);
        let mut uses: BTreeMap<u32, f64> = BTreeMap::new();
        for c in 0..p.conns.len() as u32 {
            let Some(spec) = p.conn_spec(k.topo(), c, largest) else {
                continue;
            };
            let n = spec.n_qps().max(1);
            let first = self.pass_first_qp(pi as u32, c);
            for q in first..first + n {
                for (port, share) in k.qp_split(QpId(q), spec.dst_nic) {
                    *uses.entry(port.0).or_default() += share / f64::from(n);
                }
            }
        }
        uses.into_iter().collect()
    }

    /// A ring inside one host: a copy per connection over NVLink, with
    /// its bytes, each capped at what the pipeline's window lets through
    /// (as a network stream is). A step's slices are copied side by side
    /// (a copy waits for no lane, unlike a connection's writes), so they
    /// share the GPU's rate and arrive together.
    fn stream_copies(&mut self, k: &mut dyn Kernel, pass: u32) {
        let pi = pass as usize;
        let p = &self.tasks.pass(pi as u32).expect("a pass");
        let (steps, slices) = p.ring_steps().expect("a streamed pass is a ring");
        let topo = k.topo();
        let pairs: Vec<(u32, u32, u64)> = p
            .conns
            .iter()
            .enumerate()
            .map(|(c, conn)| {
                let (a, b) = (&topo.gpus[conn.from.idx()], &topo.gpus[conn.to.idx()]);
                (a.local, b.local, p.bytes_on(c as u32))
            })
            .collect();
        let host = topo.gpus[p.order[0].idx()].host.idx();
        let nv = &self.tasks.nvlink;
        let msg = pairs[0].2 as f64 / (f64::from(steps) * f64::from(slices));
        let together = f64::from(self.channels(pi as u32));
        let s = &self.streams.under_way[&pass];
        let side_by_side = together * f64::from(slices) * msg / nv.rate();
        let cycle = side_by_side + (s.hop.0 + p.latency.nvlink.0) as f64;
        let cap = if msg > 0.0 {
            f64::from(slices) * msg / cycle
        } else {
            f64::INFINITY
        };
        let gap = (s.hop.0 + p.latency.nvlink.0) as f64;
        let window = pairs.iter().map(|x| x.2).max().unwrap_or(0) as f64 / cap;
        let n = pairs.len() as u32;
        let now = k.now();
        let next = self.tasks.nvlink.add_stream(host, pass, &pairs, cap, now);
        self.streams.begun(pass, window, gap).copies = n;
        if let Some((at, gen)) = next {
            k.at(at, Due::Nvlink(host as u32, gen));
        }
    }

    /// One of the NVLink copies of pass `pass`'s stream is done: once all
    /// are, its last position has everything when the last step's latency
    /// has passed (see `Stream::overcount`).
    pub(crate) fn stream_copied(&mut self, k: &mut dyn Kernel, pass: u32) {
        let s = self.streams.get(pass);
        s.copies -= 1;
        if s.copies == 0 {
            let gap = SimTime(s.step_gap.round() as u64);
            let done = k.now() + gap - s.overcount(k.now());
            s.done = Some(done);
            k.at(done, Due::Stream(pass));
        }
    }

    /// The stream of pass `pass` has sent its last byte, now: its last
    /// position has everything when the last step's latency has passed
    /// (see `Stream::overcount`).
    pub(crate) fn stream_sent(&mut self, k: &mut dyn Kernel, pass: u32) {
        let now = k.now();
        let s = self.streams.get(pass);
        let done = now + SimTime(s.step_gap.round() as u64) - s.overcount(now);
        s.done = Some(done);
        k.at(done, Due::Stream(pass));
    }

    /// The stream of pass `pass` is over: its connections' rows take its
    /// messages, and every position's part is done.
    fn stream_end(&mut self, k: &mut dyn Kernel, pass: u32) {
        let pi = pass as usize;
        let s = self
            .streams
            .under_way
            .remove(&pass)
            .expect("a stream under way");
        let now = k.now();
        let mtu = k.scenario().transport.mtu;
        let conns = self.tasks.pass(pi as u32).expect("a pass").conns.len() as u32;
        let local = self.tasks.pass(pi as u32).expect("a pass").conns[0].via == Via::Local;
        for c in 0..conns {
            let p = &self.tasks.pass(pi as u32).expect("a pass");
            let planned = p.sends_on(c);
            let bytes = p.bytes_on(c);
            let (pkts, ideal) = if local {
                let nv = &self.tasks.nvlink;
                (
                    0,
                    SimTime(p.over_ring_messages(c, |m| if m == 0 { 0 } else { nv.alone(m).0 })),
                )
            } else {
                k.count(Count::Delivered(bytes));
                k.count(Count::Completed(planned));
                k.count(Count::Acked(planned));
                let pkts = p.over_ring_messages(c, |m| u64::from(packets_of(m, mtu)));
                (pkts, self.stream_ideal(k, pi, c))
            };
            let r = self.pass_row_mut(pi as u32, c);
            r.messages += planned;
            r.acked_messages += planned;
            r.bytes += bytes;
            r.pkts += pkts;
            r.start = r.start.min(s.start);
            r.finish = r.finish.max(Some(now));
            r.acked = r.acked.max(Some(if local { now } else { now + s.hop }));
            r.ideal += ideal;
            let halves = if local { planned } else { 2 * planned };
            self.later_progress(k, super::Loc::Pass(pass), halves);
        }
        self.passes.last_done = self.passes.last_done.max(now);
        let n = self.tasks.pass(pi as u32).expect("a pass").order.len() as u32;
        let out = Released {
            send: Vec::new(),
            done: (0..n).collect(),
        };
        self.pass_released(k, pi, out, false);
    }

    /// The sum of the ideal times of the messages connection `c` of pass
    /// `pi` carries, each alone on an idle fabric (a ring's messages have
    /// a few sizes).
    fn stream_ideal(&mut self, k: &mut dyn Kernel, pi: usize, c: u32) -> SimTime {
        let p = &self.tasks.pass(pi as u32).expect("a pass");
        let first_qp = self.pass_first_qp(pi as u32, c);
        let mut sizes: BTreeMap<u64, SimTime> = p
            .ring_sizes()
            .into_iter()
            .map(|m| (m, SimTime::ZERO))
            .collect();
        let mut cache = std::mem::take(&mut self.ideal_cache);
        for (&m, t) in sizes.iter_mut() {
            *t = match self.passes.ideal.get(&(first_qp, m)) {
                Some(&t) => t,
                None => {
                    let spec = p
                        .conn_spec(k.topo(), c, m)
                        .expect("a streamed pass writes over the network");
                    let n = spec.n_qps();
                    let pkts = (0..n)
                        .map(|i| {
                            packets_of(super::flow::share(m, n, i), k.scenario().transport.mtu)
                        })
                        .sum();
                    let fl = super::FlowState::new(spec, first_qp, n, true, pkts);
                    k.ideal_and_work(&fl, 0, &mut cache).0
                }
            };
        }
        self.ideal_cache = cache;
        for (&m, &t) in &sizes {
            self.passes.ideal.insert((first_qp, m), t);
        }
        SimTime(p.over_ring_messages(c, |m| sizes.get(&m).map_or(0, |t| t.0)))
    }
}
