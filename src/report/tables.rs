//! The CSV tables: one row per transfer, one row per link direction.

use crate::engine::Simulation;

fn finish(w: csv::Writer<Vec<u8>>) -> std::io::Result<Vec<u8>> {
    w.into_inner()
        .map_err(|e| std::io::Error::other(e.to_string()))
}

pub fn flows_csv(sim: &Simulation) -> std::io::Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "flow_id",
        "workload",
        "src",
        "dst",
        "src_name",
        "dst_name",
        "bytes",
        "qps",
        "start_ps",
        "finish_ps",
        "fct_ps",
        "ideal_fct_ps",
        "slowdown",
        "acked_ps",
        "retransmitted_bytes",
        "timeouts",
        "out_of_order",
        "naks",
        "paths",
    ])?;
    for (i, f) in sim.flows.iter().enumerate() {
        let qps = &sim.qps[f.first_qp as usize..(f.first_qp + f.n_qps) as usize];
        let fct = f.finish.map(|t| t - f.spec.start);
        let opt = |v: Option<u64>| v.map_or(String::new(), |x| x.to_string());
        w.write_record([
            i.to_string(),
            f.spec.workload.to_string(),
            f.spec.src.0.to_string(),
            f.spec.dst.0.to_string(),
            sim.topo.gpu_name(f.spec.src),
            sim.topo.gpu_name(f.spec.dst),
            f.spec.bytes.to_string(),
            f.n_qps.to_string(),
            f.spec.start.0.to_string(),
            opt(f.finish.map(|t| t.0)),
            opt(fct.map(|t| t.0)),
            f.ideal_fct.0.to_string(),
            fct.map_or(String::new(), |t| {
                format!("{:.4}", t.0 as f64 / f.ideal_fct.0.max(1) as f64)
            }),
            opt(f.acked.map(|t| t.0)),
            qps.iter()
                .map(|q| q.req.retx_bytes)
                .sum::<u64>()
                .to_string(),
            qps.iter()
                .map(|q| q.req.timeouts as u64)
                .sum::<u64>()
                .to_string(),
            qps.iter()
                .map(|q| q.resp.out_of_order)
                .sum::<u64>()
                .to_string(),
            qps.iter()
                .map(|q| q.resp.naks_sent)
                .sum::<u64>()
                .to_string(),
            paths(sim, f.first_qp, f.n_qps),
        ])?;
    }
    finish(w)
}

/// The switches each QP of a transfer crosses, `leaf0>spine2>leaf1`, QPs
/// separated by `;` (distinct paths only, in QP order).
fn paths(sim: &Simulation, first_qp: u32, n_qps: u32) -> String {
    let mut seen: Vec<String> = Vec::new();
    for q in first_qp..first_qp + n_qps {
        let p = match sim.qp_path(crate::topology::QpId(q)) {
            Some(hops) => hops
                .iter()
                .map(|s| sim.topo.switches[s.idx()].name.as_str())
                .collect::<Vec<_>>()
                .join(">"),
            None => "dynamic".to_string(),
        };
        if !seen.contains(&p) {
            seen.push(p);
        }
    }
    seen.join(";")
}

pub fn links_csv(sim: &Simulation) -> std::io::Result<Vec<u8>> {
    let topo = &sim.topo;
    let names = topo.kind.tier_names();
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "link",
        "from",
        "to",
        "tier",
        "rate_bps",
        "bytes",
        "packets",
        "utilization",
        "max_queue_bytes",
        "drops",
    ])?;
    let span = sim.now.0.max(1) as f64;
    for (li, l) in topo.links.iter().enumerate() {
        for p in [l.a, l.b] {
            let port = &sim.ports[p.idx()];
            let peer = topo.port(p).peer;
            let tier = if l.tier == 0 {
                format!("host-{}", names[0])
            } else {
                format!("{}-{}", names[l.tier as usize - 1], names[l.tier as usize])
            };
            w.write_record([
                li.to_string(),
                topo.owner_name(p).to_string(),
                topo.owner_name(peer).to_string(),
                tier,
                topo.port(p).rate.bps().to_string(),
                port.tx_wire_bytes.to_string(),
                port.tx_packets.to_string(),
                format!("{:.4}", port.busy_ps as f64 / span),
                sim.queues[p.idx()].max_bytes.to_string(),
                sim.port_drops[p.idx()].packets.to_string(),
            ])?;
        }
    }
    finish(w)
}
