//! The user guide (`docs/src/`) and README.md, kept true.
//!
//! - Every shell snippet runs, in order, page by page, in a folder of its
//!   own that sees the repository's `examples/`: each block must succeed
//!   as a script, and a ```` ```text,output ```` block after it must be
//!   found in what it printed (`...` skips lines).
//!   Lines that build, test or install (`cargo build`, `mpirun`,
//!   `tests/...`) are run by CI's own stages, not here (see `not_run`).
//! - Every TOML snippet is checked: a scenario is validated, a
//!   `toml,fragment` over the default scenario, a `toml,file=NAME` is
//!   written for the commands after it (`append-to=BASE` adds it to a file
//!   written before; `sweep` marks a sweep file, which the commands use),
//!   and a `toml,reference` block must hold only keys the scenario
//!   reader knows.
//! - The reference pages are complete: every scenario key the reader
//!   accepts (found by asking it, table by table), every command and
//!   option of the CLI, and every output file, column and JSON field of
//!   a set of runs is named on its page.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_fabricsim");

#[derive(Debug)]
struct Block {
    page: PathBuf,
    line: usize,
    lang: String,
    attrs: Vec<String>,
    text: String,
}

impl Block {
    fn attr(&self, name: &str) -> Option<&str> {
        self.attrs.iter().find_map(|a| {
            if a == name {
                Some("")
            } else {
                a.strip_prefix(name)?.strip_prefix('=')
            }
        })
    }
    fn at(&self) -> String {
        format!("{}:{}", self.page.display(), self.line)
    }
}

/// README.md, every page of the guide, and the files the guide includes.
fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "md") {
                out.push(p);
            }
        }
    }
    let mut out = vec![PathBuf::from("README.md")];
    walk(Path::new("docs/src"), &mut out);
    for f in [
        "VALIDATION.md",
        "ACCURACY.md",
        "BENCHMARKS.md",
        "ARCHITECTURE.md",
    ] {
        out.push(PathBuf::from(f));
    }
    out
}

fn blocks(page: &Path) -> Vec<Block> {
    let text = std::fs::read_to_string(page).unwrap();
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in text.lines().enumerate() {
        match open.take() {
            None => {
                if let Some(info) = line.strip_prefix("```") {
                    let mut parts = info.trim().split(',').map(|s| s.trim().to_string());
                    let lang = parts.next().unwrap_or_default();
                    open = Some(Block {
                        page: page.to_path_buf(),
                        line: i + 1,
                        lang,
                        attrs: parts.collect(),
                        text: String::new(),
                    });
                }
            }
            Some(mut b) => {
                if line.starts_with("```") {
                    out.push(b);
                } else {
                    b.text.push_str(line);
                    b.text.push('\n');
                    open = Some(b);
                }
            }
        }
    }
    assert!(
        open.is_none(),
        "{}: a code block is never closed",
        page.display()
    );
    out
}

/// A scratch folder that sees the repository's examples, and a `bin/`
/// with `fabricsim` in it.
fn scratch() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let repo = std::env::current_dir().unwrap();
    std::os::unix::fs::symlink(repo.join("examples"), dir.path().join("examples")).unwrap();
    std::fs::create_dir(dir.path().join("bin")).unwrap();
    std::os::unix::fs::symlink(BIN, dir.path().join("bin/fabricsim")).unwrap();
    dir
}

/// Lines of a shell snippet that this test does not run, and where they
/// are run instead.
fn not_run(line: &str) -> bool {
    const ELSEWHERE: &[&str] = &[
        "cargo install", // the reader's install: this test runs the binary it built
        "cargo build",
        "cargo test",    // the test command itself
        "UPDATE_EXPECT", // regenerating expected files
        ".ci/",          // CI's stages
        "tests/",        // tests/slurm-cluster.sh, tests/mpi-ranks.sh, tests/screenshot-report.sh
        "fuzz/",         // fuzz/run.sh: its own CI stage
        "scripts/",      // scripts/speed-guard.sh: needs valgrind, minutes
        "mdbook",        // .ci/run builds the guide
        "mpirun",        // tests/mpi-ranks.sh runs the ranks
        "srun",
        "sbatch",
        "#SBATCH",
        "#!",
        "wireshark", // a desktop program; tests/capture.rs decodes with tshark
        "tshark",
        "valgrind",
        "perf ",
        "git ",
    ];
    ELSEWHERE.iter().any(|p| line.starts_with(p))
        || line.contains("cargo test")
        || line.contains("cargo build")
}

