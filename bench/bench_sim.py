"""Trace-driven simulator speed on the bundled Mooncake conversation trace (12,031 requests).

Prints, side by side: seconds per full pass (median of ``--repeat`` runs) per (policy, budget),
requests/s, tree steps/s (key elements walked by match + insert), the ratio to the 1.5 s
target, and the 6 intervals x 4 budgets density sweep against its 30 s target.

    .venv/bin/python bench/bench_sim.py [--repeat 3] [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from kda_core import sim
from kda_core.studies import density
from kda_core.workloads import bundled_trace

GIB = 1 << 30
PASS_TARGET_S = 1.5
SWEEP_TARGET_S = 30.0
POLICIES: tuple[tuple[str, str, dict], ...] = (
    ("sglang", "sglang", {}),
    ("marconi", "marconi", {}),
    ("interval 4096", "interval", {"every": 4096}),
    ("every block", "interval", {"every": 512}),
    ("vllm align", "vllm", {"mode": "align"}),
    ("vllm all", "vllm", {"mode": "all"}),
)
BUDGETS: tuple[tuple[str, int | None], ...] = (("unlimited", None), ("32 GiB", 32 * GIB))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="one run, no sweep")
    args = ap.parse_args()
    rep = 1 if args.quick else max(1, args.repeat)
    t0 = time.perf_counter()
    trace = bundled_trace("conversation")
    print(f"trace: {trace.name}, {len(trace)} requests, load {time.perf_counter() - t0:.2f} s")
    la = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load average {la[0]:.1f} (timings scale with it)")
    hdr = (
        f"{'policy':<14} {'budget':>9} {'wall s':>7} {'cpu s':>6} {'req/s':>8} {'steps/s':>10} "
        f"{'x target':>8} {'state hit':>9} {'token hit':>9} {'ckpts':>8} {'evict':>8}"
    )
    print(hdr)
    print("-" * len(hdr))
    worst = 0.0
    for label, name, params in POLICIES:
        for blabel, b in BUDGETS:
            times = []
            cpus = []
            r = None
            for _ in range(rep):
                t = time.perf_counter()
                c = time.process_time()
                r = sim.simulate(trace, (name, params), b)
                cpus.append(time.process_time() - c)
                times.append(time.perf_counter() - t)
            assert r is not None
            med = statistics.median(times)
            cpu = statistics.median(cpus)
            worst = max(worst, cpu)
            print(
                f"{label:<14} {blabel:>9} {med:7.2f} {cpu:6.2f} {len(trace) / cpu:8.0f} "
                f"{r.tree_steps / cpu:10.0f} {cpu / PASS_TARGET_S:8.2f} "
                f"{r.state_hit_rate:9.4f} {r.token_hit_rate:9.4f} "
                f"{r.checkpoints_stored:8d} {r.evictions:8d}"
            )
    ratio = worst / PASS_TARGET_S
    print(f"slowest pass {worst:.2f} CPU s = {ratio:.2f} x the {PASS_TARGET_S} s target")
    print("(req/s, steps/s and x target use CPU seconds: wall time on a shared machine varies)")
    if args.quick:
        return
    density._memo.clear()
    t = time.perf_counter()
    c = time.process_time()
    last = [0.0]

    def progress(frac: float, msg: str) -> None:
        if frac - last[0] >= 0.25 or frac >= 1.0:
            last[0] = frac
            print(f"  sweep {frac:5.0%} {msg}", flush=True)

    s = density.density_sweep(trace, progress=progress)
    dt = time.perf_counter() - t
    dc = time.process_time() - c
    print(
        f"density sweep {len(s.intervals)} intervals x {len(s.budget_labels)} budgets: "
        f"{dt:.1f} s wall, {dc:.1f} CPU s = {dc / SWEEP_TARGET_S:.2f} x the "
        f"{SWEEP_TARGET_S:.0f} s target"
    )
    print("state hit rate (rows K, columns budgets " + ", ".join(s.budget_labels) + "):")
    for i, k in enumerate(s.intervals):
        row = " ".join(f"{x:7.4f}" for x in s.state_hit_rate[i])
        opt = " ".join("*" if s.optimum[j] == i else " " for j in range(len(s.budget_labels)))
        print(f"  K={k:>6}: {row}   optimum(TTFT) {opt}")


if __name__ == "__main__":
    main()
