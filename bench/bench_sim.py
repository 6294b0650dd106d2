"""Trace-driven simulator speed on the bundled Mooncake conversation trace (12,031 requests).

Prints, side by side: seconds per full pass (median of ``--repeat`` runs) per (policy, budget),
requests/s, tree steps/s (key elements walked by match + insert), the ratio to the 1.5 s
target, and the density sweep - 6 checkpoint intervals K x 4 policies (24 full
passes, through ``studies.density.policy_sweep`` with its progress callback) at one state
budget - against its 30 s target. The interval K is each policy's density knob:

    interval     every=K                        a checkpoint every K tokens
    sglang       chunked_prefill_size=K         one state per prefill chunk (last grid point)
    vllm align   block_size=K, batched tokens K a state per block at scheduler-step ends
    vllm retain  mode=all, retention=K          per-block states (block = trace block), of
                                                which every K-th, the replay boundary and
                                                the shared-prefix junction are kept

(Marconi has no interval: it places states at branch points and request ends, so it is not
in the K sweep; its passes are timed above. Its default alpha is "auto", as the artifact: at
a binding budget its pass includes the bootstrap tuning, 21 replays of the first 5 N0
requests, so it is also timed with a fixed alpha 0.) ``--budget-sweep`` also runs the interval
policy's 6 intervals x 4 budgets grid of the density app.

    .venv/bin/python bench/bench_sim.py [--repeat 3] [--quick] [--budget-gib 32]
        [--budget-sweep] [--sweep-only]
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
    ("marconi alpha 0", "marconi", {"alpha": 0.0}),
    ("interval 4096", "interval", {"every": 4096}),
    ("every block", "interval", {"every": 512}),
    ("vllm align", "vllm", {"mode": "align"}),
    ("vllm all", "vllm", {"mode": "all"}),
)
BUDGETS: tuple[tuple[str, int | None], ...] = (("unlimited", None), ("32 GiB", 32 * GIB))
SWEEP_INTERVALS: tuple[int, ...] = density.DEFAULT_INTERVALS  # 512 .. 16384 (6 values)


def sweep_policies(k: int) -> list[tuple[str, str, dict]]:
    """The 4 policies of the density sweep at interval ``k`` (see the module docstring)."""
    return [
        (f"interval K={k}", "interval", {"every": k}),
        (f"sglang K={k}", "sglang", {"chunked_prefill_size": k}),
        (
            f"vllm align K={k}",
            "vllm",
            {"mode": "align", "block_size": k, "max_num_batched_tokens": k},
        ),
        (f"vllm retain K={k}", "vllm", {"mode": "all", "retention": k}),
    ]


SWEEP_LABELS = ("interval", "sglang", "vllm align", "vllm retain")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="one run, no sweep")
    ap.add_argument(
        "--budget-gib", type=float, default=32.0, help="state budget of the K x policy sweep"
    )
    ap.add_argument("--budget-sweep", action="store_true", help="also the interval x budget grid")
    ap.add_argument("--sweep-only", action="store_true", help="skip the per-pass table")
    ap.add_argument("--schedules", action="store_true", help="only sequential vs in-flight")
    args = ap.parse_args()
    if args.schedules:
        schedules_side_by_side(bundled_trace("conversation"))
        return
    if not 0 <= args.budget_gib <= 1 << 20:
        raise ValueError(f"--budget-gib must be in [0, 2**20], got {args.budget_gib}")
    if args.sweep_only:
        trace = bundled_trace("conversation")
        density_by_policy(trace, args.budget_gib)
        if args.budget_sweep:
            density_by_budget(trace)
        return
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
    schedules_side_by_side(trace)
    density_by_policy(trace, args.budget_gib)
    if args.budget_sweep:
        density_by_budget(trace)


def schedules_side_by_side(trace) -> None:
    """Every (policy, budget) under both schedules in one run: hit rates and their change."""
    hdr = (
        f"{'policy':<16} {'budget':>9} {'state seq':>9} {'in-flight':>9} {'d pts':>6} "
        f"{'token seq':>9} {'in-flight':>9} {'d pts':>6} {'ckpts seq':>9} {'in-flight':>9} "
        f"{'evict seq':>9} {'in-flight':>9} {'shorter':>7} {'cpu s':>11}"
    )
    print("sequential vs in-flight (TimeModel defaults; 'shorter': requests restoring less)")
    print(hdr)
    print("-" * len(hdr))
    for label, name, params in POLICIES:
        for blabel, b in BUDGETS:
            c = time.process_time()
            a = sim.simulate(trace, (name, params), b, schedule="sequential")
            ca = time.process_time() - c
            f = sim.simulate(trace, (name, params), b, schedule="inflight")
            cf = time.process_time() - c - ca
            short = int((f.series.restore_at < a.series.restore_at).sum())
            ds = 100 * (f.state_hit_rate - a.state_hit_rate)
            dt = 100 * (f.token_hit_rate - a.token_hit_rate)
            print(
                f"{label:<16} {blabel:>9} {a.state_hit_rate:9.4f} {f.state_hit_rate:9.4f} "
                f"{ds:+6.2f} {a.token_hit_rate:9.4f} {f.token_hit_rate:9.4f} {dt:+6.2f} "
                f"{a.checkpoints_stored:9d} {f.checkpoints_stored:9d} {a.evictions:9d} "
                f"{f.evictions:9d} {short:7d} {ca:5.1f}/{cf:5.1f}"
            )


def _progress() -> density.Progress:
    last = [0.0]

    def progress(frac: float, msg: str) -> None:
        if frac - last[0] >= 0.25 or frac >= 1.0:
            last[0] = frac
            print(f"  sweep {frac:5.0%} {msg}", flush=True)

    return progress


def density_by_policy(trace, budget_gib: float | None) -> None:
    """The density sweep: 6 intervals x 4 policies (24 passes) at one budget, timed."""
    pols = [p for k in SWEEP_INTERVALS for p in sweep_policies(k)]
    density._memo.clear()
    t = time.perf_counter()
    c = time.process_time()
    s = density.policy_sweep(trace, pols, (budget_gib,), progress=_progress())
    dt = time.perf_counter() - t
    dc = time.process_time() - c
    nk, npol = len(SWEEP_INTERVALS), len(SWEEP_LABELS)
    assert len(s.labels) == nk * npol == 24
    print(
        f"density sweep {nk} intervals x {npol} policies = {nk * npol} passes at "
        f"{s.budget_labels[0]}: {dt:.1f} s wall, {dc:.1f} CPU s = "
        f"{dc / SWEEP_TARGET_S:.2f} x the {SWEEP_TARGET_S:.0f} s target"
    )
    for title, arr, fmt in (
        ("state hit rate", s.state_hit_rate, "{:>12.4f}"),
        ("checkpoints stored", s.checkpoints_stored, "{:>12d}"),
        ("TTFT p50 ms", s.ttft_p50_s * 1e3, "{:>12.1f}"),
    ):
        grid = arr[:, 0].reshape(nk, npol)
        print(f"{title} (rows K, columns policies):")
        print(f"  {'K':>6} " + "".join(f"{lab:>12}" for lab in SWEEP_LABELS))
        for i, k in enumerate(SWEEP_INTERVALS):
            print(f"  {k:>6} " + "".join(fmt.format(x) for x in grid[i].tolist()))


def density_by_budget(trace) -> None:
    """The density app's grid: the interval policy, 6 intervals x 4 budgets, timed."""
    density._memo.clear()
    t = time.perf_counter()
    c = time.process_time()
    s = density.density_sweep(trace, progress=_progress())
    dt = time.perf_counter() - t
    dc = time.process_time() - c
    print(
        f"budget sweep {len(s.intervals)} intervals x {len(s.budget_labels)} budgets: "
        f"{dt:.1f} s wall, {dc:.1f} CPU s"
    )
    print("state hit rate (rows K, columns budgets " + ", ".join(s.budget_labels) + "):")
    for i, k in enumerate(s.intervals):
        row = " ".join(f"{x:7.4f}" for x in s.state_hit_rate[i])
        opt = " ".join("*" if s.optimum[j] == i else " " for j in range(len(s.budget_labels)))
        print(f"  K={k:>6}: {row}   optimum(TTFT) {opt}")


if __name__ == "__main__":
    main()
