//! Invariants of the code's structure that ARCHITECTURE.md states, checked
//! on the source: the top-level modules import each other without a
//! cycle, only the output side writes files, and the simulation core does
//! not read the wall clock.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Each source file's top-level module (`src/engine/mod.rs` -> engine)
/// and its text without its unit tests.
fn sources() -> Vec<(String, PathBuf, String)> {
    let mut files = Vec::new();
    rust_files(Path::new("src"), &mut files);
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix("src").unwrap();
            let top = rel.components().next().unwrap().as_os_str();
            let top = top.to_str().unwrap().trim_end_matches(".rs").to_string();
            let text = std::fs::read_to_string(&p).unwrap();
            let code = match text.find("#[cfg(test)]\nmod tests") {
                Some(i) => text[..i].to_string(),
                None => text,
            };
            (top, p, code)
        })
        .collect()
}

fn crate_paths(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            out.insert(name);
        }
    }
    out
}

#[test]
fn top_level_modules_import_each_other_without_a_cycle() {
    let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (top, _, code) in sources() {
        let entry = deps.entry(top.clone()).or_default();
        for d in crate_paths(&code) {
            if d != top {
                entry.insert(d);
            }
        }
    }
    for start in deps.keys() {
        // Depth-first from `start`, remembering the way, to name a cycle.
        let mut stack = vec![(start.clone(), vec![start.clone()])];
        let mut seen = BTreeSet::new();
        while let Some((m, way)) = stack.pop() {
            for d in deps.get(&m).into_iter().flatten() {
                if d == start {
                    panic!("import cycle: {} -> {start}", way.join(" -> "));
                }
                if seen.insert(d.clone()) {
                    let mut w = way.clone();
                    w.push(d.clone());
                    stack.push((d.clone(), w));
                }
            }
        }
    }
}

/// The simulation core (engine, switch, NIC, topology, wire, workload,
/// scenario) creates no file: results, captures and sweep state are
/// written by `report`, `output`, `sweep` and the command line.
#[test]
fn only_the_output_side_writes_files() {
    let core = [
        "engine", "runtime", "switch", "nic", "topology", "wire", "workload", "scenario", "keys",
        "units", "rng",
    ];
    let writes = [
        "File::create",
        "fs::write",
        "OpenOptions",
        "create_dir",
        "fs::rename",
        "fs::remove",
    ];
    for (top, path, code) in sources() {
        if !core.contains(&top.as_str()) {
            continue;
        }
        for w in writes {
            assert!(!code.contains(w), "{} uses {w}", path.display());
        }
    }
}

/// Nothing simulated depends on the wall clock: the core never reads it,
/// except the run loop, between batches of events, and a parallel run's
/// lead partition, between windows, for `--max-wall` and progress.
#[test]
fn the_simulation_core_does_not_read_the_wall_clock() {
    let core = [
        "engine", "runtime", "switch", "nic", "topology", "wire", "workload",
    ];
    for (top, path, code) in sources() {
        if !core.contains(&top.as_str()) {
            continue;
        }
        assert!(!code.contains("SystemTime"), "{}", path.display());
        let reads = code.matches("Instant::now").count();
        let allowed = usize::from(
            path.ends_with("engine/run.rs")
                || path.ends_with("engine/parallel.rs")
                || path.ends_with("engine/parallel/mpi.rs"),
        );
        assert_eq!(reads, allowed, "{} reads the wall clock", path.display());
    }
    for file in ["src/engine/parallel.rs", "src/engine/parallel/mpi.rs"] {
        let parallel = std::fs::read_to_string(file).unwrap();
        let at = parallel.find("Instant::now").unwrap();
        let run = parallel.find("\npub fn run(").unwrap();
        let next_fn = run + 1 + parallel[run + 1..].find("\n}\n").unwrap();
        assert!(
            (run..next_fn).contains(&at),
            "{file}: a parallel run reads the wall clock outside its start"
        );
    }
    let engine = std::fs::read_to_string("src/engine/run.rs").unwrap();
    let at = engine.find("Instant::now").unwrap();
    let run_loop = engine.find("fn run_to_end").unwrap();
    let next_fn = run_loop + 1 + engine[run_loop + 1..].find("\n    fn ").unwrap();
    assert!(
        (run_loop..next_fn).contains(&at),
        "the wall clock is read outside the run loop"
    );
}

