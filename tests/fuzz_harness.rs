//! The fuzz targets' harnesses (`fabricsim::fuzz`), driven by proptest so
//! that every test run fuzzes a little without libFuzzer: arbitrary bytes,
//! and random edits of the seed corpus. Also replays the corpus and every
//! regression input in `fuzz/regressions/`. Any panic fails the test;
//! proptest prints the input that caused it.

use fabricsim::fuzz::{
    chakra_input, glob_input, junos_input, nxos_input, output_input, scenario_input,
};
use proptest::prelude::*;
use std::path::Path;

fn files(dir: &str) -> Vec<Vec<u8>> {
    let Ok(entries) = std::fs::read_dir(Path::new(dir)) else {
        return Vec::new();
    };
    let mut paths: Vec<_> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.extension().is_none_or(|e| e != "md"))
        .collect();
    paths.sort();
    paths.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

#[test]
fn the_corpus_and_every_regression_go_through_without_a_panic() {
    let scenarios = files("fuzz/corpus/scenario");
    assert!(scenarios.len() >= 5);
    let valid = scenarios.iter().filter(|s| scenario_input(s)).count();
    assert_eq!(valid, scenarios.len(), "the seed scenarios are valid");
    for s in files("fuzz/regressions/scenario") {
        scenario_input(&s);
    }
    let traces = files("fuzz/corpus/chakra");
    assert!(traces.len() >= 4);
    assert!(
        traces.iter().any(|t| chakra_input(t)),
        "some seed trace is valid"
    );
    for t in files("fuzz/regressions/chakra") {
        chakra_input(&t);
    }
    let configs = files("fuzz/corpus/nxos");
    assert!(configs.len() >= 2);
    assert!(
        configs.iter().all(|c| nxos_input(c)),
        "the seed configurations are valid"
    );
    for c in files("fuzz/regressions/nxos") {
        nxos_input(&c);
    }
    let configs = files("fuzz/corpus/junos");
    assert!(configs.len() >= 2);
    assert!(
        configs.iter().all(|c| junos_input(c)),
        "the seed configurations are valid"
    );
    for c in files("fuzz/regressions/junos") {
        junos_input(&c);
    }
}

/// Pieces of Junos text an edit may insert.
const JUNOS_PIECES: &[&str] = &[
    "\n",
    " ",
    "{",
    "}",
    ";",
    "[ ",
    " ]",
    "\"",
    "/*",
    "*/",
    "# ",
    "set ",
    "class-of-service ",
    "schedulers s ",
    "drop-profiles d interpolate fill-level [ 5 90 ] ",
    "forwarding-classes class X queue-num 9 ",
    "congestion-notification-profile c input dscp code-point 011000 pfc",
    "interfaces et-0/0/* ",
    "code-points ",
    "0",
    "1",
    "100",
    "255",
];

/// Pieces of NX-OS text an edit may insert.
const NXOS_PIECES: &[&str] = &[
    "\n",
    "  ",
    "    ",
    "class-map type qos match-any X\n",
    "policy-map type queuing Q\n",
    "policy-map type network-qos N\n",
    "class type queuing c-out-8q-q3\n",
    "random-detect minimum-threshold 1 mbytes maximum-threshold 2 kbytes ecn\n",
    "match dscp 0-63\n",
    "set qos-group 9\n",
    "pause pfc-cos 3,4\n",
    "priority level 2\n",
    "interface Ethernet1/1-4096\n",
    "interface Ethernet1/1-4095, Ethernet1/1-4095, eth1/1-64\n",
    ", Ethernet1/1-4095",
    "dlb-interface Ethernet1/1-4000\n",
    "*",
    "et-0/0/*",
    "system qos\n",
    "hardware profile dlb\n",
    "99999999999999999999999",
    "!",
    ",",
    "-",
];

