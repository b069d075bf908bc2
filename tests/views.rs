//! What a user looks at: time series, SVG plots, the HTML report and
//! packet captures.

mod common;

use common::{run_file, run_with};
use fabricsim::report::{plots, Summary};
use fabricsim::units::SimTime;
use std::path::{Path, PathBuf};

fn example(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(rel)
}

/// The text an SVG shows, one entry per `<text>` element.
fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let body = &t[t.find('>')? + 1..t.find("</text>")?];
            Some(
                body.trim()
                    .replace("&gt;", ">")
                    .replace("&lt;", "<")
                    .replace("&amp;", "&"),
            )
        })
        .collect()
}

/// The incast walk-through marks, pauses and cuts rates: every plot has
/// its axes, units and the series that matter.
#[test]
fn svg_plots_show_their_series_and_labels() {
    let (sim, _) = run_file(&example("lossless/incast.toml"), &[]);
    let svgs: std::collections::HashMap<&str, String> =
        plots::all(&sim).unwrap().into_iter().collect();
    assert_eq!(svgs.len(), 10);
    let texts = |name: &str| svg_texts(&svgs[name]);
    let has = |name: &str, want: &str| {
        let t = texts(name);
        assert!(
            t.iter().any(|x| x.contains(want)),
            "{name} lacks {want:?}; it shows {t:?}"
        );
    };
    // The receiver's port (leaf0 -> host0) is the bottleneck.
    for want in [
        "Link utilization",
        "time (us)",
        "leaf0->host0/nic0",
        "utilization",
    ] {
        has("plot_link_util.svg", want);
    }
    for want in [
        "Deepest switch queues",
        "deepest in the interval (KB)",
        "leaf0->host0/nic0 q3",
        "WRED min",
        "WRED max",
        "PFC XOFF (per ingress port)",
    ] {
        has("plot_queue_depth.svg", want);
    }
    // The spine's port into the receiver's leaf is paused (DCQCN slows the
    // senders before their NICs are).
    for want in [
        "PFC pause timeline",
        "share paused",
        "spine0->leaf0/2 p3",
        "spine0->leaf0/0 p3",
    ] {
        has("plot_pfc_pause.svg", want);
    }
    for want in ["ECN marks", "CNPs received", "per microsecond"] {
        has("plot_ecn_cnp.svg", want);
    }
    for want in [
        "CDF of 6 transfers",
        "completion time (us, log scale)",
        "fraction of transfers",
    ] {
        has("plot_fct_cdf.svg", want);
    }
    for want in ["transfer size (bytes, log scale)", "ideal (1)"] {
        has("plot_slowdown.svg", want);
    }
    for want in ["rate (Gb/s)", "qp0 flow0 sent", "qp0 flow0 DCQCN rate"] {
        has("plot_qp_rate.svg", want);
    }
    for want in ["bytes sent (MB)", "leaf1 g0"] {
        has("plot_group_bytes.svg", want);
    }
    has("plot_timeline.svg", "no training iteration finished");
    // The fabric: its switches, and the pauses leaf0 sent.
    for want in ["spine0", "leaf0", "host0", "20"] {
        has("plot_fabric.svg", want);
    }
    // The queue line's points: as many as buckets.
    let svg = &svgs["plot_queue_depth.svg"];
    let first_line = svg
        .split("<polyline")
        .find(|p| p.contains("stroke-width=\"2\""))
        .unwrap();
    let points = first_line.split("points=\"").nth(1).unwrap();
    let n = points.split('"').next().unwrap().split_whitespace().count();
    assert_eq!(n, sim.series().points);
}

/// A plot with nothing to show says so instead of drawing empty axes.
#[test]
fn plots_without_a_subject_say_why() {
    let (sim, _) = run_with(
        r#"
[topology]
kind = "single-rail"
hosts = 2
gpus_per_host = 1
[[workload]]
kind = "transfer"
src = 0
dst = 1
bytes = "1MB"
"#,
        &[],
    );
    let svgs: std::collections::HashMap<&str, String> =
        plots::all(&sim).unwrap().into_iter().collect();
    let t = svg_texts(&svgs["plot_pfc_pause.svg"]);
    assert!(
        t.contains(&"no port was paused by PFC".to_string()),
        "{t:?}"
    );
}

