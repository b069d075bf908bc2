#!/usr/bin/env bash
# Runs every example and benchmark scenario as 2 and 3 MPI ranks
# (`mpirun -np N fabricsim run SCENARIO --mpi`) and checks that rank 0
# writes the files one thread writes, byte for byte (perf.json, with its
# wall-clock figures, apart); then a packet capture and a run stopped by a
# PFC deadlock the same way.
#
# Open MPI (openmpi-bin, libopenmpi-dev) and libclang are installed from
# Debian's packages when missing; the binary is built with
# `--features mpi` (into target/mpi, beside the usual build).
#
# Usage: tests/mpi-ranks.sh
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v mpirun >/dev/null 2>&1 || need+=(openmpi-bin)
command -v mpicc >/dev/null 2>&1 || need+=(libopenmpi-dev)
ls /usr/lib/llvm-*/lib/libclang.so* >/dev/null 2>&1 || need+=(libclang-dev)
if [ ${#need[@]} -gt 0 ]; then
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        sudo=sudo
    fi
    echo "mpi-ranks: installing ${need[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

cargo build --release --quiet --features mpi --target-dir target/mpi
bin=$PWD/target/mpi/release/fabricsim

work=$(mktemp -d /tmp/fabricsim-mpi.XXXXXX)
trap 'rm -rf "$work"' EXIT INT TERM

# Two cores here: more ranks than cores is allowed, and root may run them.
mpi=(mpirun --oversubscribe --bind-to none -np)
if [ "$(id -u)" -eq 0 ]; then
    mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np)
fi

failed=0
# compare NAME DIR-ONE DIR-RANKS: every file but perf.json the same.
compare() {
    local name=$1 one=$2 many=$3
    if ! diff -q <(cd "$one" && ls | grep -v '^perf.json$') <(cd "$many" && ls | grep -v '^perf.json$') >/dev/null; then
        echo "mpi-ranks: $name: other files" >&2
        failed=1
        return
    fi
    for f in "$one"/*; do
        f=$(basename "$f")
        [ "$f" = perf.json ] && continue
        if ! cmp -s "$one/$f" "$many/$f"; then
            echo "mpi-ranks: $name: $f differs" >&2
            failed=1
        fi
    done
}

# run DIR STATUS-OK ARGS...: a run whose exit status is 0 or, for a run
# that cannot finish, 3 (results written).
run() {
    local dir=$1
    shift
    local status=0
    "$@" --out "$dir" -q --no-plots --no-html >"$dir.log" 2>&1 || status=$?
    if [ $status -ne 0 ] && [ $status -ne 3 ]; then
        echo "mpi-ranks: failed ($status): $*" >&2
        cat "$dir.log" >&2
        failed=1
    fi
}

cut=0
for scenario in $(find examples -name '*.toml' -not -path 'examples/sweep/*' | sort); do
    name=$(basename "$scenario" .toml)
    sets=()
    # Benchmarks cut short, as `bench --smoke` runs them (the all-reduces
    # with 1 MB, so that their traffic reaches the network in time).
    case $scenario in
    # The flow level runs in one process (more ranks are refused).
    *-flow.toml) continue ;;
    examples/bench/rail-multipod-*) sets=(--max-sim-time 20us --set 'workload.0.bytes="1MB"') ;;
    examples/bench/*) sets=(--max-sim-time 20us) ;;
    # Training steps (a minute or more each in full) cut as the tests do.
    examples/training/*) sets=(--max-sim-time 2ms) ;;
    esac
    run "$work/$name-1" "$bin" run "$scenario" "${sets[@]}"
    for n in 2 3; do
        run "$work/$name-$n" "${mpi[@]}" "$n" "$bin" run "$scenario" --mpi "${sets[@]}"
        compare "$name at $n ranks" "$work/$name-1" "$work/$name-$n"
        if grep -q '"partitions": [23]' "$work/$name-$n/perf.json" 2>/dev/null; then
            cut=$((cut + 1))
        fi
    done
done
# Not a test of nothing: most runs were really cut over the ranks.
if [ $cut -lt 60 ]; then
    echo "mpi-ranks: only $cut runs were cut over ranks" >&2
    failed=1
fi

# A capture: rank 0 writes every rank's frames, in one queue's order.
for n in 1 2; do
    args=(run examples/load-balancing/glb.toml --capture all --capture-limit 30000)
    if [ $n -eq 1 ]; then
        run "$work/cap-$n" "$bin" "${args[@]}"
    else
        run "$work/cap-$n" "${mpi[@]}" "$n" "$bin" "${args[@]}" --mpi
    fi
done
if ! cmp -s "$work/cap-1/capture.pcapng" "$work/cap-2/capture.pcapng"; then
    echo "mpi-ranks: capture.pcapng differs at 2 ranks" >&2
    failed=1
fi

# A sweep's point as 2 ranks (as `[slurm] ranks = 2` runs it): rank 0
# writes the point's folder, the same as one process does.
"$bin" sweep examples/sweep/balancers.toml --point 1 --out "$work/sweep-1" -q >"$work/sweep-1.log" 2>&1 || {
    cat "$work/sweep-1.log" >&2
    failed=1
}
"${mpi[@]}" 2 "$bin" sweep examples/sweep/balancers.toml --point 1 --mpi --out "$work/sweep-2" -q \
    >"$work/sweep-2.log" 2>&1 || {
    cat "$work/sweep-2.log" >&2
    failed=1
}
compare "sweep point 1 at 2 ranks" "$work/sweep-1/points/p0001" "$work/sweep-2/points/p0001"
if ! grep -q '"partitions": 2' "$work/sweep-2/points/p0001/perf.json" 2>/dev/null; then
    echo "mpi-ranks: the sweep's point was not cut over 2 ranks" >&2
    failed=1
fi

# Runs a scenario on one process and on 2 ranks (in $work/NAME-1 and
# NAME-2), compares their files, and checks the 2 ranks' perf.json for
# PATTERN, saying WHY if it is not there.
against_one() {
    local name=$1 pattern=$2 why=$3
    shift 3
    run "$work/$name-1" "$bin" run "$@"
    run "$work/$name-2" "${mpi[@]}" 2 "$bin" run "$@" --mpi
    compare "$name on 2 ranks" "$work/$name-1" "$work/$name-2"
    if ! grep -q "$pattern" "$work/$name-2/perf.json" 2>/dev/null; then
        echo "mpi-ranks: $why" >&2
        failed=1
    fi
}

# A job too long to be made up front: each rank makes its iterations as
# it goes, and the run writes what one thread writes.
against_one long '"partitions": 2' "the long job was not cut over 2 ranks" \
    examples/training/gpt-1b-1024gpu.toml --max-sim-time 100us --set workload.0.iterations=12

# Iterations over on every rank are gathered by rank 0 and forgotten
# during the run (`Exchange::share` over MPI), with the same files.
against_one forget '"iterations_forgotten": 1[0-9]' \
    "the ranks did not forget the job's iterations as they went" \
    examples/collectives/training-two-tenants.toml --set workload.1.iterations=12

# A trace longer than a part: each rank makes its parts as it goes and
# forgets them once over on every rank, with the same files.
python3 examples/bench/chakra-trace.py 8 2500 5 "$work/trace"
printf '[topology]\nkind = "single-rail"\nhosts = 8\ngpus_per_host = 1\n[[workload]]\nkind = "chakra"\ntrace = "trace"\n' \
    >"$work/trace.toml"
against_one trace '"iterations_forgotten": [1-9]' \
    "the ranks did not make and forget the trace's parts as they went" "$work/trace.toml"

# A bad scenario: every rank refuses it, rank 0 says why, nothing hangs.
status=0
"${mpi[@]}" 2 "$bin" run examples/fat-tree.toml --mpi --set topology.k=5 --out "$work/bad" \
    >"$work/bad.log" 2>&1 || status=$?
if [ $status -eq 0 ] || ! grep -q "topology.k" "$work/bad.log" || [ -e "$work/bad/summary.json" ]; then
    echo "mpi-ranks: a bad scenario was not refused once (status $status):" >&2
    cat "$work/bad.log" >&2
    failed=1
fi

if [ $failed -ne 0 ]; then
    exit 1
fi
echo "mpi-ranks: every scenario wrote the same files on 2 and 3 ranks as on one thread ($cut runs cut)"