/// The packet path's arithmetic is integer: forwarding, hashing,
/// admission, PFC, queueing, the transmitter, the event queue, packet
/// records and RC transport have no floating point. ARCHITECTURE.md lists
/// where floating point is used (DCQCN, WRED, rate caps and PCIe pacing,
/// MRC, DLB/GLB/ALB load estimates), each deterministic on one platform.
#[test]
fn the_packet_path_has_no_floating_point_outside_the_listed_places() {
    let integer_only = [
        "src/engine/mod.rs",
        "src/engine/queue.rs",
        "src/switch/mod.rs",
        "src/switch/classify.rs",
        "src/switch/forward.rs",
        "src/switch/admit.rs",
        "src/switch/pfc.rs",
        "src/switch/schedule.rs",
        "src/switch/port.rs",
        "src/switch/egress.rs",
        "src/switch/balance/mod.rs",
        "src/switch/balance/ecmp.rs",
        "src/switch/balance/hash.rs",
        "src/switch/balance/spray.rs",
        "src/switch/balance/rules.rs",
        "src/wire/frame.rs",
        "src/wire/packet.rs",
        "src/nic/transport.rs",
        "src/nic/rate.rs",
    ];
    let mut seen = 0;
    for (_, path, code) in sources() {
        let p = path.to_string_lossy().replace('\\', "/");
        if !integer_only.contains(&p.as_str()) {
            continue;
        }
        seen += 1;
        let code: String = code
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        for t in ["f32", "f64"] {
            let used = code
                .match_indices(t)
                .any(|(i, _)| !code[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_'));
            assert!(!used, "{p} uses {t}");
        }
    }
    assert_eq!(seen, integer_only.len(), "a listed file is missing");
}

/// The flow level's network and the NVLink copies are leaves the engine
/// drives: they know ports, QPs, flows, hosts and GPUs by id, and nothing
/// of the engine, switches or NICs.
#[test]
fn the_fluid_network_and_nvlink_import_only_ids_and_units() {
    let leaves = [
        ("fluid", ["topology", "units"].as_slice()),
        ("nvlink", ["units"].as_slice()),
    ];
    for (leaf, may) in leaves {
        let mut seen = false;
        for (top, path, code) in sources() {
            if top != leaf {
                continue;
            }
            seen = true;
            let used = crate_paths(&code);
            let allowed: BTreeSet<String> = may.iter().map(|s| s.to_string()).collect();
            assert!(
                used.is_subset(&allowed),
                "{} imports {used:?}",
                path.display()
            );
        }
        assert!(seen, "no src/{leaf}.rs");
    }
}

/// `main.rs` parses the command line and hands each subcommand to its
/// own file under `src/cli/`: it defines no function but `main`.
#[test]
fn main_rs_only_parses_and_dispatches() {
    let main = std::fs::read_to_string("src/main.rs").unwrap();
    let fns: Vec<&str> = main
        .lines()
        .filter(|l| {
            l.starts_with("fn ") || l.starts_with("pub fn ") || l.starts_with("pub(crate) fn ")
        })
        .collect();
    assert_eq!(
        fns,
        ["fn main() -> ExitCode {"],
        "src/main.rs defines {fns:?}"
    );
    for cmd in [
        "run", "validate", "topo", "config", "nccl", "compare", "plan", "sweep",
    ] {
        assert!(
            Path::new(&format!("src/cli/{cmd}.rs")).exists(),
            "no src/cli/{cmd}.rs"
        );
    }
}

/// `Simulation` stays a kernel's worth of state: its fields group the
/// components and the runtime's state, at most 20 of them.
#[test]
fn the_simulation_holds_at_most_twenty_fields() {
    let text = std::fs::read_to_string("src/engine/mod.rs").unwrap();
    let start = text.find("pub struct Simulation {").unwrap();
    let end = start + text[start..].find("\n}\n").unwrap();
    let fields = text[start..end]
        .lines()
        .skip(1)
        .filter(|l| {
            let l = l.trim_start();
            !l.starts_with("//") && !l.starts_with("#[") && l.contains(':')
        })
        .count();
    assert!(fields <= 20, "Simulation has {fields} fields");
}

/// Each source file as a module path (`src/engine/mod.rs` is
/// `["engine"]`, `src/workload/pass/ring.rs` `["workload", "pass",
/// "ring"]`), with its code without its unit tests and comments.
fn modules() -> BTreeMap<Vec<String>, String> {
    let mut files = Vec::new();
    rust_files(Path::new("src"), &mut files);
    let mut out = BTreeMap::new();
    for p in files {
        let rel = p.strip_prefix("src").unwrap().with_extension("");
        let mut m: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().to_string())
            .collect();
        if matches!(m.last().map(String::as_str), Some("mod" | "lib" | "main")) {
            m.pop();
        }
        let text = std::fs::read_to_string(&p).unwrap();
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        let code: Vec<&str> = code
            .lines()
            .map(|l| l.split("//").next().unwrap())
            .collect();
        out.insert(m, code.join("\n"));
    }
    out
}

/// The modules each file's paths (`crate::`, `super::`, `self::`, with
/// `{a, b::C}` lists) name: the longest module each path starts with,
/// leaving out the file's own ancestors (a file may use what the
/// `mod.rs` above it declares).
fn file_imports() -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mods = modules();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut deps = BTreeMap::new();
    for (me, code) in &mods {
        let mut out = BTreeSet::new();
        for (i, _) in code.match_indices("::") {
            // Paths start at `crate`, `super` or `self`: walk back over
            // `super::super::` to the start of the path.
            let before = &code[..i];
            let word_start = before.trim_end_matches(ident).len();
            let word = &before[word_start..];
            if !matches!(word, "crate" | "super" | "self") {
                continue;
            }
            let lead = &code[..word_start];
            if lead.ends_with("::") || lead.ends_with(ident) {
                continue;
            }
            let mut base: Vec<String> = match word {
                "crate" => Vec::new(),
                "super" => me[..me.len().saturating_sub(1)].to_vec(),
                _ => me.clone(),
            };
            let mut rest = &code[i + 2..];
            while let Some(r) = rest.strip_prefix("super::") {
                base.pop();
                rest = r;
            }
            let tails: Vec<&str> = match rest.strip_prefix('{') {
                Some(inner) => inner.split('}').next().unwrap_or("").split(',').collect(),
                None => vec![rest],
            };
            for tail in tails {
                let segs: Vec<String> = tail
                    .trim()
                    .split("::")
                    .map(|s| s.chars().take_while(|&c| ident(c)).collect::<String>())
                    .take_while(|s| !s.is_empty())
                    .collect();
                let mut path = base.clone();
                let mut found = mods.contains_key(&path).then(|| path.clone());
                for s in segs {
                    path.push(s);
                    if mods.contains_key(&path) {
                        found = Some(path.clone());
                    }
                }
                if let Some(f) = found {
                    let ancestor = f.len() <= me.len() && me[..f.len()] == f[..];
                    if !ancestor {
                        out.insert(f);
                    }
                }
            }
        }
        deps.insert(me.clone(), out);
    }
    deps
}