/// However long the run, each series holds at most `samples` points; the
/// sampler's memory is the same for a run ten times as long.
#[test]
fn sampling_memory_stays_bounded_on_a_long_run() {
    let text = |bytes: &str| {
        format!(
            r#"
[topology]
kind = "single-rail"
hosts = 3
gpus_per_host = 1
nic_speed = "100G"
[report]
sample_interval = "100ns"
samples = 64
[[workload]]
kind = "incast"
dst = 0
srcs = [1, 2]
bytes = "{bytes}"
"#
        )
    };
    let (short, _) = run_with(&text("2MB"), &[]);
    let prepared = fabricsim::scenario::prepare("long.toml", &text("200MB"), &[]).unwrap();
    let mut long = fabricsim::engine::Simulation::new(prepared);
    long.run_until(SimTime::from_us(2000), u64::MAX);
    let mid_bytes = long.series().heap_bytes();
    let mid_points = long.series().points;
    long.run_until(SimTime::from_us(8000), u64::MAX);
    let later_bytes = long.series().heap_bytes();
    long.run(|_| {});
    assert!(long.now().0 > 50 * short.now().0);
    for sim in [&short, &long] {
        let s = &sim.series();
        assert!(s.points >= 32 && s.points <= 64, "{} points", s.points);
        for g in s.groups() {
            for v in g.series().values() {
                assert_eq!(v.len(), s.points);
            }
            // At most `samples` values per series (twice that while a
            // vector grows), plus the key index.
            let bound = 2 * g.len() * 64 * 4 + sim.ports().len() * 8 * 4 + 64 * 8 + 256;
            assert!(g.heap_bytes() <= bound, "{} > {bound}", g.heap_bytes());
        }
        // The buckets cover the run.
        assert!(s.bucket_start(s.points - 1) < sim.now());
        assert!(s.bucket_start(s.points) >= sim.now());
    }
    // From 2 ms (every series has its column by then) to 8 ms the sampler
    // holds no more memory, nor at the end
    // (16 ms), when the buckets are laid out row by row for the outputs.
    assert!(mid_points >= 32);
    assert_eq!(mid_bytes, later_bytes);
    assert!(long.series().heap_bytes() <= mid_bytes);
    // The interval doubled from 100 ns as the run went on.
    assert!(long.series().interval > SimTime::from_us(100));
    assert_eq!(long.series().interval.0 % 100_000, 0);
    assert!((long.series().interval.0 / 100_000).is_power_of_two());
}

/// Sampling only reads the simulation: the results are the same with it
/// on or off, whatever the interval.
#[test]
fn sampling_does_not_change_the_run() {
    let path = example("lossless/incast.toml");
    let (_, a) = run_file(&path, &["report.sample_interval=\"off\""]);
    let (_, b) = run_file(&path, &["report.sample_interval=\"300ns\""]);
    let (_, c) = run_file(&path, &[]);
    let json = |s: &Summary| serde_json::to_string(s).unwrap();
    assert_eq!(json(&a), json(&b));
    assert_eq!(json(&a), json(&c));
}

/// Link utilization over the run equals what `links.csv` reports: the
/// bottleneck's mean over its buckets is its busy share.
#[test]
fn link_utilization_series_adds_up_to_the_busy_time() {
    let (sim, _) = run_file(&example("lossless/incast.toml"), &[]);
    let s = &sim.series();
    for (k, v) in s.link_util.series() {
        let busy = sim.ports()[k as usize].busy_ps as f64;
        let mut sum = 0.0;
        for (i, &u) in v.iter().enumerate() {
            let start = s.bucket_start(i).0 as f64;
            let end = if i + 1 == s.points {
                s.last.0 as f64
            } else {
                s.bucket_start(i + 1).0 as f64
            };
            sum += u as f64 * (end - start);
        }
        assert!(
            (sum - busy).abs() <= busy * 1e-3 + 1e6,
            "port {k}: series gives {sum} ps busy, the port {busy}"
        );
    }
}

/// Every output of a run, written into a fresh folder.
fn write_all(sim: &fabricsim::engine::Simulation, summary: &Summary, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fabricsim-views-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let perf = fabricsim::report::Perf::of(sim, 1.0);
    fabricsim::report::write_outputs(&dir, sim, summary, &perf).unwrap();
    dir
}

/// The value of `attr="..."` on the first element that has it.
fn attr(dom: &str, name: &str) -> Option<String> {
    let at = dom.find(&format!(" {name}=\""))? + name.len() + 3;
    let end = dom[at..].find('"')? + at;
    Some(dom[at..end].replace("&gt;", ">").replace("&amp;", "&"))
}

