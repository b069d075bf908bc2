#!/usr/bin/env python3
"""Predicted per-GPU training throughput against published measurements.

Runs one Megatron job per row of a published table (the row's model,
parallelism and batch, given as Megatron-LM flags), reads the simulated
iteration time, and converts it to TFLOP/s per GPU with the FLOP count
the publication used, so that the comparison is of iteration times.
One GPU efficiency (`gpu.efficiency`) is calibrated on the first row
and used for every other row. Every table and assumption is in
VALIDATION.md ("Throughput against published runs").

    scripts/throughput.py h100 [--efficiency E] [--rows N,N] [--dp N]
    scripts/throughput.py a100 ...

Without --efficiency it calibrates on row 1 (two runs) first. The data
parallelism is simulated at --dp (default 2) replicas with each
replica's own batch, not the published one: every replica runs the same
schedule, and the gradient reduction (overlapped) is the only part that
depends on the replicas' count.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BINARY = os.path.join(HERE, "..", "target", "release", "fabricsim")

# Megatron-Core on H100 (Megatron-LM's README, "Performance Benchmarking",
# images/model_table.png at commit f2e5db402c, July 2024): vocabulary
# 131,072, sequence 4,096, --overlap-grad-reduce, --overlap-param-gather,
# --tp-comm-overlap; DP 48 on every row.
# (name, heads, hidden, layers, tp, pp, gpus, batch, TFLOP/s per GPU)
H100 = [
    ("1.7B", 16, 2048, 24, 1, 1, 48, 192, 408.8),
    ("7.1B", 32, 4096, 30, 2, 1, 96, 192, 465.9),
    ("16B", 48, 6144, 32, 4, 1, 192, 192, 489.1),
    ("32B", 56, 7168, 48, 8, 1, 384, 192, 459.6),
    ("70B", 64, 8192, 84, 8, 2, 768, 384, 419.7),
    ("119B", 80, 10240, 92, 8, 4, 1536, 768, 420.5),
    ("177B", 96, 12288, 96, 8, 6, 2304, 1152, 432.8),
    ("314B", 128, 16384, 96, 8, 8, 3072, 1536, 474.4),
    ("462B", 144, 18432, 112, 8, 16, 6144, 3072, 459.9),
]

# Narayanan et al. 2021 ("Efficient Large-Scale Language Model Training
# on GPU Clusters Using Megatron-LM", SC'21, Table 1): A100 80 GB, DGX
# A100 servers with 8 x 200G HDR InfiniBand; vocabulary 51,200, sequence
# 2,048; FLOPs counted with activation recomputation.
A100 = [
    ("1.7B", 24, 2304, 24, 1, 1, 32, 512, 137),
    ("3.6B", 32, 3072, 30, 2, 1, 64, 512, 138),
    ("7.5B", 32, 4096, 36, 4, 1, 128, 512, 142),
    ("18.4B", 48, 6144, 40, 8, 1, 256, 1024, 135),
    ("39.1B", 64, 8192, 48, 8, 2, 512, 1536, 138),
    ("76.1B", 80, 10240, 60, 8, 4, 1024, 1792, 140),
    ("145.6B", 96, 12288, 80, 8, 8, 1536, 2304, 148),
    ("310.1B", 128, 16384, 96, 8, 16, 1920, 2160, 155),
    ("529.6B", 128, 20480, 105, 8, 35, 2520, 2520, 163),
    ("1008.0B", 160, 25600, 128, 8, 64, 3072, 3072, 163),
]

TABLES = {
    "h100": dict(
        rows=H100, seq=4096, vocab=131072, gpu="h100", nic="400G",
        nvlink="900GB/s", pcie="128GB/s",
        # Megatron's num_floating_point_operations at f2e5db402c:
        # 72 B s L h^2 (1 + s / 6h + V / 12 L h) for a GPT layer.
        flops=lambda b, s, l, h, v: 72 * b * s * l * h * h * (1 + s / (6 * h) + v / (12 * l * h)),
        flags="--overlap-grad-reduce --overlap-param-gather",
        tp_flags="--sequence-parallel --tp-comm-overlap",
        accounting="megatron-core",
    ),
    "a100": dict(
        rows=A100, seq=2048, vocab=51200, gpu="a100", nic="200G",
        nvlink="600GB/s", pcie="64GB/s",
        # The paper's count, recomputation included:
        # 96 B s l h^2 (1 + s / 6h + V / 16 l h).
        flops=lambda b, s, l, h, v: 96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h)),
        accounting="paper",
    ),
}


def workload(t, row, dp, micro, virtual):
    """The job as Megatron-LM's flags (kind = "megatron"), or for the
    2021 paper as kind = "model" keys: its pipeline sends are the paper's
    1/tp scatter/gather, which Megatron-Core no longer runs."""
    name, heads, hidden, layers, tp, pp, gpus, batch, _ = row
    batch = batch * tp * pp // gpus * dp
    if t["accounting"] == "paper":
        return f"""kind = "model"
