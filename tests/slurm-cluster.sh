#!/usr/bin/env bash
# Runs the example sweep (examples/sweep/balancers.toml) through a real
# Slurm cluster and checks that it gives exactly what the same sweep gives
# run locally.
#
# The cluster is one node on this machine: Debian's slurmctld, slurmd and
# munge packages (installed when missing), started directly as root with
# their own configuration, key, sockets and state in a temporary folder
# (no systemd, nothing under /etc touched), and stopped by their process
# ids when the script ends, however it ends.
#
# Usage: tests/slurm-cluster.sh   (as root, or with sudo available)
# FABRICSIM_BIN names the binary to test; by default the one `cargo test`
# builds (target/debug/fabricsim).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        exec sudo --preserve-env=FABRICSIM_BIN,PATH,CARGO_HOME,RUSTUP_HOME "$0" "$@"
    fi
    echo "slurm-cluster: needs root to start the Slurm daemons (and no sudo here)" >&2
    exit 1
fi

need=()
command -v slurmctld >/dev/null 2>&1 || need+=(slurmctld)
command -v slurmd >/dev/null 2>&1 || need+=(slurmd)
command -v sbatch >/dev/null 2>&1 || need+=(slurm-client)
command -v munged >/dev/null 2>&1 || need+=(munge)
if [ ${#need[@]} -gt 0 ]; then
    echo "slurm-cluster: installing ${need[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

bin=${FABRICSIM_BIN:-}
if [ -z "$bin" ]; then
    # The binary the integration tests use: a no-op after `cargo test`.
    cargo test --no-run --quiet 2>/dev/null
    bin=$repo/target/debug/fabricsim
fi

work=$(mktemp -d /tmp/fabricsim-slurm.XXXXXX)
chmod 755 "$work"
pids=()
cleanup() {
    local status=$?
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        for _ in $(seq 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$pid" 2>/dev/null || true
    done
    if [ $status -ne 0 ]; then
        echo "slurm-cluster: FAILED; daemon logs:" >&2
        for log in "$work"/munge/munged.log "$work"/slurmctld.log "$work"/slurmd.log "$work"/out-slurm/slurm/logs/*; do
            [ -f "$log" ] && { echo "== $log" >&2; tail -n 20 "$log" >&2; }
        done
    fi
    rm -rf "$work"
    exit $status
}
trap cleanup EXIT INT TERM

# Waits up to $1 seconds for the command after it to succeed.
wait_for() {
    local limit=$1
    shift
    for _ in $(seq $((limit * 2))); do
        if "$@" >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.5
    done
    echo "slurm-cluster: timed out after ${limit}s waiting for: $*" >&2
    return 1
}

# munge, with its own key and socket.
mkdir -m 700 "$work/munge"
head -c 1024 /dev/urandom >"$work/munge/munge.key"
chmod 400 "$work/munge/munge.key"
munged --force \
    --key-file="$work/munge/munge.key" \
    --socket="$work/munge/munge.socket" \
    --pid-file="$work/munge/munged.pid" \
    --log-file="$work/munge/munged.log" \
    --seed-file="$work/munge/munged.seed"
wait_for 10 test -s "$work/munge/munged.pid"
pids+=("$(cat "$work/munge/munged.pid")")

# Slurm: one node with this machine's cores, one partition.
host=$(hostname -s)
cpus=$(nproc)
mem_mb=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 * 9 / 10))
mkdir -p "$work/state" "$work/spool"
export SLURM_CONF=$work/slurm.conf
cat >"$SLURM_CONF" <<EOF
ClusterName=fabricsim-test
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$work/munge/munge.socket
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
MinJobAge=600
NodeName=$host CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
slurmctld -c
wait_for 20 test -s "$work/slurmctld.pid"
pids+=("$(cat "$work/slurmctld.pid")")
slurmd
wait_for 20 test -s "$work/slurmd.pid"
pids+=("$(cat "$work/slurmd.pid")")
node_idle() { sinfo -h -n "$host" -o %t | grep -q '^idle'; }
wait_for 60 node_idle
echo "slurm-cluster: node $host up ($cpus CPUs) under slurmctld $(cat "$work/slurmctld.pid") and slurmd $(cat "$work/slurmd.pid")" >&2

sweep=$repo/examples/sweep/balancers.toml
# A space in the output folder: every path in the batch scripts must be
# quoted for bash and for sbatch's own reading of #SBATCH lines.
out="$work/out slurm"
submitted=$("$bin" sweep "$sweep" --out "$out" --emit slurm --submit)
echo "slurm-cluster: $submitted" >&2
array=$(sed -n 's/.*array job \([0-9]*\).*/\1/p' <<<"$submitted")
merge=$(sed -n 's/.*merge job \([0-9]*\).*/\1/p' <<<"$submitted")
[ -n "$array" ] && [ -n "$merge" ]

# The merge job runs only after every task succeeded (afterok).
merge_done() { scontrol show job "$merge" | grep -qE 'JobState=(COMPLETED|FAILED|CANCELLED|TIMEOUT)'; }
wait_for 600 merge_done
scontrol show job "$merge" | grep -q 'JobState=COMPLETED'
tasks=$(scontrol show job "$array" | grep -c 'JobState=COMPLETED')
points=$(($(wc -l <"$out/manifest.csv") - 1))
if [ "$tasks" -ne "$points" ]; then
    echo "slurm-cluster: $tasks of $points array tasks completed" >&2
    exit 1
fi

# The same sweep here, and every per-point output compared (perf.json
# holds wall-clock figures and is left out).
local_out=$work/out-local
"$bin" sweep "$sweep" --out "$local_out" --quiet
diff "$out/sweep.csv" "$local_out/sweep.csv"
diff "$out/manifest.csv" "$local_out/manifest.csv"
diff -r -x perf.json "$out/points" "$local_out/points"
# The task logs went where #SBATCH --output said, space and all.
[ -f "$out/slurm/logs/point-0.out" ] && [ -f "$out/slurm/logs/merge.out" ]
echo "slurm-cluster: ok: $points points run as array job $array and merged by job $merge, identical to the local sweep" >&2
