"""The apps under load, side by side: server time per main action, hub cold start, many clients.

1. Server time: every public ``api_name`` of every available app, called ``--calls`` times
   (default 20) with the page's default inputs. ``direct`` = the callback alone (what the
   server computes), ``client`` = a ``gradio_client`` round trip to the running hub (adds the
   queue and loopback). Median and p95, against the targets (main action <= 1 s, a step
   <= 150 ms).
2. Hub cold start: ``python -m apps`` in a subprocess until ``/`` and every ``/<name>/`` answer
   (target <= 8 s), and its resident memory.
3. Load: ``--clients`` (default 20) threads, each with its own session per app, loop over the
   apps' main actions for ``--seconds`` (default 15; a full run is 60) against that
   hub. Reports calls, errors, latency median / p95, per-session leakage checks (a session's
   history table must list exactly its own calls) and the hub's RSS before / after.

Run: ``python bench/bench_apps.py [--calls 20] [--clients 20] [--seconds 15] [--apps ...]
[--skip-load]``. Loopback only; the hub subprocess is stopped by its own PID.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from apps import ui as common  # noqa: E402  (sets the offline environment first)

STEP_NAMES = ("step", "tick", "next", "prev")  # api names ending like this target 150 ms


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, int(round(q * (len(s) - 1)))))]


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _public_endpoints(demo) -> list[tuple[str, int]]:
    """Public (api_name, fn id) in page order, any "*_reset" endpoint last (it empties the
    session the others need)."""
    cfg = demo.get_config_file()
    eps = [(d["api_name"], d["id"]) for d in cfg["dependencies"] if d["api_visibility"] == "public"]
    return sorted(eps, key=lambda e: e[0].endswith("_reset"))


def _default_args(demo, fn_index: int) -> list:
    import copy

    dep = demo.fns[fn_index]
    return [copy.deepcopy(getattr(c, "value", None)) for c in dep.inputs]


def direct_times(names: list[str], calls: int) -> list[tuple[str, str, list[float], str]]:
    """Callback alone with the default inputs; state-taking steps get the state the main
    action just produced (the first endpoint of an app is its main action)."""
    rows = []
    for name in names:
        mod = common.load_app(name)
        if mod is None:
            continue
        demo = mod.build()
        eps = _public_endpoints(demo)
        state_out: dict[int, object] = {}
        for api, fid in eps:
            dep = demo.fns[fid]
            args = _default_args(demo, fid)
            # feed the session state produced by the main action into later endpoints
            for i, comp in enumerate(dep.inputs):
                if id(comp) in state_out:
                    args[i] = state_out[id(comp)]
            times, err = [], ""
            for _ in range(calls):
                t0 = time.perf_counter()
                try:
                    out = dep.fn(*args)
                except Exception as e:  # report, keep going
                    err = f"{type(e).__name__}: {e}"[:80]
                    break
                times.append(time.perf_counter() - t0)
            else:
                outs = out if isinstance(out, (tuple, list)) else (out,)
                for comp, val in zip(dep.outputs, outs):
                    if type(comp).__name__ == "State":
                        state_out[id(comp)] = val
            rows.append((name, api, times, err))
    return rows


def client_times(url: str, names: list[str], calls: int) -> list[tuple[str, str, list[float], str]]:
    from gradio_client import Client

    rows = []
    for name in names:
        c = Client(f"{url}/{name}/", verbose=False)
        apis = list(c.view_api(print_info=False, return_format="dict")["named_endpoints"])
        apis.sort(key=lambda a: a.endswith("_reset"))
        for api in apis:
            times, err = [], ""
            for _ in range(calls):
                t0 = time.perf_counter()
                try:
                    c.predict(api_name=api)
                except Exception as e:
                    err = f"{type(e).__name__}: {e}"[:80]
                    break
                times.append(time.perf_counter() - t0)
            rows.append((name, api.lstrip("/"), times, err))
    return rows


def start_hub(port: int) -> tuple[subprocess.Popen, float]:
    env = dict(os.environ)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "apps", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, t0


def wait_hub(
    url: str, names: list[str], proc: subprocess.Popen, t0: float, timeout: float = 120.0
) -> tuple[float, float]:
    """Seconds until ``/`` answers, and until every app page answers."""
    first = None
    pending = ["", *[f"{n}/" for n in names]]
    while pending:
        if proc.poll() is not None:
            raise RuntimeError(f"hub exited: {proc.stderr.read()[-2000:]}")
        if time.perf_counter() - t0 > timeout:
            raise RuntimeError("hub did not come up")
        try:
            with urllib.request.urlopen(f"{url}/{pending[0]}", timeout=5) as r:  # noqa: S310
                r.read()
            if pending[0] == "" and first is None:
                first = time.perf_counter() - t0
            pending.pop(0)
        except OSError:
            time.sleep(0.05)
    return float(first or 0.0), time.perf_counter() - t0


def load_loop(url: str, names: list[str], clients: int, seconds: float) -> dict:
    from gradio_client import Client

    lat: list[float] = []
    errors: list[str] = []
    leaks: list[str] = []
    checked = [0]
    lock = threading.Lock()
    stop_at = [0.0]
    ready = threading.Barrier(clients + 1)

    def worker(k: int) -> None:
        sess = {}
        try:
            for n in names:
                c = Client(f"{url}/{n}/", verbose=False)
                api = next(
                    iter(c.view_api(print_info=False, return_format="dict")["named_endpoints"])
                )
                sess[n] = (c, api)
        except Exception as e:
            with lock:
                errors.append(f"client {k} connect: {e}")
        ready.wait()
        own_calls = {n: 0 for n in names}
        i = k
        while time.perf_counter() < stop_at[0] and sess:
            n = names[i % len(names)]
            i += 1
            if n not in sess:
                continue
            c, api = sess[n]
            t0 = time.perf_counter()
            try:
                out = c.predict(api_name=api)
            except Exception as e:
                with lock:
                    errors.append(f"{n}: {type(e).__name__}: {str(e)[:80]}")
                continue
            dt = time.perf_counter() - t0
            own_calls[n] += 1
            # leakage check: a history table must list exactly this session's calls
            hist = next(
                (
                    o
                    for o in (out if isinstance(out, (list, tuple)) else [out])
                    if isinstance(o, str) and "in this session" in o
                ),
                None,
            )
            with lock:
                lat.append(dt)
                if hist is not None:
                    checked[0] += 1
                    rows = len(re.findall(r"^\| (\d+) \|", hist, flags=re.M))
                    own = own_calls[n]  # more rows than own calls = another session's rows
                    if rows > own or (rows < own and rows < 10):  # tables keep >= 10 rows
                        leaks.append(f"{n} client {k}: {rows} rows after {own_calls[n]} own calls")

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(clients)]
    for t in threads:
        t.start()
    ready.wait()
    stop_at[0] = time.perf_counter() + seconds
    for t in threads:
        t.join(timeout=seconds + 300)
    return {"latency": lat, "errors": errors, "leaks": leaks, "checked": checked[0]}


def _print_times(title: str, rows) -> None:
    print(f"\n== {title}")
    print(f"{'app':<20} {'api_name':<30} {'n':>3} {'median':>9} {'p95':>9} {'target':>7}  ok")
    for name, api, times, err in rows:
        target = 0.15 if api.endswith(STEP_NAMES) else 1.0
        if not times:
            print(f"{name:<20} {api:<30} {0:>3} {'-':>9} {'-':>9} {target:>6.2f}s  ERROR {err}")
            continue
        med, p95 = statistics.median(times), _pct(times, 0.95)
        ok = "yes" if p95 <= target else "NO"
        extra = f"  ({err})" if err else ""
        print(
            f"{name:<20} {api:<30} {len(times):>3} {med * 1e3:>7.0f}ms {p95 * 1e3:>7.0f}ms "
            f"{target:>6.2f}s  {ok}{extra}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--apps", nargs="*", default=None)
    ap.add_argument("--skip-load", action="store_true")
    args = ap.parse_args()
    wanted = args.apps or [a.name for a in common.APPS]
    names = [n for n in wanted if common.load_app(n) is not None]
    print(f"apps: {', '.join(names)}  (cpus: {os.cpu_count()})")

    _print_times(
        f"direct callback, default inputs, {args.calls} calls", direct_times(names, args.calls)
    )

    port = common.free_port()
    url = f"http://127.0.0.1:{port}"
    proc, t0 = start_hub(port)
    try:
        first, all_up = wait_hub(url, [n for n in names], proc, t0)
        rss0 = _rss_mb(proc.pid)
        print(
            f"\n== hub cold start: '/' after {first:.2f} s, all {len(names)} app pages after "
            f"{all_up:.2f} s (target 8 s: {'yes' if all_up <= 8 else 'NO'}); RSS "
            f"{rss0:.0f} MB"
        )
        _print_times(
            f"gradio_client round trip through the hub, {args.calls} calls",
            client_times(url, names, args.calls),
        )
        if not args.skip_load:
            rss1 = _rss_mb(proc.pid)
            r = load_loop(url, names, args.clients, args.seconds)
            rss2 = _rss_mb(proc.pid)
            lat = r["latency"]
            print(f"\n== load: {args.clients} clients x {len(names)} apps for {args.seconds:g} s")
            if lat:
                print(
                    f"calls {len(lat)} ({len(lat) / args.seconds:.1f}/s), errors "
                    f"{len(r['errors'])}, latency median {statistics.median(lat):.2f} s, p95 "
                    f"{_pct(lat, 0.95):.2f} s"
                )
            else:
                print(f"no successful calls; errors {len(r['errors'])}")
            print(
                f"session leakage checks: {r['checked']} histories checked, {len(r['leaks'])} leaks"
            )
            print(f"hub RSS before {rss1:.0f} MB, after {rss2:.0f} MB (x{rss2 / rss1:.2f})")
            for e in (r["errors"] + r["leaks"])[:10]:
                print("  !", e)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    main()