/// The files of the crate that import each other in a circle, each
/// circle sorted, by Tarjan's strongly connected components.
fn circles(deps: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        deps: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'a Vec<String>, (usize, usize)>,
        stack: Vec<&'a Vec<String>>,
        on: BTreeSet<&'a Vec<String>>,
        out: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a Vec<String>) {
            let i = self.index.len();
            self.index.insert(v, (i, i));
            self.stack.push(v);
            self.on.insert(v);
            for w in self.deps.get(v).into_iter().flatten() {
                let Some((w, _)) = self.deps.get_key_value(w) else {
                    continue;
                };
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.index[w].1;
                    let e = self.index.get_mut(v).unwrap();
                    e.1 = e.1.min(lw);
                } else if self.on.contains(w) {
                    let iw = self.index[w].0;
                    let e = self.index.get_mut(v).unwrap();
                    e.1 = e.1.min(iw);
                }
            }
            let (i, low) = self.index[v];
            if i == low {
                let mut c = Vec::new();
                loop {
                    let w = self.stack.pop().unwrap();
                    self.on.remove(w);
                    c.push(w.join("/"));
                    if w == v {
                        break;
                    }
                }
                if c.len() > 1 {
                    c.sort();
                    self.out.push(c);
                }
            }
        }
    }
    let mut walk = Walk {
        deps,
        index: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in deps.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.out
}

