"""The planner at scale: one simulator pass over 1,000,000 requests (fast vs the radix-tree
twin) and a 32-point sweep of that trace on Dask.

The trace is bench_trace_scale.py's Mooncake-shaped one (the bundled conversation trace
repeated with shifted ids), written to a temporary directory by a child process. Each pass
runs in a child process of its own, so its CPU seconds and peak resident memory are its own:
load the trace, then one SGLang pass (``simulate``, sequential, a 32 GiB state budget as
bench_trace_scale.py's default) with ``method="fast"`` (prepare + replay) or ``"twin"``. Then
``kda_core.plan.sweep`` of 32 points (mamba_full_memory_ratio x chunked_prefill_size x
mamba_track_interval) on a LocalCluster of ``--workers`` processes: the wall time, beside one
point run serially in this process. Ratios, not a timed test.

    .venv/bin/python bench/bench_plan.py [--requests 1000000] [--workers 2] [--no-twin]
        [--no-sweep]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GIB = 1 << 30
HERE = Path(__file__).resolve().parent
GRID = {
    "mamba_full_memory_ratio": [0.1, 0.2, 0.3, 0.5, 0.9, 1.5, 2.0, 3.0],
    "chunked_prefill_size": [4096, 8192],
    "mamba_track_interval": [256, 1024],
}


def cpu_s() -> float:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def peak_rss_b() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def one_pass(path: str, method: str) -> None:
    """Child process: load, one pass; prints a JSON line."""
    from kda_core import sim, workloads

    c0 = cpu_s()
    trace = workloads.load_trace(path)
    c1, rss_load = cpu_s(), peak_rss_b()
    res = sim.simulate(trace, "sglang", state_budget_bytes=32 * GIB, method=method)
    c2 = cpu_s()
    out = dict(
        load_s=c1 - c0,
        pass_s=c2 - c1,
        rss_load=rss_load,
        rss_peak=peak_rss_b(),
        token_hit=res.token_hit_rate,
        state_hit=res.state_hit_rate,
        evictions=res.evictions,
        cached=int(res.series.restore_at.sum()),
    )
    print(json.dumps(out))


def _child(*args: str) -> dict:
    cmd = [sys.executable, __file__, *args]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def passes(path: str, twin: bool) -> None:
    fast = _child("--pass", path, "fast")
    print(
        f"fast pass: load {fast['load_s']:.2f} CPU s, pass {fast['pass_s']:.2f} CPU s "
        f"(prepare + replay + result), peak RSS {fast['rss_peak'] / 1e9:.2f} GB (loaded trace "
        f"{fast['rss_load'] / 1e9:.2f} GB); token hit {fast['token_hit']:.4f}, state hit "
        f"{fast['state_hit']:.4f}"
    )
    print(
        f"  load + pass {fast['load_s'] + fast['pass_s']:.2f} CPU s (target: pass <= 15 CPU s, "
        "<= 1.5 GB)"
    )
    if not twin:
        return
    tw = _child("--pass", path, "twin")
    print(
        f"twin pass: pass {tw['pass_s']:.2f} CPU s, peak RSS {tw['rss_peak'] / 1e9:.2f} GB; "
        f"token hit {tw['token_hit']:.4f}, state hit {tw['state_hit']:.4f}"
    )
    same = all(fast[k] == tw[k] for k in ("token_hit", "state_hit", "evictions", "cached"))
    print(
        f"  twin / fast: {tw['pass_s'] / fast['pass_s']:.1f}x CPU, "
        f"{tw['rss_peak'] / fast['rss_peak']:.2f}x peak RSS; same results: {same}"
    )


def _worker_cpu() -> float:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def sweeps(path: str, workers: int) -> None:
    import os

    from distributed import Client, LocalCluster

    from kda_core import plan, workloads

    trace = workloads.load_trace(path)
    rest = 29_497 << 20  # the K3 write-up's profiled rest per GPU
    t0, c0 = time.perf_counter(), cpu_s()
    one = plan.sweep("kimi-k3", trace, rest_bytes=rest, flags={"mamba_full_memory_ratio": 0.5})
    t_one, c_one = time.perf_counter() - t0, cpu_s() - c0
    print(f"one point, serial, this process: {t_one:.1f} s wall, {c_one:.1f} CPU s")
    cluster = LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
    )
    client = Client(cluster)
    try:
        before = sum(client.run(_worker_cpu).values())
        load0 = os.getloadavg()[0]
        t0, c0 = time.perf_counter(), cpu_s()
        s = plan.sweep("kimi-k3", trace, rest_bytes=rest, grid=GRID, min_running=32, client=client)
        wall, parent = time.perf_counter() - t0, cpu_s() - c0
        work = sum(client.run(_worker_cpu).values()) - before
    finally:
        client.close()
        cluster.close()
    print(
        f"32-point sweep on a LocalCluster of {workers} processes: {wall:.1f} s wall "
        f"({wall / 60:.1f} min; target <= 10 min) at load average {load0:.1f} -> "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; workers {work:.0f} CPU s, this "
        f"process {parent:.0f} CPU s: {(work + parent) / workers / 60:.1f} min on {workers} "
        f"idle cores; {32 * c_one / work:.2f}x the CPU of 32 serial points; failed "
        f"{len(s.failed)}"
    )
    print(f"  {s.note}: {s.launch_command}")
    assert one.points[0]["status"] == "ok"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--no-twin", action="store_true")
    ap.add_argument("--no-sweep", action="store_true")
    ap.add_argument("--pass", nargs=2, dest="one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        one_pass(*args.one)
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "mooncake_shaped.jsonl")
        writer = [sys.executable, str(HERE / "bench_trace_scale.py"), "--write", path]
        subprocess.run([*writer, "--requests", str(args.requests)], check=True)
        print(f"trace: {args.requests:,} Mooncake-shaped requests")
        passes(path, not args.no_twin)
        if not args.no_sweep:
            sweeps(path, args.workers)


if __name__ == "__main__":
    main()