/// `report.html` opened in headless Chromium (installed by `.ci/setup`):
/// it loads nothing from the network, its script runs without error and
/// draws every chart, hovering the heatmap names a link, and dragging
/// across a chart zooms it. Its fabric map has a line per pair of ends;
/// the time slider colours them for one interval (the incast's receiver
/// link red at its busiest, pause marks where the pausing was) and back;
/// hovering a line gives its figures, and clicking it filters the link
/// tables to its rows and lists its members.
#[test]
fn the_html_report_renders_in_a_real_browser() {
    let (sim, summary) = run_file(&example("lossless/incast.toml"), &[]);
    let dir = write_all(&sim, &summary, "html");
    let page = dir.join("report.html");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.len() < 400_000,
        "the page stays small: {} bytes",
        html.len()
    );
    for external in ["<link", " src=", "@import", "url(http", "fetch("] {
        assert!(
            !html.contains(external),
            "the page must load nothing ({external})"
        );
    }
    for want in [
        "Busiest links",
        "Deepest queues",
        "Paused by PFC",
        "leaf0-&gt;host0/nic0",
        "id=\"link-util\"",
    ] {
        assert!(html.contains(want), "{want}");
    }
    let profile = dir.join("chromium-profile");
    let o = std::process::Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(["--virtual-time-budget=5000", "--dump-dom"])
        .arg(format!("file://{}#selftest", page.display()))
        .output()
        .expect("chromium is needed for this test: run .ci/setup (installs Debian's chromium)");
    let dom = String::from_utf8_lossy(&o.stdout);
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{log}");
    assert!(!log.contains("Uncaught"), "script error: {log}");
    assert_eq!(attr(&dom, "data-errors").as_deref(), Some("0"), "{dom}");
    // Two heatmaps and three line charts.
    assert_eq!(attr(&dom, "data-rendered").as_deref(), Some("5"));
    assert_eq!(dom.matches("<canvas").count(), 2);
    assert!(dom.matches("class=\"chart\"").count() >= 3);
    let hover = attr(&dom, "data-hover").unwrap();
    assert!(
        hover.contains("->") && hover.contains("us: utilization"),
        "{hover}"
    );
    // The drag from 30% to 60% of the chart's width zoomed it.
    let zoom = attr(&dom, "data-zoom").unwrap();
    let (a, b) = zoom.split_once("..").unwrap();
    let (a, b): (f64, f64) = (a.parse().unwrap(), b.parse().unwrap());
    let end = sim.series().last.0 as f64 / 1e6;
    assert!(
        a > 0.1 * end && b < 0.8 * end && b > a,
        "zoomed to {zoom} of {end} us"
    );
    // The map.
    let map = fabricsim::report::fabric::draw(sim.topo(), None, "");
    assert_eq!(attr(&dom, "data-map-lines").unwrap(), map.lines.to_string());
    let slider = attr(&dom, "data-slider").unwrap();
    let f: Vec<&str> = slider.split(':').collect();
    let (changed, busiest): (usize, u32) = (f[1].parse().unwrap(), f[2].parse().unwrap());
    assert!(changed > 0, "the slider recoloured no line: {slider}");
    // The busiest link (leaf0 to host0's NIC, the upper end's direction)
    // is full in its busiest interval: the upper half is red.
    assert!(busiest >= 95, "{slider}");
    assert!(f[3].ends_with("/#f02830"), "{slider}");
    // At the interval with the most pauses sent, the marks show them all.
    let pauses = attr(&dom, "data-map-pauses").unwrap();
    let f: Vec<&str> = pauses.split(':').collect();
    let (marks, shown, most): (usize, u64, u64) = (
        f[1].parse().unwrap(),
        f[2].parse().unwrap(),
        f[3].parse().unwrap(),
    );
    assert!(marks > 0 && shown > 0 && shown == most, "{pauses}");
    assert!(pauses.contains(" us (interval "), "{pauses}");
    assert_eq!(attr(&dom, "data-map-restored").as_deref(), Some("true"));
    let hover = attr(&dom, "data-map-hover").unwrap();
    for want in [
        "host0 nic0",
        "leaf0",
        "67.9% down",
        "connections hashed",
        "max queue",
    ] {
        assert!(hover.contains(want), "{want}: {hover}");
    }
    let filter = attr(&dom, "data-filter").unwrap();
    let f: Vec<&str> = filter.split(':').collect();
    let rows: Vec<usize> = f[1].split(',').map(|x| x.parse().unwrap()).collect();
    let (shown, on_it, total) = (rows[0], rows[1], rows[2]);
    assert!(shown > 0 && shown == on_it && shown < total, "{filter}");
    let members: usize = f[2].parse().unwrap();
    assert!(members >= 2, "a header and a member: {filter}");
    assert_eq!(
        attr(&dom, "data-unfilter").unwrap(),
        format!("{total},{on_it},{total}"),
        "a second click shows every row again"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// The map's data in `report.html` follows the sampled series: each
/// half of a line is its end's egress, and a pause mark sits at the end
/// that sent the pauses (facing the paused transmitter).
#[test]
fn the_report_map_replays_each_direction_and_the_pauses() {
    let (sim, summary) = run_file(&example("lossless/incast.toml"), &[]);
    let dir = write_all(&sim, &summary, "map-data");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let at = html.find("id=\"data\">").unwrap() + 10;
    let end = html[at..].find("</script>").unwrap() + at;
    let data: serde_json::Value =
        serde_json::from_str(&html[at..end].replace("<\\/", "</")).unwrap();
    let map = &data["map"];
    let lines = map["lines"].as_array().unwrap();
    let line = lines
        .iter()
        .find(|l| l["a"] == "host0 nic0" && l["b"] == "leaf0")
        .unwrap();
    let topo = sim.topo();
    let port = |name: &str| {
        (0..topo.ports.len() as u32)
            .map(fabricsim::topology::PortId)
            .find(|&p| topo.link_name(p) == name)
            .unwrap()
    };
    let series = |p: fabricsim::topology::PortId| -> Vec<u64> {
        let v = sim.series().link_util.get(p.0).unwrap();
        plots::columns(&v, plots::HEATMAP_COLS)
            .0
            .iter()
            .map(|x| (x.clamp(0.0, 1.0) * 100.0).round() as u64)
            .collect()
    };
    let ints = |v: &serde_json::Value| -> Vec<u64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect()
    };
    assert_eq!(ints(&line["d"]), series(port("leaf0->host0/nic0")));
    assert_eq!(ints(&line["u"]), series(port("host0/nic0->leaf0")));
    assert_ne!(line["u"], line["d"]);
    assert_eq!(
        map["cols"].as_u64().unwrap() as usize,
        line["d"].as_array().unwrap().len()
    );
    // leaf0 paused spine0's port towards it: the mark is at leaf0's end
    // of the leaf0-spine0 line (the lower end), none at spine0's.
    let up = lines
        .iter()
        .find(|l| l["a"] == "leaf0" && l["b"] == "spine0")
        .unwrap();
    assert!(up["pa"].is_array(), "{up}");
    let paused = sim
        .series()
        .pfc_paused
        .iter()
        .filter(|(k, _)| {
            let p = fabricsim::topology::PortId(k / fabricsim::switch::classify::QUEUES as u32);
            topo.link_name(p).starts_with("spine0->leaf0/")
        })
        .count();
    assert!(paused > 0);
    // The pauses sent, interval by interval, add up to every pause sent,
    // and the intervals where leaf0 sent them are those it held spine0.
    let total: u64 = lines
        .iter()
        .flat_map(|l| [&l["na"], &l["nb"]])
        .filter(|v| v.is_array())
        .map(|v| ints(v).iter().sum::<u64>())
        .sum();
    assert_eq!(total, summary.pfc_pause_frames);
    let sent = ints(&up["na"]);
    assert_eq!(sent.iter().sum::<u64>(), 20, "leaf0's pauses to spine0");
    let held = ints(&up["pa"]);
    for (c, &n) in sent.iter().enumerate() {
        if n > 0 {
            assert!(held[c] > 0, "interval {c}: {n} pauses, spine0 never paused");
        }
    }
    assert_eq!(up["nb"], 0, "spine0 sent leaf0 none");
    // ts_pfc_pauses.csv: pauses per second, times each interval, are the
    // pauses each port sent (leaf0's, over its three members).
    let csv = std::fs::read_to_string(dir.join("ts_pfc_pauses.csv")).unwrap();
    let mut rows = csv.lines();
    let head: Vec<&str> = rows.next().unwrap().split(',').collect();
    let cols: Vec<usize> = (0..head.len())
        .filter(|&i| head[i].starts_with("leaf0->spine0") && head[i].ends_with(" p3"))
        .collect();
    assert!(!cols.is_empty(), "{head:?}");
    let times: Vec<Vec<f64>> = rows
        .map(|r| r.split(',').map(|x| x.parse().unwrap()).collect())
        .collect();
    let end_us = sim.series().last.0 as f64 / 1e6;
    let n: f64 = times
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let to = times.get(i + 1).map_or(end_us, |next| next[0]);
            cols.iter().map(|&c| r[c]).sum::<f64>() * (to - r[0]) / 1e6
        })
        .sum();
    assert!((n - 20.0).abs() < 0.01, "{n}");
    // Clicking it lists its three members each way.
    assert_eq!(up["members"]["ports"], 6);
    let _ = std::fs::remove_dir_all(dir);
}

