#!/usr/bin/env bash
# Builds a fuzz target with libFuzzer's coverage instrumentation on the
# stable toolchain (the flags cargo-fuzz passes, without a sanitizer) and
# runs it for a while.
#
# Usage: fuzz/run.sh TARGET [SECONDS]    TARGET: scenario, chakra, nxos or junos
#
# New inputs go to fuzz/work/TARGET (not kept); the seed corpus is
# fuzz/corpus/TARGET. A crash, timeout or memory blow-up is written to
# fuzz/artifacts/TARGET/ and the script fails: turn it into a regression
# file in fuzz/regressions/TARGET/ (tests/fuzz_harness.rs replays those).
set -euo pipefail
cd "$(dirname "$0")"
target=${1:?usage: fuzz/run.sh scenario|chakra|nxos|junos [SECONDS]}
seconds=${2:-60}
host=$(rustc -vV | sed -n 's/^host: //p')
# Instrument only the target's code, not build scripts or proc macros:
# hence an explicit --target.
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table -Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
cargo build --quiet --release --target "$host" --bin "$target"
mkdir -p "work/$target" "artifacts/$target"
"target/$host/release/$target" \
    -max_total_time="$seconds" \
    -timeout=10 \
    -rss_limit_mb=4096 \
    -max_len=65536 \
    -print_final_stats=1 \
    -artifact_prefix="artifacts/$target/" \
    "work/$target" "corpus/$target"