/// Pieces of scenario text an edit may insert: keys, tables, values at
/// and past their limits.
const PIECES: &[&str] = &[
    "[topology]\n",
    "[[workload]]\n",
    "[switch.balance]\n",
    "[qos]\n",
    "[pfc]\n",
    "[dcqcn]\n",
    "[[failure]]\n",
    "[host]\n",
    "[report]\n",
    "[transport]\n",
    "[simulation]\n",
    "kind = \"fat-tree\"\n",
    "kind = \"multi-pod\"\n",
    "kind = \"all-to-all\"\n",
    "kind = \"all-reduce\"\n",
    "kind = \"training\"\n",
    "kind = \"background\"\n",
    "k = ",
    "hosts = ",
    "bytes = ",
    "mtu = ",
    "start = ",
    "mode = ",
    "at = ",
    "0",
    "1",
    "2",
    "-1",
    "16",
    "4096",
    "9223372036854775807",
    "1e309",
    "nan",
    "0.5",
    "\"100G\"",
    "\"0G\"",
    "\"1us\"",
    "\"0us\"",
    "\"1TB\"",
    "\"64MB\"",
    "\"spray\"",
    "\"dlb\"",
    "\"\"",
    "[]",
    "[0, 1]",
    "{}",
    "true",
    "=",
    "\n",
    ".",
    "\"",
    "#",
];

fn edited(base: Vec<u8>, edits: Vec<(usize, usize, usize)>) -> Vec<u8> {
    let mut s = base;
    for (at, cut, piece) in edits {
        let at = at % (s.len() + 1);
        let end = (at + cut % 24).min(s.len());
        s.splice(at..end, PIECES[piece % PIECES.len()].bytes());
    }
    s
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_are_no_scenario_and_no_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        scenario_input(&data);
    }

    #[test]
    fn edited_scenarios_never_panic(
        which in any::<prop::sample::Index>(),
        edits in proptest::collection::vec((any::<usize>(), any::<usize>(), any::<usize>()), 1..6),
    ) {
        let corpus = files("fuzz/corpus/scenario");
        let base = corpus[which.index(corpus.len())].clone();
        scenario_input(&edited(base, edits));
    }

    #[test]
    fn arbitrary_bytes_are_no_configuration_and_no_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        nxos_input(&data);
    }

    #[test]
    fn edited_configurations_never_panic(
        which in any::<prop::sample::Index>(),
        edits in proptest::collection::vec((any::<usize>(), any::<usize>(), any::<usize>()), 1..8),
    ) {
        let corpus = files("fuzz/corpus/nxos");
        let mut s = corpus[which.index(corpus.len())].clone();
        for (at, cut, piece) in edits {
            let at = at % (s.len() + 1);
            let end = (at + cut % 24).min(s.len());
            s.splice(at..end, NXOS_PIECES[piece % NXOS_PIECES.len()].bytes());
        }
        nxos_input(&s);
    }

    #[test]
    fn edited_junos_configurations_never_panic(
        which in any::<prop::sample::Index>(),
        edits in proptest::collection::vec((any::<usize>(), any::<usize>(), any::<usize>()), 1..8),
    ) {
        let corpus = files("fuzz/corpus/junos");
        let mut s = corpus[which.index(corpus.len())].clone();
        for (at, cut, piece) in edits {
            let at = at % (s.len() + 1);
            let end = (at + cut % 24).min(s.len());
            s.splice(at..end, JUNOS_PIECES[piece % JUNOS_PIECES.len()].bytes());
        }
        junos_input(&s);
    }

    #[test]
    fn arbitrary_bytes_are_no_junos_and_no_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        junos_input(&data);
    }

    #[test]
    fn wildcards_match_as_defined(
        pattern in "[a*Z/0-]{0,24}",
        name in "[a/0-]{0,40}Z?",
    ) {
        glob_input(format!("{pattern}\n{name}").as_bytes());
    }

    #[test]
    fn outputs_never_replace_what_is_not_a_file(data in proptest::collection::vec(any::<u8>(), 1..64)) {
        output_input(&data);
    }

    #[test]
    fn arbitrary_bytes_are_no_trace_and_no_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        chakra_input(&data);
    }

    #[test]
    fn damaged_traces_never_panic(
        which in any::<prop::sample::Index>(),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let corpus = files("fuzz/corpus/chakra");
        let mut t = corpus[which.index(corpus.len())].clone();
        for (at, v) in flips {
            let i = at % t.len();
            t[i] = v;
        }
        t.truncate(cut.index(t.len() + 1).max(1));
        chakra_input(&t);
    }
}