/// No files of any layer import each other in a circle.
#[test]
fn no_files_import_each_other_in_a_circle() {
    let deps = file_imports();
    // Not a test of nothing: the reader sees `super::`, `crate::` and
    // `super::{..}` imports.
    let m = |s: &str| s.split('/').map(String::from).collect::<Vec<_>>();
    for (file, uses) in [
        ("engine/run", "engine/deadlock"),
        ("workload/tuner", "workload/op"),
        ("workload/tuner", "workload/pass"),
        ("workload/collective", "workload/graph"),
        ("cli/run", "cli/common"),
    ] {
        assert!(
            deps[&m(file)].contains(&m(uses)),
            "{file} uses {uses}: {:?}",
            deps[&m(file)]
        );
    }
    let found = circles(&deps);
    assert!(found.is_empty(), "files in an import circle: {found:?}");
}

/// The job runtime is a layer of its own: it knows the engine only as the
/// `Kernel` trait it defines (no path into `engine`), and the engine keeps
/// none of its files.
#[test]
fn the_job_runtime_knows_the_engine_only_as_its_kernel() {
    let deps = file_imports();
    let mut seen = 0;
    for (m, uses) in &deps {
        if m.first().map(String::as_str) != Some("runtime") {
            continue;
        }
        seen += 1;
        let up: Vec<_> = uses
            .iter()
            .filter(|u| {
                matches!(
                    u.first().map(String::as_str),
                    Some("engine" | "report" | "cli" | "sweep" | "output")
                )
            })
            .collect();
        assert!(up.is_empty(), "src/{} uses {up:?}", m.join("/"));
    }
    assert!(seen >= 6, "the runtime's files: {seen}");
    for gone in ["tasks", "later", "passes", "streams", "flow", "ideal"] {
        assert!(
            !Path::new(&format!("src/engine/{gone}.rs")).exists(),
            "src/engine/{gone}.rs is the runtime's"
        );
    }
    // The engine reaches it through `Kernel` and `Runtime`'s calls.
    let kernel = std::fs::read_to_string("src/engine/kernel.rs").unwrap();
    assert!(kernel.contains("impl Kernel for Kern<'_>"));
}

/// The layers ARCHITECTURE.md lists, lowest first: every top-level module
/// is in one row and imports (`crate::` in the library, `fabricsim::`
/// from the binary) only modules of the rows above.
#[test]
fn every_module_imports_only_the_layers_below_it() {
    let doc = std::fs::read_to_string("ARCHITECTURE.md").unwrap();
    let start = doc
        .find("## Layers")
        .expect("ARCHITECTURE.md has a layer list");
    let end = start + doc[start..].find("\n## Modules").unwrap();
    let mut row_of: BTreeMap<String, usize> = BTreeMap::new();
    let mut row = 0;
    for line in doc[start..end].lines() {
        let Some((n, rest)) = line.split_once(". ") else {
            continue;
        };
        if n.parse::<usize>().is_err() {
            continue;
        }
        row += 1;
        let names = rest.split(':').next().unwrap();
        for name in names.split(',') {
            let name = name.trim().trim_matches('`');
            assert!(
                row_of.insert(name.to_string(), row).is_none(),
                "{name} is in two rows"
            );
        }
    }
    let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (top, _, code) in sources() {
        if top == "lib" || top == "main" {
            continue;
        }
        let mut uses = crate_paths(&code);
        uses.extend(crate_paths(&code.replace("fabricsim::", "crate::")));
        let entry = deps.entry(top.clone()).or_default();
        entry.extend(uses.into_iter().filter(|u| *u != top));
    }
    for (m, uses) in &deps {
        let Some(&mine) = row_of.get(m) else {
            panic!("src/{m} is in no row of ARCHITECTURE.md's layers");
        };
        for u in uses {
            // Items of the binary's root (`crate::LimitArgs`) are not modules.
            let Some(&theirs) = row_of.get(u) else {
                assert!(!deps.contains_key(u), "{u} is in no row");
                continue;
            };
            assert!(
                theirs < mine,
                "src/{m} (row {mine}) imports {u} (row {theirs}): a layer may use only those above it"
            );
        }
    }
    for m in row_of.keys() {
        assert!(
            deps.contains_key(m),
            "ARCHITECTURE.md lists {m}, which src/ does not have"
        );
    }
}
