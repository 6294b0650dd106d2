"""Render every blog figure: ``python -m plots [--out DIR] [--format png|svg|both] [--lang ...]``.

Each figure's study is computed once and drawn in every requested language (default: English
and Chinese); one progress line per figure as it completes (``[i/n]`` counts completed figures,
then name, seconds, files). ``--jobs 2`` (the default on a multi-core machine) renders in two
worker processes, so figures may complete out of list order; the figures whose studies share
simulations (checkpoint density and retention policies) run in the same worker. A figure whose
module cannot be imported is reported and skipped (exit status 1 at the end, so CI notices).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import importlib
import multiprocessing
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from plots import style

# Order: the core idea first, then one figure per concept.
SCRIPTS: tuple[str, ...] = (
    "plot_k3_memory_vs_context",
    "plot_chunk_agreement",
    "plot_affine_composition",
    "plot_prefix_replay",
    "plot_int8_checkpoint",
    "plot_checkpoint_quality",
    "plot_checkpoint_density",
    "plot_retention_policies",
    "plot_unified_memory",
    "plot_speculative_memory",
    "plot_spec_hits",
    "plot_state_tiers",
    "plot_hit_reasons",
    "plot_kv_page_coverage",
    "plot_context_parallel",
    "plot_fleet_routing",
    "plot_plan",
)
# Scripts rendered by one worker, in this order (the second reuses the first's simulations).
TOGETHER: tuple[tuple[str, ...], ...] = (("plot_checkpoint_density", "plot_retention_policies"),)


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m plots", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=style.DEFAULT_OUT, help="output folder")
    p.add_argument("--format", choices=tuple(style.FORMATS), default="png")
    p.add_argument("--dpi", type=int, default=style.DEFAULT_DPI)
    p.add_argument("--lang", choices=(*style.LANGS, "both"), default="both")
    p.add_argument("--quick", action="store_true", help="small study parameters")
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="processes")
    p.add_argument("--only", nargs="+", metavar="NAME", help="figure names (see --list)")
    p.add_argument("--list", action="store_true", help="list the figure scripts and exit")
    args = p.parse_args(argv)
    if not 30 <= args.dpi <= 600:
        p.error(f"--dpi must be in [30, 600], got {args.dpi}")
    if not 1 <= args.jobs <= 8:
        p.error(f"--jobs must be in [1, 8], got {args.jobs}")
    return args


def _render_group(names: tuple[str, ...], args: argparse.Namespace) -> list[tuple]:
    """Render ``names`` in order; one (name, study s, draw s, files, error) row per script."""
    langs = style.LANGS if args.lang == "both" else (args.lang,)
    rows = []
    for name in names:
        t0 = time.perf_counter()
        try:
            mod = importlib.import_module(f"plots.{name}")
        except ImportError as e:  # a study still being written
            rows.append((name, 0.0, 0.0, 0, str(e)))
            continue
        data = mod.compute(quick=args.quick)
        t1 = time.perf_counter()
        paths = style.render(
            mod.NAME, data, mod.make_figure, args.out, style.FORMATS[args.format], args.dpi, langs
        )
        rows.append((name, t1 - t0, time.perf_counter() - t1, len(paths), None))
    return rows


def _groups(names: list[str]) -> list[tuple[str, ...]]:
    out, seen = [], set()
    for group in TOGETHER:
        g = tuple(n for n in group if n in names)
        if g:
            out.append(g)
            seen.update(g)
    out += [(n,) for n in names if n not in seen]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    names = list(SCRIPTS)
    if args.list:
        print("\n".join(n.removeprefix("plot_") for n in names))
        return 0
    if args.only:
        wanted = {n.removeprefix("plot_") for n in args.only}
        unknown = wanted - {n.removeprefix("plot_") for n in names}
        if unknown:
            print(f"unknown figure(s): {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        names = [n for n in names if n.removeprefix("plot_") in wanted]
    groups = _groups(names)
    t_all = time.perf_counter()
    done, failed, n_files = 0, 0, 0
    width = max(len(n) for n in names) - len("plot_")

    def report(rows: list[tuple]) -> None:
        nonlocal done, failed, n_files
        for name, t_study, t_draw, files, error in rows:
            done += 1
            label = f"[{done}/{len(names)}] {name.removeprefix('plot_'):<{width}}"
            if error is not None:
                failed += 1
                print(f"{label}  skipped: {error}", flush=True)
                continue
            n_files += files
            print(
                f"{label}  {t_study + t_draw:5.1f} s "
                f"(study {t_study:4.1f} s, draw {t_draw:4.1f} s)  {files} files",
                flush=True,
            )

    jobs = min(args.jobs, len(groups))
    if jobs == 1:
        for g in groups:
            report(_render_group(g, args))
    else:
        methods = multiprocessing.get_all_start_methods()
        ctx = multiprocessing.get_context("fork" if "fork" in methods else None)
        with cf.ProcessPoolExecutor(jobs, mp_context=ctx) as pool:
            futures = [pool.submit(_render_group, g, args) for g in groups]
            for fut in cf.as_completed(futures):
                report(fut.result())
    total = time.perf_counter() - t_all
    skipped = f", {failed} skipped" if failed else ""
    print(f"{n_files} files in {args.out} in {total:.1f} s ({jobs} jobs){skipped}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