/// The shell snippet as a script: lines run elsewhere left out,
/// `cargo run --release` and `target/release/fabricsim` as the binary on
/// the `PATH`. In a `sh,bench` block (a benchmark's minutes-long runs)
/// each `fabricsim run` or `compare` stops after 20 us of simulated time
/// and `fabricsim bench` runs `--smoke`: the command is checked, not
/// timed.
fn script(b: &Block) -> String {
    let bench = b.attr("bench").is_some();
    let mut out = String::from("set -e\n");
    let mut cur = String::new();
    for line in b.text.lines() {
        let line = line.trim_end();
        if let Some(head) = line.strip_suffix('\\') {
            cur.push_str(head);
            cur.push(' ');
            continue;
        }
        cur.push_str(line);
        let cmd = std::mem::take(&mut cur);
        let trimmed = cmd.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') || not_run(trimmed) {
            continue;
        }
        let mut cmd = cmd
            .replace("cargo run --release --", "fabricsim")
            .replace("cargo run --release", "fabricsim")
            .replace("target/release/fabricsim", "fabricsim");
        if bench {
            let code = cmd.split(" #").next().unwrap().to_string();
            if code.contains("fabricsim run") || code.contains("fabricsim compare") {
                cmd = format!("{code} --max-sim-time 20us");
            } else if code.contains("fabricsim bench") {
                cmd = format!("{code} --smoke");
            }
        }
        out.push_str(&cmd);
        out.push('\n');
    }
    out
}

/// The scenario `toml,fragment` blocks complete.
const DEFAULT_SCENARIO: &str = "examples/rail-optimized-pod.toml";

fn merge(base: &mut toml::Table, over: toml::Table) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

