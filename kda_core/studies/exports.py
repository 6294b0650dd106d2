"""The CSV columns behind the apps' figures, built from the studies' results.

Each function takes a study result (a dataclass of numpy arrays) and returns ordered columns
``{name: list}`` of equal length, ready for ``apps.ui.write_csv``: long format (one row per
point of a grid), so a spreadsheet can filter by any key. Only reshaping: nothing is
recomputed here, and nothing imports a UI library. The studies themselves belong to other
rooms; these row builders moved here from the apps' figure functions (issue 18).
"""

from __future__ import annotations

import numpy as np

from kda_core.studies import density as ds

_SWEEP_METRICS = (
    "peak_state_bytes",
    "mean_replay_per_hit",
    "ttft_mean_s",
    "ttft_p50_s",
    "ttft_p95_s",
    "state_hit_rate",
    "token_hit_rate",
    "checkpoints_stored",
    "evictions",
)


def density_sweep_columns(s: ds.DensitySweep) -> dict[str, list]:
    """One row per (interval, budget): every metric of the sweep, the optimum and Pareto flags."""
    rows = [
        (
            int(s.intervals[i]),
            lab,
            *(getattr(s, m)[i, j].item() for m in _SWEEP_METRICS),
            bool(s.optimum[j] == i),
            bool(s.pareto[i, j]),
        )
        for i in range(s.intervals.size)
        for j, lab in enumerate(s.budget_labels)
    ]
    cols = ["interval", "budget", *_SWEEP_METRICS, "optimum", "pareto"]
    return {c: [r[n] for r in rows] for n, c in enumerate(cols)}


def density_pareto_columns(s: ds.DensitySweep) -> dict[str, list]:
    """One row per (interval, budget): peak state memory against state hit, on the frontier?"""
    return {
        "interval": np.repeat(s.intervals, len(s.budget_labels)).tolist(),
        "budget": list(s.budget_labels) * s.intervals.size,
        "peak_state_bytes": s.peak_state_bytes.ravel().tolist(),
        "state_hit_rate": s.state_hit_rate.ravel().tolist(),
        "pareto": s.pareto.ravel().tolist(),
    }
