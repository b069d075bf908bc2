//! Random scenarios for measuring one fidelity against another on designs
//! nobody tuned to (`fabricsim compare --fidelity packet,flow --random N
//! --seed S`): a seeded generator draws a fabric (fat-tree, rail pod or
//! pods, speeds, oversubscription, cable delays, buffer), its balancing
//! (ECMP, DLB flowlets or per packet, spraying), congestion control
//! (DCQCN, DCTCP or none), PFC on or off, a link that fails and heals
//! (one in six), and a workload mix of permutations, incasts,
//! collectives (ring, tree, hierarchical, auto) and training jobs. Every draw is a scenario each fidelity runs; the
//! same seed gives the same scenarios.

use crate::rng::{Stream, Streams};
use std::fmt::Write;

fn pick<'a>(r: &mut Stream, xs: &[&'a str]) -> &'a str {
    xs[r.below(xs.len() as u64) as usize]
}

/// The `i`th scenario of the set `seed` draws: its name and its text.
pub fn scenario(seed: u64, i: u64) -> (String, String) {
    let mut r = Streams::new(seed).stream(&format!("random-scenario-{i}"));
    let mut t = String::new();
    let kind = pick(
        &mut r,
        &["fat-tree", "rail-optimized", "rail-optimized", "multi-pod"],
    );
    let _ = writeln!(t, "name = \"random {seed}/{i}: {kind}\"\n");
    let _ = writeln!(t, "[simulation]\nseed = {}\n", r.below(1_000_000));
    let _ = writeln!(t, "[topology]\nkind = \"{kind}\"");
    // The GPUs a workload may use, by index.
    let gpus = match kind {
        "fat-tree" => {
            let k = [4u64, 8][r.below(2) as usize];
            let _ = writeln!(
                t,
                "k = {k}\nlink_speed = \"{}\"",
                pick(&mut r, &["100G", "200G", "400G"])
            );
            k * k * k / 4
        }
        _ => {
            let per_host = [1u64, 2, 4, 8][r.below(4) as usize];
            let per_leaf = 2 + r.below(4);
            let leaves = 2 + r.below(3);
            let pods = if kind == "multi-pod" {
                2 + r.below(2)
            } else {
                1
            };
            let hosts = per_leaf * leaves * pods;
            let nic = pick(&mut r, &["100G", "200G", "400G"]);
            let spines = 1 + r.below(4);
            // Oversubscription: uplinks from 1:1 to 3:1 below.
            let up = pick(&mut r, &["100G", "200G", "400G", "800G"]);
            let _ = writeln!(
                t,
                "hosts = {hosts}\ngpus_per_host = {per_host}\nnic_speed = \"{nic}\"\nhosts_per_leaf = {per_leaf}\nspines = {spines}\nuplink_speed = \"{up}\"\nuplinks_per_spine = {}",
                1 + r.below(2)
            );
            if kind == "multi-pod" {
                let _ = writeln!(t, "pods = {pods}\nsuper_spines = {}", 1 + r.below(2));
            }
            hosts * per_host
        }
    };
    let _ = writeln!(t, "link_delay = \"{}ns\"\n", 100 + r.below(900));
    let _ = writeln!(
        t,
        "[switch]\nbuffer = \"{}MB\"\n[switch.balance]\nmode = \"{}\"",
        [16, 32, 64][r.below(3) as usize],
        pick(&mut r, &["ecmp", "ecmp", "dlb", "spray"])
    );
    if r.below(2) == 0 {
        let _ = writeln!(t, "dlb_mode = \"per-packet\"");
    }
    let cc = pick(&mut r, &["dcqcn", "dcqcn", "dctcp", "none"]);
    let _ = writeln!(
        t,
        "\n[transport]\nmtu = 4096\ncongestion_control = \"{cc}\"\nrto = \"1ms\"\n\n[pfc]\nenabled = {}\n",
        r.below(2) == 0
    );
    if r.below(6) == 0 {
        // A link that fails and heals, so that every transfer finishes.
        let target = match kind {
            "fat-tree" => "link = [\"pod0-edge0\", \"pod0-agg0\"]",
            "multi-pod" => "link = [\"pod0-leaf0\", \"pod0-spine0\"]",
            _ => "link = [\"leaf0\", \"spine0\"]",
        };
        let at = 10 + r.below(200);
        let _ = writeln!(
            t,
            "[routing]\nreconverge = \"{}us\"\n\n[[failure]]\n{target}\nat = \"{at}us\"\nrecover = \"{}us\"\n",
            5 + r.below(50),
            at + 50 + r.below(500)
        );
    }
    let bytes = |r: &mut Stream| ["256KB", "1MB", "4MB", "16MB"][r.below(4) as usize];
    let n = 1 + r.below(2);
    for _ in 0..n {
        match r.below(5) {
            0 => {
                let _ = writeln!(
                    t,
                    "[[workload]]\nkind = \"permutation\"\nbytes = \"{}\"\n",
                    bytes(&mut r)
                );
            }
            1 => {
                let dst = r.below(gpus);
                let senders = (2 + r.below(7)).min(gpus - 1);
                let _ = writeln!(
                    t,
                    "[[workload]]\nkind = \"incast\"\ndst = {dst}\nsenders = {senders}\nbytes = \"{}\"\n",
                    bytes(&mut r)
                );
            }
            2 | 3 => {
                let (op, algo) = match r.below(5) {
                    0 => ("all-reduce", "ring"),
                    1 => ("all-reduce", "auto"),
                    2 => ("all-reduce", "hierarchical"),
                    3 => ("all-gather", "ring"),
                    _ => ("reduce-scatter", "ring"),
                };
                // A hierarchical all-reduce takes whole hosts: every GPU.
                let size = if algo == "hierarchical" {
                    gpus
                } else {
                    (2 + r.below(gpus - 1)).min(gpus)
                };
                let first = r.below(gpus - size + 1);
                let ranks: Vec<String> = (first..first + size).map(|g| g.to_string()).collect();
                let _ = writeln!(
                    t,
                    "[[workload]]\nkind = \"collective\"\nop = \"{op}\"\nalgorithm = \"{algo}\"\ngpus = [{}]\nbytes = \"{}\"\n",
                    ranks.join(", "),
                    ["4MB", "16MB", "64MB"][r.below(3) as usize]
                );
            }
            _ => {
                let size = (2 + r.below(gpus - 1)).min(gpus).min(64);
                let ranks: Vec<String> = (0..size).map(|g| g.to_string()).collect();
                let _ = writeln!(
                    t,
                    "[[workload]]\nkind = \"training\"\ngpus = [{}]\niterations = 2\n[[workload.phase]]\ncompute = \"{}us\"\nop = \"all-reduce\"\nbytes = [\"{}\", \"{}\"]\n",
                    ranks.join(", "),
                    50 + r.below(200),
                    bytes(&mut r),
                    bytes(&mut r)
                );
            }
        }
    }
    (format!("random-{seed}-{i}"), t)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every draw is a scenario both fidelities accept, and a seed draws
    /// the same scenarios again.
    #[test]
    fn every_draw_runs_at_both_fidelities_and_a_seed_repeats() {
        for seed in [1, 2] {
            for i in 0..60 {
                let (name, text) = scenario(seed, i);
                for f in ["packet", "flow", "hybrid"] {
                    let sets = [format!("simulation.fidelity=\"{f}\"")];
                    if let Err(e) = crate::scenario::prepare(&name, &text, &sets) {
                        panic!("{name} at {f}: {e}\n{text}");
                    }
                }
                assert_eq!(scenario(seed, i), (name, text));
            }
        }
        assert_ne!(scenario(1, 0).1, scenario(2, 0).1);
    }
}
