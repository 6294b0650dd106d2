"""Context parallelism for KDA on real gloo ranks, side by side in one run.

    python bench/bench_cp.py [--T 32768] [--H 8] [--K 128] [--repeat 3] [--dtype float32]

One sequence of T tokens (one KDA layer: H heads, K = V) on P = 1 and P = 2 worker processes of
a torch.distributed gloo group on 127.0.0.1 (each rank one thread: one rank stands for one
device). Prints, per P and scan: the slowest rank's wall time (median of --repeat) and its
ratio to one rank, each rank's phases (local pass, scan incl. waiting, finish), the bytes each
rank hands to gloo, and what a ring all-gather of the same context's MLA KV (one Kimi K3 MLA
layer, bf16) would make each rank send. Then the per-step costs this run measured (in-process
map compose / apply, gloo latency and bandwidth from a ping-pong, per-token pass costs) and the
cost model of kda_core.studies.context_parallel extrapolated to P = 8..64 from them.

The machine is shared: the load average is printed before and after; compare ratios within one
run, not seconds across runs.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one rank = one thread, here as in workers
os.environ.setdefault("KDA_THREADS", "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kda_core.kda import cp  # noqa: E402
from kda_core.studies import context_parallel as study  # noqa: E402


def inputs(T: int, H: int, K: int, dtype) -> list[np.ndarray]:
    # the study's own inputs (seeded, K3's gate)
    x = study.random_inputs(min(T, 4096), H=H, K=K, V=K, seed=0)  # tiled: the study caps T at 4096
    reps = -(-T // x.q.shape[0])
    arrs = [np.concatenate([a] * reps)[:T] for a in (x.q, x.k, x.v, x.g, x.beta)]
    return [a.astype(dtype) for a in arrs]


def median_time(fn, repeat: int) -> float:
    """Median CPU seconds of ``fn`` (process time: on a loaded machine the work, not the wait)."""
    fn()
    out = []
    for _ in range(repeat):
        t = time.process_time()
        fn()
        out.append(time.process_time() - t)
    return statistics.median(out)


def in_process_costs(H: int, K: int, dtype, repeat: int) -> dict[str, float]:
    rng = np.random.default_rng(0)
    M = [rng.standard_normal((H, K, K)).astype(dtype) * 0.05 for _ in range(2)]
    b = [rng.standard_normal((H, K, K)).astype(dtype) for _ in range(2)]
    e0, e1 = cp.Element(M[0], b[0]), cp.Element(M[1], b[1])
    return {
        "compose_s": median_time(lambda: cp.combine(e0, e1), 5 * repeat),
        "apply_s": median_time(lambda: e1.apply(b[0]), 5 * repeat),
    }


def run_group(group, plan, arrs, S0, scan, scale, repeat) -> list[list[dict]]:
    return [group.run_plan(plan, arrs, S0, scan, scale, 64) for _ in range(repeat)]


def summarize(runs: list[list[dict]]) -> dict:
    """Median over repeats: the slowest rank's wall total; each rank's wall and CPU phases; the
    CPU critical path max_r(local + finish) (what dedicated cores would take, scan aside)."""
    P = len(runs[0])

    def med(key: str, i: int) -> dict:
        return {k: statistics.median(run[i][key][k] for run in runs) for k in runs[0][i][key]}

    wall = statistics.median(max(r["seconds"]["total"] for r in run) for run in runs)
    cpu_path = statistics.median(
        max(r["cpu_seconds"]["local"] + r["cpu_seconds"]["finish"] for r in run) for run in runs
    )
    return {
        "wall": wall,
        "cpu_path": cpu_path,
        "phases": [med("seconds", i) for i in range(P)],
        "cpu": [med("cpu_seconds", i) for i in range(P)],
        "bytes": [r["bytes_sent"] for r in runs[0]],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--T", type=int, default=32768)
    ap.add_argument("--H", type=int, default=8)
    ap.add_argument("--K", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    args = ap.parse_args()
    try:
        import torch.distributed  # noqa: F401

        from kda_core.kda.cp_gloo import GlooGroup
    except ImportError as e:
        print(f"bench_cp: skipped, real ranks need torch ({e})")
        return

    T, H, K, dtype = args.T, args.H, args.K, np.dtype(args.dtype)
    print(
        f"KDA context parallel, one layer: T={T} H={H} K=V={K} {dtype.name}; "
        f"median of {args.repeat}; load average {os.getloadavg()[0]:.2f}"
    )
    arrs = inputs(T, H, K, dtype)
    S0 = np.zeros((1, H, K, K), dtype)
    scale = K**-0.5
    t = time.perf_counter()
    with GlooGroup(1) as g1, GlooGroup(2) as g2:
        print(f"3 gloo workers up in {time.perf_counter() - t:.1f} s")
        weight = cp.balance_weight(T, H, K, K)  # what context_parallel's default split uses
        plan1, plan2 = cp.make_plan(T, 1), cp.make_plan(T, 2, None, 64, weight)
        print(f"P=2 split {plan2.bounds} (rank 0, plain pass: x{weight:.2f} the tokens)")
        res = {("1", "-"): [], ("2", "allgather"): [], ("2", "logdepth"): []}
        for _ in range(args.repeat):  # interleaved, so load drifts hit every row alike
            res[("1", "-")] += run_group(g1, plan1, arrs, S0, "logdepth", scale, 1)
            for scan in cp.SCANS:
                res[("2", scan)] += run_group(g2, plan2, arrs, S0, scan, scale, 1)
        o1 = np.concatenate([r["o"] for r in res[("1", "-")][-1]])
        errs = {
            scan: float(
                np.linalg.norm(np.concatenate([r["o"] for r in res[("2", scan)][-1]]) - o1)
                / np.linalg.norm(o1)
            )
            for scan in cp.SCANS
        }
        small = g2.pingpong(8, 20)
        big_n = 4 << 20
        big = g2.pingpong(big_n, 5)
    costs_ip = in_process_costs(H, K, dtype, args.repeat)
    print_table(res, T, errs)
    latency = small / 2
    one, two = summarize(res[("1", "-")]), summarize(res[("2", "logdepth")])
    T1 = T - plan2.bounds[1]
    costs = study.StepCosts(
        chunked_s_per_token=one["cpu"][0]["local"] / T,
        local_s_per_token=two["cpu"][1]["local"] / T1,
        finish_s_per_token=two["cpu"][1]["finish"] / T1,
        latency_s=latency,
        bandwidth_Bps=big_n / max(big / 2 - latency, 1e-9),
        H=H,
        K=K,
        V=K,
        itemsize=dtype.itemsize,
        source="bench_cp.py (CPU seconds per token; gloo ping-pong wall time)",
        **costs_ip,
    )
    print("\nmeasured per-step costs (pass these to studies.context_parallel.cost_model):")
    print(f"  {costs}")
    print_model(costs, T)
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


def print_table(res: dict, T: int, errs: dict[str, float]) -> None:
    kv_tok = study.mla_layer_bytes_per_token()
    one = summarize(res[("1", "-")])
    print(
        f"\n{'P':>2} {'scan':10} {'wall s':>8} {'vs 1':>6} {'cpu path s':>10} {'vs 1':>6}  "
        "per rank: wall local/scan/finish s (cpu local/finish s), bytes sent "
        "| MLA KV all-gather bytes/rank"
    )
    for (P, scan), runs in res.items():
        s = summarize(runs)
        ranks = "; ".join(
            f"r{i} {ph['local']:.2f}/{ph['scan']:.3f}/{ph['finish']:.3f} "
            f"({c['local']:.2f}/{c['finish']:.3f}) {b / 2**20:.2f} MiB"
            for i, (ph, c, b) in enumerate(zip(s["phases"], s["cpu"], s["bytes"]))
        )
        kv = study.kv_allgather_bytes(T, int(P), kv_tok)
        print(
            f"{P:>2} {scan:10} {s['wall']:8.3f} {one['wall'] / s['wall']:5.2f}x "
            f"{s['cpu_path']:10.3f} {one['cpu_path'] / s['cpu_path']:5.2f}x  {ranks} | "
            f"{kv / 2**20:.1f} MiB"
        )
    print(
        "P=2 outputs vs P=1, relative error: " + ", ".join(f"{k} {v:.1e}" for k, v in errs.items())
    )
    print(
        "wall: the slowest rank, as measured (load-dependent); cpu path: max over ranks of "
        "the local pass + finish CPU seconds (dedicated cores, scan aside)"
    )


def print_model(costs: study.StepCosts, T: int) -> None:
    m = study.cost_model(costs, T=T, P_values=(1, 2, 8, 16, 32, 64))
    print(
        f"\ncost model at T={T} (from the costs above): P, modelled speed-up allgather / "
        "logdepth, max bytes sent per rank allgather / logdepth / MLA KV"
    )
    for i, P in enumerate(m.P.tolist()):
        print(
            f"  P={P:>2}  x{m.speedup['allgather'][i]:5.2f} / x{m.speedup['logdepth'][i]:5.2f}  "
            f"{m.bytes_sent['allgather'][i] / 2**20:7.1f} / "
            f"{m.bytes_sent['logdepth'][i] / 2**20:5.1f} / {m.kv_bytes[i] / 2**20:6.1f} MiB"
        )


if __name__ == "__main__":
    main()
