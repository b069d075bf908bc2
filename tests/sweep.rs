//! `fabricsim sweep` and `fabricsim merge`: grids of scenario settings run
//! in parallel, resumed, isolated when one point fails, and emitted as a
//! Slurm array job (`tests/slurm-cluster.sh` runs that on a real one).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn fabricsim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fabricsim"))
}

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fabricsim-sweep-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    d
}

fn sweep(file: &Path, out: &Path, extra: &[&str]) -> Output {
    fabricsim()
        .arg("sweep")
        .arg(file)
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A four-point sweep (two balancers, two seeds) on the example's base.
fn small_sweep(dir: &Path, values: &str) -> PathBuf {
    fs::create_dir_all(dir).unwrap();
    let base = fs::canonicalize("examples/sweep/balancers-base.toml").unwrap();
    let file = dir.join("small.toml");
    fs::write(
        &file,
        format!(
            "base = {:?}\nseeds = [1, 2]\nset = [\"workload.0.bytes=\\\"50KB\\\"\"]\n[[axis]]\nkey = \"switch.balance.mode\"\nname = \"balancer\"\nvalues = {values}\n",
            base.display().to_string()
        ),
    )
    .unwrap();
    file
}

/// Every file of every point but `perf.json` (wall-clock figures).
fn point_files(out: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    let mut dirs: Vec<_> = fs::read_dir(out.join("points"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for d in dirs {
        let mut names: Vec<_> = fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        names.sort();
        for f in names {
            if f.file_name().unwrap() != "perf.json" {
                let rel = f.strip_prefix(out).unwrap().display().to_string();
                files.push((rel, fs::read(&f).unwrap()));
            }
        }
    }
    files
}

#[test]
fn the_example_sweep_gives_the_same_results_in_parallel_as_one_at_a_time() {
    let file = Path::new("examples/sweep/balancers.toml");
    let (a, b) = (temp("par"), temp("serial"));
    let o = sweep(file, &a, &["--jobs", "2"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stdout = text(&o.stdout);
    assert!(
        stdout.contains("18 points: 18 run now, 0 done before, 0 failed"),
        "{stdout}"
    );
    // The points whose 4.3 s makespan is a retransmission timer's wait
    // (a go-back-N tail with a 2 us flowlet timeout) are named.
    assert!(
        stdout.contains("note      4 of 18 points ended on a retransmission timeout (p0000, p0001, p0002, p0009)"),
        "{stdout}"
    );
    let o = sweep(file, &b, &["--jobs", "1", "--quiet"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(o.stdout.is_empty() && o.stderr.is_empty());

    let csv_a = fs::read_to_string(a.join("sweep.csv")).unwrap();
    assert_eq!(csv_a, fs::read_to_string(b.join("sweep.csv")).unwrap());
    let files = point_files(&a);
    assert_eq!(files, point_files(&b));
    assert!(files.len() >= 18 * 5, "{}", files.len());

    // Axes as columns, one row per point in id order, headline metrics.
    let mut lines = csv_a.lines();
    let header = lines.next().unwrap();
    assert!(
        header.starts_with("point,dir,seed,balancer,flowlet_timeout,status,"),
        "{header}"
    );
    for m in [
        "makespan_us",
        "fct_p99_us",
        "slowdown_p99",
        "busbw_gbps",
        "max_queue_bytes",
        "pfc_pause_frames",
        "drops",
        "uplink_imbalance",
    ] {
        assert!(header.contains(m), "{m} missing from {header}");
    }
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 18);
    assert!(
        rows[0].starts_with("0,p0000,1,dlb,2us,done,true,"),
        "{}",
        rows[0]
    );
    assert!(
        rows[17].starts_with("17,p0017,3,glb,32us,done,true,"),
        "{}",
        rows[17]
    );
    let manifest = fs::read_to_string(a.join("manifest.csv")).unwrap();
    assert!(
        manifest.starts_with("point,dir,seed,balancer,flowlet_timeout\n0,p0000,1,dlb,2us\n"),
        "{manifest}"
    );

    // A plot per metric against each axis, labelled.
    let svg = fs::read_to_string(a.join("plots/makespan_us-by-flowlet_timeout.svg")).unwrap();
    assert!(svg.contains("makespan (us) by flowlet_timeout"));
    assert!(svg.contains("\n32us\n") && svg.contains("seed 3") && svg.contains("mean"));
    assert!(a.join("plots/slowdown_p99-by-balancer.svg").is_file());
    // No collective in this workload: no bus-bandwidth plot.
    assert!(!a.join("plots/busbw_gbps-by-balancer.svg").exists());
}

#[test]
fn an_interrupted_sweep_resumes_where_it_stopped() {
    let out = temp("resume");
    let file = small_sweep(&temp("resume-def"), "[\"dlb\", \"glb\"]");
    let o = sweep(&file, &out, &[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let before = point_files(&out);
    // A point that never finished, and the staging folder of a killed run.
    fs::remove_dir_all(out.join("points/p0002")).unwrap();
    fs::create_dir_all(out.join("points/.p0002.partial-99999999")).unwrap();
    fs::write(out.join("points/.p0002.partial-99999999/summary.json"), "{").unwrap();
    let untouched = fs::metadata(out.join("points/p0000/summary.json"))
        .unwrap()
        .modified()
        .unwrap();

    let o = sweep(&file, &out, &[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stderr = text(&o.stderr);
    assert!(
        stderr.contains("4 points, 3 already done, running 1"),
        "{stderr}"
    );
    assert!(stderr.contains("p0002 done"), "{stderr}");
    assert!(text(&o.stdout).contains("4 points: 1 run now, 3 done before, 0 failed"));
    assert_eq!(point_files(&out), before);
    assert_eq!(
        fs::metadata(out.join("points/p0000/summary.json"))
            .unwrap()
            .modified()
            .unwrap(),
        untouched
    );
    assert!(!out.join("points/.p0002.partial-99999999").exists());
}

#[test]
fn a_failing_point_is_reported_and_the_others_finish() {
    let out = temp("failure");
    let file = small_sweep(&temp("failure-def"), "[\"dlb\", \"glb\"]");
    // Point 1's results cannot be moved into place: a file holds its name
    // (placed once the folder is the sweep's).
    assert!(sweep(&file, &out, &["--emit", "slurm"]).status.success());
    fs::write(out.join("points/p0001"), "in the way").unwrap();
    let o = sweep(&file, &out, &[]);
    assert_eq!(o.status.code(), Some(2));
    let stderr = text(&o.stderr);
    assert!(stderr.contains("1 of 4 points failed"), "{stderr}");
    assert!(
        stderr.contains("p0001 (balancer=dlb seed=2): cannot move the results into place"),
        "{stderr}"
    );
    for p in ["p0000", "p0002", "p0003"] {
        assert!(
            out.join("points").join(p).join("summary.json").is_file(),
            "{p}"
        );
    }
    let csv = fs::read_to_string(out.join("sweep.csv")).unwrap();
    let row = csv.lines().nth(2).unwrap();
    assert!(row.starts_with("1,p0001,2,dlb,failed,,,"), "{row}");
    assert!(row.contains("cannot move the results into place"), "{row}");
    assert!(out.join("points/p0001.error").is_file());

    // Cleared, a second run retries only that point.
    fs::remove_file(out.join("points/p0001")).unwrap();
    let o = sweep(&file, &out, &[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("4 points: 1 run now, 3 done before, 0 failed"));
    assert!(!out.join("points/p0001.error").exists());
    let o = fabricsim().arg("merge").arg(&out).output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("4 points: 4 done, 0 partial, 0 failed, 0 missing"));
}

#[test]
fn every_point_is_checked_before_any_runs() {
    let out = temp("invalid");
    let file = small_sweep(&temp("invalid-def"), "[\"dlb\", \"flowlets\"]");
    let o = sweep(&file, &out, &[]);
    assert_eq!(o.status.code(), Some(2));
    let stderr = text(&o.stderr);
    assert!(
        stderr.contains("small.toml: point p0002 (balancer=flowlets seed=1)"),
        "{stderr}"
    );
    assert!(stderr.contains("switch.balance.mode"), "{stderr}");
    assert!(
        stderr.contains("2 of 4 points are invalid; nothing was run"),
        "{stderr}"
    );
    assert!(!out.exists(), "nothing may be written");
}

#[test]
fn a_folder_keeps_one_sweep() {
    let out = temp("other");
    let def = temp("other-def");
    let o = sweep(&small_sweep(&def, "[\"dlb\", \"glb\"]"), &out, &["-q"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = sweep(&small_sweep(&def, "[\"glb\", \"dlb\"]"), &out, &["-q"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("manifest.csv: holds a different sweep"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn slurm_scripts_run_each_point_as_an_array_task_and_merge_after() {
    let out = temp("slurm");
    let file = Path::new("examples/sweep/balancers.toml");
    let o = sweep(file, &out, &["--emit", "slurm"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("submit with: sh"));
    let array = fs::read_to_string(out.join("slurm/array.sbatch")).unwrap();
    for want in [
        "#!/bin/bash\n",
        "#SBATCH --job-name=balancers\n",
        "#SBATCH --array=0-17%8\n",
        "#SBATCH --time=00:10:00\n",
        "#SBATCH --mem=1G\n",
        "#SBATCH --cpus-per-task=1\n",
        "/slurm/logs/point-%a.out\n",
        " --point \"$SLURM_ARRAY_TASK_ID\"\n",
    ] {
        assert!(array.contains(want), "{want} not in\n{array}");
    }
    let abs = fs::canonicalize(file).unwrap();
    assert!(
        array.contains(&format!("sweep {} --out ", abs.display())),
        "{array}"
    );
    let merge = fs::read_to_string(out.join("slurm/merge.sbatch")).unwrap();
    assert!(
        merge.contains(" merge ") && merge.contains("#SBATCH --job-name=balancers-merge"),
        "{merge}"
    );
    let submit = fs::read_to_string(out.join("slurm/submit.sh")).unwrap();
    assert!(
        submit.contains("--dependency=afterok:\"$array\""),
        "{submit}"
    );
    assert!(out.join("slurm/logs").is_dir());
    // Nothing ran, but the manifest is there for the tasks.
    assert!(out.join("manifest.csv").is_file());
    assert!(!out.join("points/p0000").exists());

    // A task runs its point only, the way any scheduler's index would.
    let o = sweep(file, &out, &["--point", "4"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("point 4 done"));
    let o = sweep(file, &out, &["--point", "4"]);
    assert!(text(&o.stdout).contains("point 4 was already done"));
    let points: Vec<_> = fs::read_dir(out.join("points"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(points, vec!["p0004"]);
    let o = sweep(file, &out, &["--point", "18"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("has 18 points, numbered 0 to 17"),
        "{}",
        text(&o.stderr)
    );

    // Merging early says what is missing, and still writes the table.
    let o = fabricsim().arg("merge").arg(&out).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("17 of 18 points have no results"),
        "{}",
        text(&o.stderr)
    );
    let csv = fs::read_to_string(out.join("sweep.csv")).unwrap();
    assert_eq!(csv.lines().filter(|l| l.contains(",missing,")).count(), 17);
    assert_eq!(csv.lines().filter(|l| l.contains(",done,")).count(), 1);

    let o = sweep(file, &out, &["--emit", "pbs"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--emit: got \"pbs\", expected \"slurm\""));
}

#[test]
fn merge_of_a_folder_that_is_not_a_sweep_says_so() {
    let out = temp("not-a-sweep");
    fs::create_dir_all(&out).unwrap();
    let o = fabricsim().arg("merge").arg(&out).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("is this a `fabricsim sweep` output folder?"),
        "{}",
        text(&o.stderr)
    );
}

/// Rows of `sweep.csv` whose status is partial.
fn partial_rows(out: &Path) -> usize {
    let csv = fs::read_to_string(out.join("sweep.csv")).unwrap();
    csv.lines().filter(|l| l.contains(",partial,")).count()
}

#[test]
fn limits_stop_each_point_which_is_kept_and_marked_partial() {
    let out = temp("limits");
    let file = small_sweep(&temp("limits-def"), "[\"dlb\", \"glb\"]");
    let o = sweep(&file, &out, &["--max-events", "500"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("4 points: 4 run now (4 partial), 0 done before"),
        "{}",
        text(&o.stdout)
    );
    assert!(text(&o.stderr).contains("PARTIAL (max_events reached)"));
    for p in ["p0000", "p0001", "p0002", "p0003"] {
        let s: serde_json::Value = serde_json::from_str(
            &fs::read_to_string(out.join("points").join(p).join("summary.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(s["partial"], true, "{p}");
        assert_eq!(s["events"], 500, "{p}");
    }
    assert_eq!(partial_rows(&out), 4);
    // Partial points are finished: running again keeps them.
    let o = sweep(&file, &out, &[]);
    assert!(text(&o.stdout).contains("0 run now, 4 done before"));
    let o = fabricsim().arg("merge").arg(&out).output().unwrap();
    assert!(
        text(&o.stdout).contains("4 points: 0 done, 4 partial, 0 failed, 0 missing"),
        "{}",
        text(&o.stdout)
    );
    // A simulated-time limit reaches every point through its scenario.
    let out = temp("limits-time");
    let o = sweep(&file, &out, &["--max-sim-time", "3us", "-q"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let s = fs::read_to_string(out.join("points/p0002/summary.json")).unwrap();
    assert!(s.contains("max_sim_time reached"), "{s}");
    let o = sweep(&file, &temp("limits-bad"), &["--max-sim-time", "soon"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("max_sim_time"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn an_interrupt_keeps_nothing_unfinished_and_the_sweep_resumes() {
    let def = temp("interrupt-def");
    fs::create_dir_all(&def).unwrap();
    let base = fs::canonicalize("examples/bench/fat-tree-k8-alltoall.toml").unwrap();
    let file = def.join("long.toml");
    fs::write(
        &file,
        format!(
            "base = {:?}\nseeds = [1, 2, 3]\n",
            base.display().to_string()
        ),
    )
    .unwrap();
    let out = temp("interrupt");
    let child = fabricsim()
        .arg("sweep")
        .arg(&file)
        .arg("--out")
        .arg(&out)
        .args(["--jobs", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Into the first point (each runs for seconds): the manifest is
    // written just before the points start.
    for _ in 0..600 {
        if out.join("manifest.csv").is_file() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1000));
    let ok = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", text(&o.stderr));
    let e = text(&o.stderr);
    assert!(
        e.contains(
            "interrupted: 3 points not finished and not kept; run the sweep again to resume"
        ),
        "{e}"
    );
    assert!(e.contains("p0000 interrupted"), "{e}");
    let left: Vec<String> = fs::read_dir(out.join("points"))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
    // The limits are not part of the sweep: a quick resume in the same
    // folder runs every point.
    let o = sweep(&file, &out, &["--max-events", "20000", "-q"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(partial_rows(&out), 3);
}

#[test]
fn batch_tasks_get_the_limits_on_their_command_line() {
    let out = temp("slurm-limits");
    let file = Path::new("examples/sweep/balancers.toml");
    let o = sweep(
        file,
        &out,
        &[
            "--emit",
            "slurm",
            "--max-wall",
            "10min",
            "--max-sim-time",
            "50us",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let array = fs::read_to_string(out.join("slurm/array.sbatch")).unwrap();
    assert!(
        array.contains(" --point \"$SLURM_ARRAY_TASK_ID\" --max-sim-time 50us --max-wall 600s\n"),
        "{array}"
    );
}

/// A newline in a path that goes into a Slurm script used to end the
/// comment or `#SBATCH` line it sat in and run the rest as a command; a
/// space broke `--output`. Control characters are refused, spaces quoted.
#[test]
fn paths_in_slurm_scripts_are_quoted_and_cannot_inject_commands() {
    let root = temp("inject");
    let marker = root.join("pwned");
    let evil = root.join(format!("x\ntouch {}\n", marker.display()));
    let file = small_sweep(&evil, "[\"dlb\", \"glb\"]");
    let o = sweep(&file, &root.join("out"), &["--emit", "slurm"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("control character"),
        "{}",
        text(&o.stderr)
    );
    let o = sweep(
        &small_sweep(&root.join("ok"), "[\"dlb\"]"),
        &root.join("a\nb"),
        &["--emit", "slurm"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(!root.join("a\nb").join("slurm").exists());

    // Spaces: every path a single word for the shell and for sbatch.
    let spaced = root.join("my sweeps");
    let file = small_sweep(&spaced, "[\"dlb\", \"glb\"]");
    let out = spaced.join("out dir");
    let o = sweep(&file, &out, &["--emit", "slurm"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let array = fs::read_to_string(out.join("slurm/array.sbatch")).unwrap();
    let log = out.join("slurm/logs/point-%a.out");
    assert!(
        array.contains(&format!("#SBATCH --output=\"{}\"\n", log.display())),
        "{array}"
    );
    let sweep_file = fs::canonicalize(&file).unwrap();
    assert!(
        array.contains(&format!("# 4 points of '{}'", sweep_file.display())),
        "{array}"
    );
    // bash reads the script as intended: parse it without running it.
    let check = Command::new("bash")
        .arg("-n")
        .arg(out.join("slurm/array.sbatch"))
        .status()
        .unwrap();
    assert!(check.success());
    assert!(!marker.exists());
}

/// Grids are refused above a stated size, with their count, before any
/// expansion (five ranges of 10,000 values used to overflow and panic).
#[test]
fn a_grid_too_large_is_refused_with_its_size() {
    let dir = temp("huge-grid");
    fs::create_dir_all(&dir).unwrap();
    let base = fs::canonicalize("examples/sweep/balancers-base.toml").unwrap();
    let mut text = format!("base = {:?}\n", base.display().to_string());
    for k in ["a", "b", "c", "d", "e"] {
        text.push_str(&format!(
            "[[axis]]\nkey = \"workload.0.start\"\nname = \"{k}\"\nfrom = 1\nto = 10000\nstep = 1\nunit = \"us\"\n"
        ));
    }
    let file = dir.join("huge.toml");
    fs::write(&file, text).unwrap();
    let o = sweep(&file, &dir.join("out"), &[]);
    assert_eq!(o.status.code(), Some(2));
    let e = text_of(&o.stderr);
    assert!(
        e.contains(
            "the grid has 100000000000000000000 points (10000 x 10000 x 10000 x 10000 x 10000 x 1"
        ) && e.contains("expected at most 100000"),
        "{e}"
    );
}

fn text_of(b: &[u8]) -> String {
    text(b)
}

/// A sweep never takes over a folder that is not a sweep's, and a merge
/// removes only plots an earlier merge wrote.
#[test]
fn a_sweep_refuses_a_foreign_folder_and_keeps_the_users_files_in_plots() {
    let dir = temp("foreign");
    let file = small_sweep(&dir, "[\"dlb\", \"glb\"]");
    let foreign = dir.join("mine");
    fs::create_dir_all(foreign.join("plots")).unwrap();
    fs::write(foreign.join("plots/figure.svg"), "mine").unwrap();
    fs::write(foreign.join("sweep.csv"), "mine").unwrap();
    let o = sweep(&file, &foreign, &["-q"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("is not empty and holds no sweep"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(
        fs::read_to_string(foreign.join("sweep.csv")).unwrap(),
        "mine"
    );
    assert_eq!(
        fs::read_to_string(foreign.join("plots/figure.svg")).unwrap(),
        "mine"
    );

    let out = dir.join("out");
    let o = sweep(&file, &out, &["-q"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    fs::write(out.join("plots/figure.svg"), "mine").unwrap();
    let before = fs::read_dir(out.join("plots")).unwrap().count();
    let o = fabricsim()
        .arg("merge")
        .arg(&out)
        .arg("-q")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        fs::read_to_string(out.join("plots/figure.svg")).unwrap(),
        "mine"
    );
    assert_eq!(fs::read_dir(out.join("plots")).unwrap().count(), before);
}

/// `[slurm] ranks = N` gives each point N MPI ranks: the array task asks
/// for N tasks and starts the point under `srun` with `--mpi`; a count
/// out of range is refused with its key.
#[test]
fn slurm_ranks_run_each_point_under_srun_as_mpi_ranks() {
    let dir = temp("ranks-def");
    let file = small_sweep(&dir, "[\"dlb\"]");
    let mut text_of_file = fs::read_to_string(&file).unwrap();
    text_of_file.push_str("[slurm]\nranks = 4\n");
    fs::write(&file, &text_of_file).unwrap();
    let out = temp("ranks");
    let o = sweep(&file, &out, &["--emit", "slurm"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let array = fs::read_to_string(out.join("slurm/array.sbatch")).unwrap();
    assert!(array.contains("#SBATCH --ntasks=4\n"), "{array}");
    assert!(array.contains("\nexec srun "), "{array}");
    assert!(
        array.contains(" --point \"$SLURM_ARRAY_TASK_ID\" --mpi\n"),
        "{array}"
    );
    let merge = fs::read_to_string(out.join("slurm/merge.sbatch")).unwrap();
    assert!(
        !merge.contains("--ntasks") && !merge.contains("srun"),
        "{merge}"
    );

    fs::write(&file, text_of_file.replace("ranks = 4", "ranks = 0")).unwrap();
    let o = sweep(&file, &temp("ranks-bad"), &["--emit", "slurm"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("slurm.ranks"),
        "{}",
        text(&o.stderr)
    );
}

/// The fidelity is an axis like any other: one sweep screens at flow
/// level and confirms at packet level, each point's summary saying which
/// it ran at.
#[test]
fn the_fidelity_is_an_axis() {
    let dir = temp("fidelity");
    fs::create_dir_all(&dir).unwrap();
    let base = fs::canonicalize("examples/sweep/balancers-base.toml").unwrap();
    let file = dir.join("fidelity.toml");
    fs::write(
        &file,
        format!(
            "base = {:?}\nseeds = [1]\nset = [\"workload.0.bytes=\\\"50KB\\\"\"]\n\
             [[axis]]\nkey = \"switch.balance.mode\"\nname = \"balancer\"\nvalues = [\"ecmp\", \"spray\"]\n\
             [[axis]]\nkey = \"simulation.fidelity\"\nname = \"fidelity\"\nvalues = [\"flow\", \"packet\"]\n",
            base.display().to_string()
        ),
    )
    .unwrap();
    let out = dir.join("out");
    let o = sweep(&file, &out, &["--jobs", "2", "--quiet"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let csv = fs::read_to_string(out.join("sweep.csv")).unwrap();
    let mut lines = csv.lines();
    assert!(lines
        .next()
        .unwrap()
        .starts_with("point,dir,seed,balancer,fidelity,status,"));
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 4, "{csv}");
    for (i, want) in ["ecmp,flow", "ecmp,packet", "spray,flow", "spray,packet"]
        .iter()
        .enumerate()
    {
        assert!(rows[i].contains(&format!(",1,{want},done,")), "{csv}");
        let summary = fs::read_to_string(out.join(format!("points/p{i:04}/summary.json"))).unwrap();
        let fidelity = want.split(',').nth(1).unwrap();
        assert!(
            summary.contains(&format!("\"fidelity\": \"{fidelity}\"")),
            "{summary}"
        );
    }
    let _ = fs::remove_dir_all(dir);
}

/// `merge` does not follow a link at `plots/`: refused, and the folder it
/// points to untouched.
#[test]
fn merge_refuses_a_linked_plots_folder() {
    let out = temp("linked-plots");
    let file = small_sweep(&out.join("def"), "[\"ecmp\"]");
    let o = sweep(&file, &out.join("s"), &[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let elsewhere = out.join("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    let plots = out.join("s").join("plots");
    let _ = fs::remove_dir_all(&plots);
    std::os::unix::fs::symlink(&elsewhere, &plots).unwrap();
    let o = fabricsim()
        .arg("merge")
        .arg(out.join("s"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("is a symbolic link"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
    let _ = fs::remove_dir_all(&out);
}

/// A range from NaN or to infinity is refused (it gave "0 points" and a
/// Slurm array of 0 to 2^64 - 1); a grid past Slurm's default array size
/// is emitted with a word about it.
#[test]
fn a_range_must_be_finite_and_a_large_array_is_named() {
    let dir = temp("nan");
    fs::create_dir_all(&dir).unwrap();
    let base = fs::canonicalize("examples/fat-tree.toml").unwrap();
    for (from, to) in [("nan", "10"), ("1", "inf"), ("-inf", "1")] {
        let file = dir.join("nan.toml");
        fs::write(
            &file,
            format!(
                "base = {:?}\n[[axis]]\nkey = \"workload.0.bytes\"\nfrom = {from}\nto = {to}\nstep = 1\n",
                base.display().to_string()
            ),
        )
        .unwrap();
        let o = sweep(&file, &dir.join("out"), &["--emit", "slurm"]);
        assert_eq!(o.status.code(), Some(2), "{from} {to}");
        assert!(
            text(&o.stderr).contains("expected a finite number"),
            "{}",
            text(&o.stderr)
        );
        assert!(!dir.join("out").join("slurm").exists());
    }
    let file = dir.join("big.toml");
    fs::write(
        &file,
        format!(
            "base = {:?}\n[[axis]]\nkey = \"workload.0.start\"\nfrom = 1\nto = 1500\nstep = 1\nunit = \"us\"\n",
            base.display().to_string()
        ),
    )
    .unwrap();
    let o = sweep(&file, &dir.join("out"), &["--emit", "slurm"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let e = text(&o.stderr);
    assert!(
        e.contains("the array has 1500 tasks") && e.contains("MaxArraySize"),
        "{e}"
    );
    let _ = fs::remove_dir_all(&dir);
}

/// A point whose summary is cut short or emptied is not done: merge lists
/// it as corrupt, with no metrics, and the sweep runs it again.
#[test]
fn a_corrupt_point_is_run_again_not_merged_as_done() {
    let out = temp("corrupt");
    let file = small_sweep(&temp("corrupt-def"), "[\"dlb\", \"glb\"]");
    let o = sweep(&file, &out, &[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let before = point_files(&out);
    fs::write(out.join("points/p0001/summary.json"), "{}").unwrap();
    let whole = fs::read_to_string(out.join("points/p0002/summary.json")).unwrap();
    fs::write(
        out.join("points/p0002/summary.json"),
        &whole[..whole.len() / 2],
    )
    .unwrap();
    let o = fabricsim().arg("merge").arg(&out).output().unwrap();
    let csv = fs::read_to_string(out.join("sweep.csv")).unwrap();
    let corrupt: Vec<&str> = csv.lines().filter(|l| l.contains(",corrupt,")).collect();
    assert_eq!(corrupt.len(), 2, "{csv}\n{}", text(&o.stderr));
    assert!(
        corrupt.iter().any(|l| l.contains("not a whole summary")),
        "{csv}"
    );
    let o = sweep(&file, &out, &[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("4 points, 2 already done, running 2"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(point_files(&out), before);
}
