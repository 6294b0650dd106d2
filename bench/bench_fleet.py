"""A fleet at scale: 16 replicas x 1,000,000 requests, side by side with one replica's pass.

The trace is ``bench_trace_scale.py``'s Mooncake-shaped one (the bundled conversation trace's
requests repeated with fresh hash ids; written to a temporary directory by that script). Each
replica holds what one Kimi K3 TP8 server holds under SGLang 0.5.23's split of the K3
write-up's budget (``sizing.split_memory(K3_REST_BYTES, 0.15)``: 3.76 GiB of states and
25.1 GiB of MLA KV per GPU). Two child processes, so each peak RSS is its own: the single
replica (``sim.simulate``, SGLang's rules, those budgets, lookups of at most input - 1 tokens)
and the fleet (``fleet.simulate_fleet``, ``--replicas`` of them, the chosen router, every event
through msgpack, no oracle). Printed: CPU seconds and peak RSS of each, the fleet's against
the single pass (the ratio) and against the target of 120 CPU s and 3 GB.

    .venv/bin/python bench/bench_fleet.py [--requests 1000000] [--replicas 16]
        [--router kv_events] [--engine sglang]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

TARGET_CPU_S = 120.0
TARGET_RSS_B = 3 * 10**9
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # this checkout's kda_core, not an installed one


def cpu_s() -> float:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def peak_rss_b() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


K3_RATIO = 0.15
"""The K3 write-up's ``--mamba-full-memory-ratio`` (docs/sizing.md: with the rest
``studies.calculator.K3_REST_BYTES`` it prints the write-up's slots and tokens)."""


def budgets() -> dict:
    from kda_core import sizing
    from kda_core.studies.calculator import K3_REST_BYTES

    s = sizing.split_memory(sizing.preset("kimi-k3"), K3_REST_BYTES, K3_RATIO, tp=8)
    return {"state_budget_bytes": s.state_budget_bytes, "kv_budget_bytes": s.kv_bytes}


def child(args: argparse.Namespace) -> None:
    """One measured pass; prints a JSON line."""
    from kda_core import workloads

    c0 = cpu_s()
    trace = workloads.load_trace(args.trace)
    load_s = cpu_s() - c0
    b = budgets()
    c1 = cpu_s()
    if args.child == "single":
        from kda_core.sim import simulate

        policy = "sglang" if args.engine == "sglang" else ("vllm", {"block_size": 768})
        r = simulate(trace, policy, cap_lookup=True, outputs=False, **b)
        hit, extra = r.state_hit_rate, {}
    else:
        from kda_core.fleet import simulate_fleet

        r = simulate_fleet(
            trace,
            replicas=args.replicas,
            router=args.router,
            engine=args.engine,
            oracle=False,
            **b,
        )
        s = r.summary()
        hit, extra = s["state_hit_rate"], {"skew": s["load_skew"], "events": s["events"]}
    run_s = cpu_s() - c1
    out = {"load_s": load_s, "run_s": run_s, "peak_rss": peak_rss_b(), "hit": hit, **extra}
    print(json.dumps(out))


def run_child(kind: str, path: Path, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, __file__, "--child", kind, "--trace", str(path)]
    cmd += ["--replicas", str(args.replicas), "--router", args.router, "--engine", args.engine]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--replicas", type=int, default=16)
    ap.add_argument("--router", default="kv_events")
    ap.add_argument("--engine", default="sglang", choices=("sglang", "vllm"))
    ap.add_argument("--child", choices=("single", "fleet"), help=argparse.SUPPRESS)
    ap.add_argument("--trace", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mooncake_shaped.jsonl"
        writer = [sys.executable, str(HERE / "bench_trace_scale.py"), "--write", str(path)]
        subprocess.run([*writer, "--requests", str(args.requests)], check=True)
        one = run_child("single", path, args)
        fleet = run_child("fleet", path, args)
    n = args.requests
    b = budgets()
    print(
        f"{n:,} requests; per replica {b['state_budget_bytes'] / 2**30:.2f} GiB of states, "
        f"{b['kv_budget_bytes'] / 2**30:.1f} GiB of MLA KV ({args.engine} rules)"
    )
    print(f"load_trace: {one['load_s']:.1f} CPU s")
    for name, r in (("one replica", one), (f"{args.replicas} replicas, {args.router}", fleet)):
        print(
            f"{name:>28}: {r['run_s']:7.1f} CPU s  {r['run_s'] / n * 1e6:6.1f} us/request  "
            f"peak RSS {r['peak_rss'] / 1e9:.2f} GB  state hit {r['hit']:.3f}"
        )
    ratio = fleet["run_s"] / one["run_s"]
    print(
        f"fleet / one replica: {ratio:.2f}x CPU; fleet {fleet['run_s']:.1f} CPU s = "
        f"{fleet['run_s'] / TARGET_CPU_S:.2f}x the 120 s target, peak RSS "
        f"{fleet['peak_rss'] / TARGET_RSS_B:.2f}x the 3 GB target; load skew "
        f"{fleet['skew']:.3f}, {fleet['events']:,} events"
    )


if __name__ == "__main__":
    main()