fn run_in(dir: &Path, cmd: &str) -> (bool, String) {
    let path = format!(
        "{}:{}",
        dir.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(cmd)
        .current_dir(dir)
        .env("PATH", path)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    (out.status.success(), text)
}

/// Each line of `expected` (but `...`) is a line of `got`, in order.
fn shows(expected: &str, got: &str) -> Result<(), String> {
    let lines: Vec<&str> = got.lines().map(str::trim_end).collect();
    let mut from = 0;
    for want in expected.lines().map(str::trim_end) {
        if want == "..." || want.is_empty() {
            continue;
        }
        match lines[from..].iter().position(|l| *l == want) {
            Some(i) => from += i + 1,
            None => return Err(format!("no line \"{want}\" (in order) in:\n{got}")),
        }
    }
    Ok(())
}

/// Runs one page's snippets; returns what went wrong.
fn check_page(page: &Path) -> Vec<String> {
    let started = std::time::Instant::now();
    let dir = scratch();
    let mut errors = Vec::new();
    let mut last_output: Option<String> = None;
    for b in blocks(page) {
        match b.lang.as_str() {
            "sh" | "bash" | "console" => {
                let script = script(&b);
                let (ok, out) = run_in(dir.path(), &script);
                if !ok {
                    errors.push(format!("{}: failed:\n{script}\n{out}", b.at()));
                }
                last_output = Some(out);
            }
            "text" if b.attr("output").is_some() => match &last_output {
                None => errors.push(format!(
                    "{}: an output block with no command before it",
                    b.at()
                )),
                Some(out) => {
                    if let Err(e) = shows(&b.text, out) {
                        errors.push(format!("{}: {e}", b.at()));
                    }
                }
            },
            "toml" => {
                if let Err(e) = check_toml(&b, dir.path()) {
                    errors.push(format!("{}: {e}", b.at()));
                }
            }
            _ => {}
        }
    }
    eprintln!(
        "{}: {:.1} s",
        page.display(),
        started.elapsed().as_secs_f64()
    );
    errors
}

fn check_toml(b: &Block, dir: &Path) -> Result<(), String> {
    if b.attr("reference").is_some() {
        let mut table: toml::Table = toml::from_str(&b.text).map_err(|e| e.to_string())?;
        // Read before the reader, by `scenario::configs`.
        if let Some(toml::Value::Table(switch)) = table.get_mut("switch") {
            switch.remove("config");
        }
        return table
            .try_into::<fabricsim::scenario::raw::RawScenario>()
            .map(|_| ())
            .map_err(|e| format!("a key the scenario reader does not take: {e}"));
    }
    let (name, text) = if let Some(name) = b.attr("file") {
        let mut text = String::new();
        if let Some(base) = b.attr("append-to") {
            text = std::fs::read_to_string(dir.join(base)).map_err(|e| format!("{base}: {e}"))?;
            text.push('\n');
        }
        text.push_str(&b.text);
        (name.to_string(), text)
    } else if b.attr("fragment").is_some() {
        let mut base: toml::Table =
            toml::from_str(&std::fs::read_to_string(DEFAULT_SCENARIO).unwrap()).unwrap();
        let over: toml::Table = toml::from_str(&b.text).map_err(|e| e.to_string())?;
        merge(&mut base, over);
        ("fragment.toml".to_string(), toml::to_string(&base).unwrap())
    } else {
        ("snippet.toml".to_string(), b.text.clone())
    };
    std::fs::write(dir.join(&name), text).unwrap();
    if b.attr("sweep").is_some() {
        // Checked by the commands that run it.
        return Ok(());
    }
    let (ok, out) = run_in(dir, &format!("fabricsim validate '{name}'"));
    if ok {
        Ok(())
    } else {
        Err(format!("not a valid scenario:\n{out}"))
    }
}

#[test]
fn every_snippet_of_the_guide_and_readme_runs_as_shown() {
    // FABRICSIM_GUIDE_PAGES=howto checks only the pages whose path has it.
    let only = std::env::var("FABRICSIM_GUIDE_PAGES").unwrap_or_default();
    let pages: Vec<PathBuf> = pages()
        .into_iter()
        .filter(|p| p.to_string_lossy().contains(&only))
        .collect();
    let errors: Vec<String> = std::thread::scope(|s| {
        let halves: Vec<_> = pages
            .chunks(pages.len().div_ceil(2))
            .map(|chunk| {
                s.spawn(move || chunk.iter().flat_map(|p| check_page(p)).collect::<Vec<_>>())
            })
            .collect();
        halves.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    assert!(errors.is_empty(), "{}", errors.join("\n\n"));
}

/// The tutorial says DLB beats ECMP on its pod and spraying Write
/// First/Middle/Last packets loses to both.
#[test]
fn the_tutorial_s_balancers_finish_in_the_order_it_says() {
    let page = Path::new("docs/src/tutorial/first-pod.md");
    let pod = blocks(page)
        .into_iter()
        .find(|b| b.attr("file") == Some("pod.toml"))
        .expect("the tutorial's pod.toml");
    let run = |mode: &str| {
        let set = format!("switch.balance.mode=\"{mode}\"");
        common::run_named("pod.toml", &pod.text, &[&set])
            .1
            .makespan_ps
    };
    let (ecmp, dlb, spray) = (run("ecmp"), run("dlb"), run("spray"));
    assert!(
        dlb < ecmp && ecmp < spray,
        "ecmp {ecmp}, dlb {dlb}, spray {spray}"
    );
}

/// The scenario reader's fields of the table at `path`, asked of it: an
/// unknown key there is refused with the list of those it takes.
fn fields_at(path: &[(String, bool)], probe: toml::Value) -> Option<Vec<String>> {
    fn nest(path: &[(String, bool)], leaf: toml::Value) -> toml::Table {
        let mut t = toml::Table::new();
        let (name, array) = &path[0];
        let inner = if path.len() == 1 {
            leaf
        } else {
            toml::Value::Table(nest(&path[1..], leaf))
        };
        let v = if *array && path.len() > 1 {
            toml::Value::Array(vec![inner])
        } else {
            inner
        };
        t.insert(name.clone(), v);
        t
    }
    let mut table = toml::Table::new();
    table.insert("zzz_not_a_key".into(), toml::Value::Integer(1));
    let leaf = match probe {
        toml::Value::Array(_) => toml::Value::Array(vec![toml::Value::Table(table)]),
        _ => toml::Value::Table(table),
    };
    let text = if path.is_empty() {
        "zzz_not_a_key = 1\n".to_string()
    } else {
        toml::to_string(&nest(path, leaf)).unwrap()
    };
    let err = match fabricsim::scenario::prepare("probe.toml", &text, &[]) {
        Ok(_) => return None,
        Err(e) => e.to_string(),
    };
    let list = err
        .split("unknown field `zzz_not_a_key`, expected ")
        .nth(1)?;
    let list = list.strip_prefix("one of ").unwrap_or(list);
    Some(
        list.split(", ")
            .flat_map(|f| f.split(" or "))
            .map(|f| f.trim().trim_matches('`').to_string())
            .filter(|f| !f.is_empty())
            .collect(),
    )
}

/// The keys of `switch.config`, which `scenario::configs` reads (and
/// takes out) before the scenario reader sees the file.
const CONFIG_KEYS: &[&str] = &[
    "switch.config",
    "switch.config.file",
    "switch.config.tier",
    "switch.config.switches",
    "switch.config.down",
    "switch.config.up",
];

/// Every (table, key) the scenario reader takes, found table by table.
fn reader_keys() -> BTreeSet<String> {
    let mut keys: BTreeSet<String> = CONFIG_KEYS.iter().map(|k| k.to_string()).collect();
    let mut todo: Vec<Vec<(String, bool)>> = vec![vec![]];
    let table = toml::Value::Table(toml::Table::new());
    let array = toml::Value::Array(vec![]);
    while let Some(path) = todo.pop() {
        let probe = if path.last().is_some_and(|(_, a)| *a) {
            array.clone()
        } else {
            table.clone()
        };
        let fields = fields_at(&path, probe).unwrap_or_else(|| panic!("no field list at {path:?}"));
        let prefix: Vec<&str> = path.iter().map(|(n, _)| n.as_str()).collect();
        for f in fields {
            let mut full = prefix.clone();
            full.push(&f);
            keys.insert(full.join("."));
            for is_array in [false, true] {
                let mut sub = path.clone();
                sub.push((f.clone(), is_array));
                let probe = if is_array {
                    array.clone()
                } else {
                    table.clone()
                };
                if fields_at(&sub, probe).is_some() {
                    todo.push(sub);
                    break;
                }
            }
        }
    }
    keys
}

/// Keys the reference blocks of a page name, by table: `key = ...` lines
/// and `key = ` in their comments.
fn documented_keys(page: &Path) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    for b in blocks(page)
        .into_iter()
        .filter(|b| b.attr("reference").is_some())
    {
        let mut table = String::new();
        for line in b.text.lines() {
            let line = line.trim();
            if line.starts_with('[') {
                let head = line.split('#').next().unwrap().trim();
                table = head
                    .trim_matches(|c| c == '[' || c == ']')
                    .trim()
                    .to_string();
                // A table's header names it, and each table it is in.
                let parts: Vec<&str> = table.split('.').collect();
                for n in 1..=parts.len() {
                    keys.insert(parts[..n].join("."));
                }
                continue;
            }
            let mut words: Vec<&str> = Vec::new();
            for (i, part) in line.split(" = ").enumerate() {
                // the name before each " = ": the last word of the text before it
                if i == 0 && !line.contains(" = ") {
                    break;
                }
                let before = part
                    .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .next();
                if let Some(w) = before {
                    words.push(w);
                }
            }
            for w in words {
                if !w.is_empty() && w.chars().next().is_some_and(|c| c.is_ascii_lowercase()) {
                    let key = if table.is_empty() {
                        w.to_string()
                    } else {
                        format!("{table}.{w}")
                    };
                    keys.insert(key);
                }
            }
        }
    }
    keys
}

#[test]
fn the_scenario_reference_names_every_key_the_reader_takes() {
    let page = Path::new("docs/src/reference/scenario.md");
    let documented = documented_keys(page);
    let missing: Vec<String> = reader_keys()
        .into_iter()
        .filter(|k| !documented.contains(k))
        .collect();
    assert!(
        missing.is_empty(),
        "{}: no entry for these scenario keys (add each, with its default and meaning, to a toml,reference block under its table): {missing:?}",
        page.display()
    );
}

fn help(args: &[&str]) -> String {
    let out = Command::new(BIN).args(args).arg("--help").output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

/// The subcommands `--help` lists under "Commands:".
fn subcommands(text: &str) -> Vec<String> {
    text.split("Commands:")
        .nth(1)
        .map(|rest| {
            rest.lines()
                .skip(1)
                .take_while(|l| l.starts_with("  "))
                .filter_map(|l| l.split_whitespace().next())
                .filter(|c| *c != "help")
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn options(text: &str) -> BTreeSet<String> {
    text.split("Options:")
        .nth(1)
        .unwrap_or("")
        .split_whitespace()
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| {
            w.trim_end_matches(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .to_string()
        })
        .filter(|w| w != "--help" && w != "--version")
        .collect()
}

#[test]
fn the_command_reference_names_every_command_and_option() {
    let page = std::fs::read_to_string("docs/src/reference/cli.md").unwrap();
    let mut sections: BTreeMap<String, String> = BTreeMap::new();
    for part in page.split("\n## ").skip(1) {
        let (head, body) = part.split_once('\n').unwrap_or((part, ""));
        if let Some(cmd) = head
            .trim()
            .strip_prefix("`fabricsim ")
            .and_then(|h| h.strip_suffix('`'))
        {
            sections.insert(cmd.to_string(), body.to_string());
        }
    }
    let mut commands: Vec<Vec<String>> = Vec::new();
    for c in subcommands(&help(&[])) {
        let subs = subcommands(&help(&[&c]));
        if subs.is_empty() {
            commands.push(vec![c]);
        } else {
            commands.extend(subs.into_iter().map(|s| vec![c.clone(), s]));
        }
    }
    let mut errors = Vec::new();
    for cmd in &commands {
        let name = cmd.join(" ");
        let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        let Some(body) = sections.get(&name) else {
            errors.push(format!("no section \"## `fabricsim {name}`\""));
            continue;
        };
        let takes = options(&help(&args));
        for o in &takes {
            if !body.contains(&format!("`{o}")) {
                errors.push(format!("`fabricsim {name}`: option {o} is not described"));
            }
        }
        // And nothing the command does not take.
        for w in body.split(|c: char| c == '`' || c.is_whitespace()) {
            let w = w.split([' ', '<', '=']).next().unwrap();
            if w.starts_with("--") && w.len() > 2 && table_option(body, w) && !takes.contains(w) {
                errors.push(format!(
                    "`fabricsim {name}`: the page describes {w}, which it does not take"
                ));
            }
        }
    }
    for s in sections.keys() {
        if !commands.iter().any(|c| &c.join(" ") == s) {
            errors.push(format!(
                "a section for `fabricsim {s}`, which does not exist"
            ));
        }
    }
    assert!(
        errors.is_empty(),
        "docs/src/reference/cli.md:\n{}",
        errors.join("\n")
    );
}

/// Whether `opt` is one of the section's table rows (the options it
/// describes), not a mention in prose of another command's.
fn table_option(body: &str, opt: &str) -> bool {
    body.lines().any(|l| {
        l.starts_with("| `")
            && l.split('|')
                .nth(1)
                .is_some_and(|c| c.contains(&format!("`{opt}")))
    })
}

#[test]
fn the_output_reference_names_every_file_column_and_field() {
    let page = std::fs::read_to_string("docs/src/reference/outputs.md").unwrap();
    let dir = scratch();
    // Runs that between them write every file: a collective, a training
    // job, the flow level, two threads with DLB, a capture with PFC,
    // serving.
    let runs = [
        "fabricsim run --out a",
        "fabricsim run examples/training/dense-8b-tp8-dp8.toml --max-sim-time 2ms --out b",
        "fabricsim run examples/bench/fat-tree-k8-permutation.toml --fidelity flow --out c",
        "fabricsim run examples/load-balancing/dlb-flowlet.toml --threads 2 --out d",
        "fabricsim run examples/lossless/incast.toml --capture all --capture-limit 100 --out e",
        "fabricsim run examples/serving/llama70b-disaggregated.toml --out f",
    ];
    let mut errors = Vec::new();
    for (i, cmd) in runs.iter().enumerate() {
        let (ok, out) = run_in(dir.path(), &format!("{cmd} -q"));
        assert!(ok, "{cmd}: {out}");
        let folder = dir.path().join(["a", "b", "c", "d", "e", "f"][i]);
        for entry in std::fs::read_dir(&folder).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            if !page.contains(&format!("`{name}`"))
                && !page.contains(&format!("`{}`", name.trim_end_matches(".svg")))
            {
                errors.push(format!("file {name} is not described"));
            }
            let path = folder.join(&name);
            if name.ends_with(".csv") && !name.starts_with("ts_") {
                let text = std::fs::read_to_string(&path).unwrap();
                for col in text.lines().next().unwrap_or("").split(',') {
                    if !page.contains(&format!("`{col}`")) {
                        errors.push(format!("{name}: column {col} is not described"));
                    }
                }
            }
            if name.ends_with(".json") {
                let v: serde_json::Value =
                    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
                for key in v.as_object().unwrap().keys() {
                    if !page.contains(&format!("`{key}`")) {
                        errors.push(format!("{name}: field {key} is not described"));
                    }
                }
            }
        }
    }
    errors.sort();
    errors.dedup();
    assert!(
        errors.is_empty(),
        "docs/src/reference/outputs.md:\n{}",
        errors.join("\n")
    );
}
