//! The peak memory of a run, estimated before the simulation is built,
//! so that a run too large is refused before it allocates. Its error
//! against measured peaks is in ACCURACY.md.

/// Peak memory a run should reach, worked out before the simulation is
/// built: what the process holds with the scenario loaded (fabric, routes,
/// transfers), the state the simulation will build from it, the most
/// packets that can be alive at once at the bytes each costs, the time
/// series at their bound, and the largest output file.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MemoryEstimate {
    /// What the process holds now: the scenario, its topology, routes and
    /// expanded workload.
    pub loaded_bytes: u64,
    /// The simulation's own state, built from it: per QP, port and task.
    pub state_bytes: u64,
    pub packets: u64,
    pub series_bytes: u64,
    /// The largest output file, held whole while it is written.
    pub output_bytes: u64,
}

impl MemoryEstimate {
    /// Memory per packet alive, as measured on the k = 8 to 32
    /// benchmarks (61 to 73 B: the packet record, its queue entry, its
    /// event; BENCHMARKS.md), rounded up.
    pub const BYTES_PER_PACKET: u64 = 72;
    /// State `Simulation::new` builds, fitted on five scenarios (ACCURACY.md):
    /// per QP (both halves, rings, timers, its flow's record, path records)
    /// 840 B (600 B fitted first; the k = 16 all-to-all of a million QPs
    /// then peaked 15% above the estimate, about 800 B per QP), per port
    /// (queues, PFC accounts, counters, balancer state) 1.8 KB, per task
    /// of the graph 32 B.
    pub const BYTES_PER_QP: u64 = 840;
    pub const BYTES_PER_PORT: u64 = 1_800;
    pub const BYTES_PER_TASK: u64 = 32;
    /// A row of flows.csv (network or NVLink), and of qps.csv.
    pub const BYTES_PER_FLOW_ROW: u64 = 220;
    pub const BYTES_PER_QP_ROW: u64 = 110;
    /// At flow level, what a QP's sub-flow may hold while its share of a
    /// transfer moves (`engine::fluid`: its record, its list of links with
    /// their shares, its place in each link's list of users, heap entries).
    pub const BYTES_PER_SUBFLOW: u64 = 240;

    pub fn total(&self) -> u64 {
        self.loaded_bytes
            + self.state_bytes
            + self.packets * Self::BYTES_PER_PACKET
            + self.series_bytes
            + self.output_bytes
    }

    /// The estimate for a loaded scenario, before anything of the
    /// simulation is built, so that a run too large is refused before it
    /// allocates. `loaded_bytes`: what the process holds now. Packets
    /// alive at once are at most all of the workload's packets, and at
    /// most what the switch buffers hold in full-size frames plus a few
    /// per port on the wires.
    pub fn of(p: &crate::scenario::Prepared, loaded_bytes: u64) -> MemoryEstimate {
        let sc = &p.scenario;
        let mtu = sc.transport.mtu.max(1) as u64;
        let ack_every = sc.transport.ack_every.max(1) as u64;
        let mut qps = 0u64;
        let mut total = 0u64;
        for f in &p.flows {
            let n = f.qps.max(1) as u64;
            qps += n;
            let per_qp = f.bytes.div_ceil(n).div_ceil(mtu).max(1);
            total += n * (per_qp + per_qp.div_ceil(ack_every));
        }
        // A pass: its connections' QPs and rows, and its state per
        // position and slice; its messages exist only in flight.
        let mut pass_state = 0u64;
        let mut rows = 0u64;
        for pass in &p.graph.passes {
            pass_state += pass.state_bytes();
            for (c, conn) in pass.conns.iter().enumerate() {
                rows += 1;
                if conn.via == crate::workload::pass::Via::Local {
                    continue;
                }
                let n = pass.qps.max(1) as u64;
                qps += n;
                let c = c as u32;
                let pkts = pass.bytes_on(c).div_ceil(mtu) + pass.sends_on(c);
                total += pkts + pkts.div_ceil(ack_every);
            }
        }
        let ports = p.topology.ports.len() as u64;
        // Jobs made as the run goes hold two iterations at a time besides
        // the first (`runtime::later`).
        let held: u64 = p
            .later
            .iter()
            .flat_map(|l| &l.jobs)
            .map(|j| 2 * u64::from(j.layout.plain.tasks.max(j.layout.checkpoint.tasks)))
            .sum();
        let tasks = p.graph.tasks.len() as u64 + held;
        let frame = mtu + 100;
        let held = p.topology.switches.len() as u64 * sc.switch.buffer_bytes / frame + ports * 4;
        // A fluid run has no packets and samples no series; each QP may
        // have a sub-flow instead.
        let flow_level = sc.fidelity == crate::scenario::Fidelity::Flow;
        let series_bytes = if sc.report.sample_interval.is_some() && !flow_level {
            // Per port: utilization, marks, CNPs, and a depth, a pause
            // share and pauses sent per used queue; per tracked QP two
            // rates.
            let per_port = 3 + 3 * sc.qos.map.queues_used().count_ones() as u64;
            (ports * per_port + 2 * (sc.report.sample_qps as u64).min(qps))
                * sc.report.samples as u64
                * 4
        } else {
            0
        };
        let copies = p
            .graph
            .tasks
            .iter()
            .filter(|t| matches!(t.kind, crate::workload::graph::TaskKind::Local { .. }))
            .count() as u64;
        MemoryEstimate {
            loaded_bytes,
            state_bytes: qps * Self::BYTES_PER_QP
                + ports * Self::BYTES_PER_PORT
                + tasks * Self::BYTES_PER_TASK
                + pass_state
                + if flow_level {
                    qps * Self::BYTES_PER_SUBFLOW
                } else {
                    0
                },
            packets: if flow_level { 0 } else { total.min(held) },
            series_bytes,
            output_bytes: ((p.flows.len() as u64 + copies + rows) * Self::BYTES_PER_FLOW_ROW)
                .max(qps * Self::BYTES_PER_QP_ROW),
        }
    }
}