/// `--no-plots` and `--no-html` (the scenario's `report.plots` and
/// `report.html`) leave those files out; by default both are written.
#[test]
fn plots_and_the_report_can_be_turned_off() {
    let names = |sets: &[&str]| {
        let (sim, summary) = run_file(&example("lossless/incast.toml"), sets);
        let dir = write_all(&sim, &summary, &format!("off-{}", sets.len()));
        let mut v: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        let _ = std::fs::remove_dir_all(dir);
        v
    };
    let all = names(&[]);
    assert!(all.contains(&"report.html".to_string()));
    assert_eq!(all.iter().filter(|n| n.ends_with(".svg")).count(), 10);
    let none = names(&["report.plots=false", "report.html=false"]);
    assert!(
        none.iter()
            .all(|n| !n.ends_with(".svg") && n != "report.html"),
        "{none:?}"
    );
    assert_eq!(all.len(), none.len() + 11);
}

/// The progress estimate starts at nothing, never goes back and reaches
/// all at the end, through a collective whose steps wait on each other.
#[test]
fn progress_rises_to_done_and_the_eta_follows_the_pace() {
    use fabricsim::engine::{Simulation, StopReason};
    let path = example("collectives/ring-allreduce.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let sets = ["workload.0.bytes=\"4MB\"".to_string()];
    let prepared = fabricsim::scenario::prepare(&path.to_string_lossy(), &text, &sets).unwrap();
    let mut sim = Simulation::new(prepared);
    assert_eq!(sim.done_fraction(), 0.0);
    let mut last = 0.0;
    let mut steps = 0;
    loop {
        let stop = sim.run_until(SimTime::MAX, 2000);
        let f = sim.done_fraction();
        assert!(f >= last, "progress went back from {last} to {f}");
        last = f;
        steps += 1;
        if stop == StopReason::Finished {
            break;
        }
    }
    assert!(steps > 10, "only {steps} steps");
    assert_eq!(sim.done_fraction(), 1.0);
    let line = fabricsim::report::progress_line(&sim.progress(), 2.0);
    assert!(line.contains("100.0% done"), "{line}");
    assert!(!line.contains("ETA"), "nothing is left: {line}");

    // A quarter done in 10 s leaves 30 s at that pace.
    use fabricsim::report::{eta_seconds, wall_duration};
    assert_eq!(eta_seconds(0.25, 10.0), Some(30.0));
    assert_eq!(eta_seconds(0.005, 10.0), None);
    assert_eq!(eta_seconds(0.5, 0.1), None);
    assert_eq!(wall_duration(42.4), "42s");
    assert_eq!(wall_duration(185.0), "3m 05s");
    assert_eq!(wall_duration(7800.0), "2h 10m");
}

