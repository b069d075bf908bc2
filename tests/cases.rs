//! Data-driven scenario cases: every scenario in `examples/` and its
//! family folders (not the benchmarks) is run and its whole `summary.json` compared with the
//! expected one in `tests/expected/NAME.summary.json`. A change to the
//! model that moves any figure shows up here as a diff to review.
//!
//! After an intended change, regenerate with
//! `UPDATE_EXPECT=1 cargo test --test cases` and review the diff.

mod common;

/// How much of a model's training step the cases run.
const TRAINING_CUT: &str = "simulation.max_sim_time=\"2ms\"";

#[test]
fn example_scenarios_produce_their_expected_summaries() {
    let update = std::env::var_os("UPDATE_EXPECT").is_some();
    // Top-level examples and those of each mechanism family, not `bench/`
    // or `sweep/` (sweep files; tests/sweep.rs runs them).
    let mut names: Vec<_> = std::fs::read_dir("examples")
        .unwrap()
        .map(|e| e.unwrap().path())
        .flat_map(|p| {
            if p.is_dir() && p.file_name().is_some_and(|n| n != "bench" && n != "sweep") {
                std::fs::read_dir(&p)
                    .unwrap()
                    .map(|e| e.unwrap().path())
                    .collect()
            } else {
                vec![p]
            }
        })
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    names.sort();
    let mut failures = Vec::new();
    for path in &names {
        let stem = path.file_stem().unwrap().to_string_lossy().to_string();
        // Most finish; the deadlock example stops on its PFC cycle; the
        // training jobs (seconds of wall time each) are cut after their
        // first 2 ms.
        let sets: &[&str] = if path.starts_with("examples/training") {
            &[TRAINING_CUT]
        } else {
            &[]
        };
        let (_, summary) = common::run_file_to_stop(path, sets);
        let got = serde_json::to_string_pretty(&summary).unwrap() + "\n";
        let expected_path = format!("tests/expected/{stem}.summary.json");
        if update {
            std::fs::write(&expected_path, &got).unwrap();
            continue;
        }
        match std::fs::read_to_string(&expected_path) {
            Ok(want) if want == got => {}
            Ok(want) => {
                let first = want
                    .lines()
                    .zip(got.lines())
                    .find(|(a, b)| a != b)
                    .map(|(a, b)| format!("expected `{}`, got `{}`", a.trim(), b.trim()))
                    .unwrap_or_else(|| "lengths differ".into());
                failures.push(format!("{stem}: {first}"));
            }
            Err(_) => failures.push(format!("{stem}: no {expected_path}")),
        }
    }
    assert!(names.len() >= 6);
    assert!(
        failures.is_empty(),
        "summaries changed (UPDATE_EXPECT=1 to accept):\n{}",
        failures.join("\n")
    );
}