[workload.model]
layers = {layers}
hidden = {hidden}
heads = {heads}
seq = {t['seq']}
vocab = {t['vocab']}
micro_batch = {micro}
global_batch = {batch}
gated = false
norm = "layernorm"
bias = true
tied = true
positions = {t['seq']}
[workload.parallel]
tp = {tp}
pp = {pp}
virtual_stages = {virtual}
recompute = "full"
accounting = "paper"
"""
    flags = [
        f"--num-layers {layers} --hidden-size {hidden} --num-attention-heads {heads}",
        f"--seq-length {t['seq']} --max-position-embeddings {t['seq']} --vocab-size {t['vocab']}",
        f"--micro-batch-size {micro} --global-batch-size {batch}",
        f"--tensor-model-parallel-size {tp} --pipeline-model-parallel-size {pp}",
        "--bf16 --use-distributed-optimizer",
        t["flags"],
        t["tp_flags"] if tp > 1 else "",
    ]
    if virtual > 1:
        flags.append(f"--num-virtual-stages-per-pipeline-rank {virtual}")
    args = "\n".join(f for f in flags if f)
    return f'kind = "megatron"\nargs = """\n{args}\n"""\n'


def scenario(t, row, dp, efficiency, micro, virtual):
    name, heads, hidden, layers, tp, pp, gpus, batch, _ = row
    hosts = max(1, tp * pp * dp // 8)
    per_host = min(8, tp * pp * dp)
    return f"""name = "{name}"
[simulation]
seed = 1
fidelity = "flow"
[topology]
kind = "rail-optimized"
hosts = {hosts}
gpus_per_host = {per_host}
hosts_per_leaf = {hosts}
rails_per_leaf = {per_host}
spines = {per_host}
nic_speed = "{t['nic']}"
uplink_speed = "{t['nic']}"
[host]
pcie = "{t['pcie']}"
nvlink = "{t['nvlink']}"
[report]
plots = false
html = false
[[workload]]
{workload(t, row, dp, micro, virtual)}[workload.gpu]
preset = "{t['gpu']}"
efficiency = {efficiency}
"""


def run(t, row, dp, efficiency, micro, virtual):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "job.toml")
        with open(path, "w") as f:
            f.write(scenario(t, row, dp, efficiency, micro, virtual))
        out = os.path.join(d, "out")
        subprocess.run([BINARY, "run", path, "--out", out, "--quiet"], check=True)
        with open(os.path.join(out, "summary.json")) as f:
            s = json.load(f)
    return s["jobs"][0]["iteration_ps"][0] * 1e-12


def published_time(t, row):
    name, heads, hidden, layers, tp, pp, gpus, batch, tflops = row
    f = t["flops"](batch, t["seq"], layers, hidden, t["vocab"])
    return f / (tflops * 1e12 * gpus)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("table", choices=sorted(TABLES))
    p.add_argument("--efficiency", type=float)
    p.add_argument("--rows", help="1-based rows to run, e.g. 1,2,5")
    p.add_argument("--dp", type=int, default=2)
    p.add_argument("--micro", type=int, default=1)
    p.add_argument(
        "--virtual",
        default="1",
        help="virtual stages per pipeline rank on the PP > 1 rows: a number, or 'layer' for one layer per chunk",
    )
    a = p.parse_args()
    t = TABLES[a.table]
    rows = t["rows"]
    eff = a.efficiency
    if eff is None:
        eff = 0.6
        for _ in range(2):
            sim = run(t, rows[0], a.dp, eff, a.micro, 1)
            eff = round(eff * sim / published_time(t, rows[0]), 4)
        print(f"calibrated on row 1: efficiency {eff}", file=sys.stderr)
    pick = [int(x) for x in a.rows.split(",")] if a.rows else range(1, len(rows) + 1)
    print("| model | TP | PP | DP | batch | published TFLOP/s | predicted | error |")
    print("|---|---|---|---|---|---|---|---|")
    for i in pick:
        row = rows[i - 1]
        virtual = 1
        if row[5] > 1:
            virtual = row[3] // row[5] if a.virtual == "layer" else int(a.virtual)
        sim = run(t, row, a.dp, eff, a.micro, virtual)
        pub = published_time(t, row)
        predicted = row[8] * pub / sim
        err = predicted / row[8] - 1
        dp = row[6] // (row[4] * row[5])
        print(
            f"| {row[0]} | {row[4]} | {row[5]} | {dp} | {row[7]} | {row[8]} | {predicted:.1f} | {err:+.1%} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
