#!/usr/bin/env bash
# The packet path's speed against a named baseline commit, by instruction
# counts (valgrind's callgrind, counting inside the run loop only, so that
# building the scenario and writing the outputs do not weigh in): builds
# the baseline in a temporary worktree and the working tree as it is, runs
# each bench scenario with both builds one after the other, and fails when
# the working tree needs more than SPEED_GUARD_LIMIT percent (default 5)
# more instructions on any of them. Run it before every change to the
# packet path:
#
#   scripts/speed-guard.sh 49d98e9
#   scripts/speed-guard.sh 49d98e9 examples/bench/fat-tree-k8-permutation.toml
#
# Each scenario runs for SPEED_GUARD_SIM_TIME of simulated time (default
# 100us) with the time series, plots and report off. Instruction counts
# on one machine vary by well under 0.1% between runs of one build, where
# wall-clock times on a shared VM vary by tens of percent.
set -euo pipefail

base=${1:?usage: scripts/speed-guard.sh BASELINE-COMMIT [SCENARIO.toml ...]}
shift
limit=${SPEED_GUARD_LIMIT:-5}
sim_time=${SPEED_GUARD_SIM_TIME:-100us}
root=$(git rev-parse --show-toplevel)
cd "$root"
if [ "$#" -gt 0 ]; then
    scenarios=("$@")
else
    scenarios=(examples/bench/fat-tree-k8-permutation.toml examples/bench/fat-tree-k16-permutation.toml)
fi
command -v valgrind >/dev/null || { echo "speed-guard: valgrind is needed (apt-get install valgrind)" >&2; exit 2; }

work=$(mktemp -d)
cleanup() {
    git worktree remove --force "$work/base" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

git worktree add --quiet --detach "$work/base" "$base"
echo "speed-guard: building $base and the working tree" >&2
(cd "$work/base" && CARGO_TARGET_DIR="$work/target" cargo build --release --quiet)
cargo build --release --quiet
old="$work/target/release/fabricsim"
new="$root/target/release/fabricsim"

# Instructions inside the run loop for one run of scenario $2 by binary $1.
count() {
    local out="$work/out" log="$work/cg.log"
    rm -rf "$out"
    valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" \
        --toggle-collect='*run_limited*' \
        "$1" run "$2" --set "simulation.max_sim_time=\"$sim_time\"" \
        --set report.sample_interval=off -q --no-plots --no-html --out "$out" \
        >/dev/null 2>"$log"
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$log" | tail -1
}

status=0
printf '%-48s %16s %16s %8s\n' scenario "$base" "working tree" change
for s in "${scenarios[@]}"; do
    a=$(count "$old" "$s")
    b=$(count "$new" "$s")
    if [ -z "$a" ] || [ -z "$b" ] || [ "$a" -eq 0 ]; then
        echo "speed-guard: $s: no instruction count (see $work/cg.log)" >&2
        exit 2
    fi
    change=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%+.2f", 100 * (b - a) / a }')
    printf '%-48s %16s %16s %7s%%\n' "$s" "$a" "$b" "$change"
    if awk -v c="$change" -v l="$limit" 'BEGIN { exit !(c > l) }'; then
        echo "speed-guard: $s needs $change% more instructions than $base (limit $limit%)" >&2
        status=1
    fi
done
exit $status
