"""Trace import and one simulator pass at scale: a 1,000,000-request Mooncake-shaped trace.

The trace is generated into a temporary directory (never into the repository): the bundled
Mooncake conversation trace's 12,031 requests (lengths, outputs, inter-arrival gaps and hash-id
chains), repeated with the hash ids of repetition r shifted by r * (max id + 1) and the clock
running on, so every repetition has Mooncake's reuse structure and repetitions share nothing.
Deterministic (no randomness). The trace is written by a child process, so this process's peak
resident memory is the loader's and the simulator's alone.

Then, in this process: ``load_trace`` (CPU seconds, peak RSS), one ``simulate`` pass (CPU
seconds, peak RSS), each beside the target of load + one pass <= 60 CPU s within 2 GB resident.
``--profile N`` profiles the pass on the first N requests (cProfile; top functions by own time,
microseconds and RSS growth per request).

    .venv/bin/python bench/bench_trace_scale.py [--requests 1000000] [--policy sglang]
        [--kv-budget-gib 0] [--state-budget-gib 32] [--schedule sequential] [--no-hash-ids]
        [--load-only] [--profile N]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

GIB = 1 << 30
TARGET_CPU_S = 60.0
TARGET_RSS_B = 2 * 10**9


def write_trace(path: Path, n: int, hash_ids: bool = True) -> None:
    """The Mooncake-shaped trace of ``n`` requests (see the module docstring)."""
    import json

    from kda_core.workloads import BUNDLED_TRACES, TRACES_DIR

    rows = [json.loads(x) for x in (TRACES_DIR / BUNDLED_TRACES["conversation"]).open()]
    span = rows[-1]["timestamp"] + (rows[-1]["timestamp"] - rows[0]["timestamp"]) / len(rows)
    shift = 1 + max(max(r["hash_ids"]) for r in rows)
    with path.open("w") as f:
        for i in range(n):
            rep, r = divmod(i, len(rows))
            row = rows[r]
            t = row["timestamp"] + rep * span
            line = f'{{"timestamp": {t:.0f}, "input_length": {row["input_length"]}, '
            line += f'"output_length": {row["output_length"]}'
            if hash_ids:
                ids = ", ".join(str(h + rep * shift) for h in row["hash_ids"])
                line += f', "hash_ids": [{ids}]'
            f.write(line + "}\n")


def cpu_s() -> float:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def peak_rss_b() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def rss_b() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def _sim_kwargs(args: argparse.Namespace) -> dict:
    kv = None if args.kv_budget_gib <= 0 else int(args.kv_budget_gib * GIB)
    st = None if args.state_budget_gib <= 0 else int(args.state_budget_gib * GIB)
    return dict(
        policy=args.policy,
        state_budget_bytes=st,
        kv_budget_bytes=kv,
        schedule=args.schedule,
    )


def profile_pass(trace, kwargs: dict, n: int) -> None:
    from kda_core import sim

    head = trace.head(n)
    rss0, c0 = rss_b(), cpu_s()
    prof = cProfile.Profile()
    prof.enable()
    res = sim.simulate(head, **kwargs)
    prof.disable()
    c1 = cpu_s()
    us, grown = (c1 - c0) / n * 1e6, (rss_b() - rss0) / n
    print(
        f"\nprofile: {n:,} requests, token hit {res.token_hit_rate:.3f}; under cProfile "
        f"{us:.1f} us/request, RSS +{grown:.0f} B/request"
    )
    out = io.StringIO()
    st = pstats.Stats(prof, stream=out)
    st.sort_stats("tottime").print_stats(22)
    print("\n".join(out.getvalue().splitlines()[:40]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--policy", default="sglang")
    ap.add_argument("--schedule", default="sequential", choices=("sequential", "inflight"))
    ap.add_argument("--kv-budget-gib", type=float, default=0.0, help="<= 0: unlimited")
    ap.add_argument("--state-budget-gib", type=float, default=32.0, help="<= 0: unlimited")
    ap.add_argument("--no-hash-ids", action="store_true", help="a lengths-only trace")
    ap.add_argument("--load-only", action="store_true")
    ap.add_argument("--profile", type=int, default=0, metavar="N")
    ap.add_argument("--write", type=Path, help=argparse.SUPPRESS)  # the child process
    args = ap.parse_args()
    if args.write is not None:
        write_trace(args.write, args.requests, hash_ids=not args.no_hash_ids)
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mooncake_shaped.jsonl"
        cmd = [sys.executable, __file__, "--write", str(path), "--requests", str(args.requests)]
        subprocess.run(cmd + (["--no-hash-ids"] if args.no_hash_ids else []), check=True)
        size = path.stat().st_size
        from kda_core import sim, workloads

        base_rss, c0 = peak_rss_b(), cpu_s()
        trace = workloads.load_trace(path)
        load_s, load_peak = cpu_s() - c0, peak_rss_b()
    print(
        f"trace: {len(trace):,} requests, {trace.blocks.size:,} block ids, {size / 1e6:.0f} MB "
        f"of JSONL, prefix info {trace.has_prefix_info}"
    )
    krows = len(trace) / load_s / 1e3
    print(
        f"load_trace: {load_s:6.2f} CPU s  {krows:7.1f} k rows/s  peak RSS "
        f"{load_peak / 1e6:6.0f} MB (interpreter + imports {base_rss / 1e6:.0f} MB)"
    )
    if args.load_only:
        return
    kwargs = _sim_kwargs(args)
    rss0, c1 = rss_b(), cpu_s()
    res = sim.simulate(trace, **kwargs)
    sim_s, sim_peak = cpu_s() - c1, peak_rss_b()
    print(
        f"simulate {args.policy} ({args.schedule}, kv {args.kv_budget_gib} GiB, state "
        f"{args.state_budget_gib} GiB): {sim_s:6.2f} CPU s  {sim_s / len(trace) * 1e6:5.1f} "
        f"us/request  peak RSS {sim_peak / 1e6:6.0f} MB (+{(sim_peak - rss0) / 1e6:.0f} MB "
        f"over the loaded trace)  token hit {res.token_hit_rate:.3f}  state hit "
        f"{res.state_hit_rate:.3f}"
    )
    total = load_s + sim_s
    print(
        f"load + one pass: {total:6.2f} CPU s = {total / TARGET_CPU_S:.2f} x the 60 s "
        f"target; peak RSS {sim_peak / 1e9:.2f} GB = {sim_peak / TARGET_RSS_B:.2f} x the 2 GB "
        "target"
    )
    if args.profile:
        profile_pass(trace, kwargs, min(args.profile, len(trace)))


if __name__ == "__main__":
    main()