/// The training timeline: for a model split TP 2 x PP 2 x DP 4 (the
/// stages two servers apart), one row of kernels per shown rank and one
/// per dimension it communicates in, ranks of both stages shown; each
/// rank's kernel row draws as many boxes as it has runs of kernels.
#[test]
fn the_timeline_shows_each_ranks_kernels_and_communication() {
    let text = std::fs::read_to_string(example("training/dense-8b-tp8-dp8.toml")).unwrap();
    let small = text
        .replace("--num-layers 32", "--num-layers 4")
        .replace("--hidden-size 4096", "--hidden-size 1024")
        .replace("--ffn-hidden-size 14336", "--ffn-hidden-size 4096")
        .replace("--seq-length 4096", "--seq-length 1024")
        .replace(
            "--tensor-model-parallel-size 8 --sequence-parallel",
            "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2",
        )
        .replace("--global-batch-size 16", "--global-batch-size 32");
    assert!(small.contains("--pipeline-model-parallel-size 2"));
    let (sim, _) = run_with(&small, &[]);
    let svgs: std::collections::HashMap<&str, String> =
        plots::all(&sim).unwrap().into_iter().collect();
    let t = svg_texts(&svgs["plot_timeline.svg"]);
    assert!(
        t.iter().any(|x| x.contains("iteration 0, 8 of 64 ranks")),
        "{t:?}"
    );
    for want in [
        "rank 0 kernels",
        "rank 0 tp",
        "rank 0 pp",
        "rank 0 dp",
        "rank 56 kernels",
        "rank 56 pp",
    ] {
        assert!(t.iter().any(|x| x == want), "{want}: {t:?}");
    }
    assert!(!t.iter().any(|x| x == "rank 1 kernels"), "every 8th rank");
}
