"""Unified pool performance, side by side: alloc/free ops per second with compaction on (eager vs
lazy vs static), and the replay timeline of 10k requests (target <= 2 s).

Run: ``python bench/bench_memory.py [--ops 20000] [--requests 10000]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from kda_core.memory import make_pool
from kda_core.studies import memory as sm


def _ops_run(pool, n_ops: int, seed: int) -> tuple[float, int, int]:
    """Random allocs (1..8 entries) and frees (1..8 live entries, any position) on both sides."""
    rng = np.random.default_rng(seed)
    live: dict[str, list[int]] = {"state": [], "kv": []}
    sides = ("state", "kv")
    done = 0
    t0 = time.perf_counter()
    while done < n_ops:
        side = sides[int(rng.integers(2))]
        n = int(rng.integers(1, 9))
        if rng.random() < 0.55:
            v = pool.alloc(side, n)
            if v is not None:
                live[side].extend(v.tolist())
        elif live[side]:
            k = min(n, len(live[side]))
            lst = live[side]
            idx = sorted(rng.choice(len(lst), size=k, replace=False).tolist(), reverse=True)
            vids = [lst[i] for i in idx]
            pool.free(side, np.array(vids, dtype=np.int64))
            for i in idx:  # swap-remove, highest index first
                lst[i] = lst[-1]
                lst.pop()
        done += 1
        if done % 64 == 0:
            pool.on_idle()
    dt = time.perf_counter() - t0
    st = pool.stats()
    return n_ops / dt, st.moves, st.ends_met


def bench_ops(n_ops: int) -> None:
    print(f"alloc/free ops per second ({n_ops} random ops, both sides, 64 MiB real buffer)")
    t, p, s = 64 << 20, 16 << 10, 96 << 10
    for verify in (True, False):
        print(f"  per-entry CRC32 verification {'on' if verify else 'off'}:")
        rows = []
        for name, pool in (
            ("eager", make_pool("eager", t, p, s, verify=verify)),
            ("lazy", make_pool("lazy", t, p, s, verify=verify)),
            ("static", make_pool("static", t, p, s, ratio=0.5, verify=verify)),
        ):
            rate, moves, met = _ops_run(pool, n_ops, 0)
            pool.check_integrity()
            rows.append((name, rate, moves, met))
        base = rows[0][1]
        for name, rate, moves, met in rows:
            print(
                f"  {name:7s} {rate:10.0f} ops/s  x{rate / base:5.2f} vs eager  "
                f"moves {moves:8d}  failed allocs {met}"
            )
    print("  accounting-only pool at K3 sizes (28 GiB, 64-token pages, TP8 bf16 slots):")
    rows = []
    for mode in ("eager", "lazy"):
        pool = make_pool(mode, 28 << 30, 64 * 27648, 29_039_616, store=False)
        rate, moves, met = _ops_run(pool, n_ops, 1)
        rows.append((mode, rate, moves))
    for mode, rate, moves in rows:
        print(f"  {mode:7s} {rate:10.0f} ops/s  x{rate / rows[0][1]:5.2f}  moves {moves:8d}")


def bench_timeline(n_requests: int) -> None:
    n_long = max(n_requests // 20, 1)
    w = sm.shifting_mix(n_chat=n_requests - n_long, n_long=n_long, seed=0)
    print(f"replay timeline, shifting mix of {len(w)} requests (K3 per GPU at TP8, 28 GiB)")
    out = []
    for kind, ratio in (("eager", 0.9), ("lazy", 0.9), ("static", 0.6)):
        t0 = time.perf_counter()
        r = sm.replay(w, kind, ratio)
        dt = time.perf_counter() - t0
        out.append((kind, dt, r))
    for kind, dt, r in out:
        print(
            f"  {kind:7s} {dt:6.3f} s ({'OK' if dt <= 2.0 else 'SLOW'} vs 2 s)  steps {r.makespan}"
            f"  mean conc {r.mean_concurrency:6.1f}  moves {r.total_moves}"
        )
    try:
        from kda_core import workloads

        tr = workloads.bundled_trace("conversation")
    except Exception as e:  # noqa: BLE001 - the trace is optional for this bench
        print(f"  (Mooncake trace unavailable: {e})")
        return
    w2 = sm.from_trace(tr, seconds_per_step=0.25, max_requests=n_requests)
    print(f"replay timeline, Mooncake conversation trace, first {len(w2)} requests")
    for kind in ("eager", "lazy"):
        t0 = time.perf_counter()
        r = sm.replay(w2, kind)
        dt = time.perf_counter() - t0
        print(
            f"  {kind:7s} {dt:6.3f} s ({'OK' if dt <= 2.0 else 'SLOW'} vs 2 s)  steps {r.makespan}"
            f"  mean conc {r.mean_concurrency:6.1f}  moves {r.total_moves}"
        )


def bench_compare() -> None:
    w = sm.shifting_mix()
    t0 = time.perf_counter()
    c = sm.compare(w, ratios=np.geomspace(0.03, 5.0, 12))
    dt = time.perf_counter() - t0
    print(f"unified vs static on the default shifting mix ({len(w)} requests), {dt:.2f} s")
    print(f"  unified (eager)           mean concurrency {c.unified.mean_concurrency:6.1f}")
    print(
        f"  best static r={c.best_ratio:.3f}     mean concurrency "
        f"{c.best_static.mean_concurrency:6.1f}  x{c.unified.mean_concurrency / c.best_static.mean_concurrency:.2f}"  # noqa: E501
    )
    for name, r, res in zip(c.phase_names, c.phase_ratios, c.phase_static):
        print(
            f"  static tuned for {name:13s} r={r:.3f}  mean concurrency "
            f"{res.mean_concurrency:6.1f}  x{c.unified.mean_concurrency / res.mean_concurrency:.2f}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ops", type=int, default=20_000)
    ap.add_argument("--requests", type=int, default=10_000)
    args = ap.parse_args()
    bench_ops(args.ops)
    bench_timeline(args.requests)
    bench_compare()


if __name__ == "__main__":
    main()
