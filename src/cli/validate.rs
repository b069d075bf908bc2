//! `fabricsim validate`: a scenario checked and described, not run.

use super::common::{load, warnings};
use fabricsim::outln;
use fabricsim::scenario::{self};
use fabricsim::units::SimTime;
use std::path::Path;

pub(crate) fn validate(path: &Path, sets: &[String], strict: bool) -> Result<(), String> {
    let p = load(Some(path), sets)?;
    warnings(Some(path), &p, strict)?;
    let s = &p.scenario;
    let mut bytes: u64 = p.flows.iter().map(|f| f.bytes).sum();
    let mut transfers = p.flows.len() as u64;
    for pass in &p.graph.passes {
        for (c, conn) in pass.conns.iter().enumerate() {
            if conn.via != fabricsim::workload::pass::Via::Local {
                bytes += pass.bytes_on(c as u32);
                transfers += pass.sends_on(c as u32);
            }
        }
    }
    // Jobs' iterations and traces' parts to be made as the run goes.
    if let Some(l) = &p.later {
        transfers += u64::from(l.end.2).saturating_sub(p.flows.len() as u64) + l.net_messages;
        bytes += l.flow_bytes + l.net_bytes;
    }
    outln!(
        "{}: valid. {} fabric with {} hosts, {} GPUs, {} switches, {} links; {} workload entries, {} transfers, {} bytes; seed {}{}",
        path.display(),
        p.topology.kind.name(),
        p.topology.hosts.len(),
        p.topology.gpus.len(),
        p.topology.switches.len(),
        p.topology.links.len(),
        s.workloads.len(),
        transfers,
        bytes,
        s.seed,
        s.max_sim_time.map_or(String::new(), |t: SimTime| format!("; stops at {t}")),
    );
    for line in scenario::lossless::describe(&p.topology, &s.qos, &p.pfc) {
        outln!("  {line}");
    }
    if let Some(c) = &s.configs {
        let files: Vec<&str> = c.files.iter().map(|a| a.file.as_str()).collect();
        let files = files.join(", ");
        let away = scenario::lossless::departures(&p.topology, &s.qos, &s.transport.dcqcn);
        if away.is_empty() {
            outln!("  switch configuration {files}: WRED as the DCQCN preset gives it");
        } else {
            outln!("  switch configuration {files} departs from the DCQCN preset:");
            for line in away {
                outln!("    {line}");
            }
        }
        outln!("  audit of the configured fabric (findings are the warnings above):");
        for line in p.audit().map(|a| a.lines).unwrap_or_default() {
            outln!("    {line}");
        }
    }
    Ok(())
}
