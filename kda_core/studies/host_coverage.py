"""Companion coverage: of the KV pages a cache holds, how many end where a state is held.

A hybrid model resumes a prefix only where its recurrent state was saved, so a KV page whose
prefix has no state is reusable only by replaying up to it from an earlier state. SGLang's
HiCache backs KV pages up to the host next to a much smaller mamba host pool; once a prefix's
last state is evicted, its KV rows on the host "sit there as dead memory"
(sgl-project/sglang#39436). ``host_coverage`` runs the lab's tier
model (``kda_core.sim.tiers``: a device tree under a state budget, a host LRU of each
request's last state) at several host sizes, sized as HiCache sizes its mamba host pool
(``hicache_host_states``: ``--hicache-ratio`` or ``--hicache-size``), and reports, after the
last request, the share of the resident KV pages (every full block seen: the tier model never
evicts KV) whose prefix ends on a state held on the device, on the host, or on either.
docs/hit_reasons.md ("Companion coverage") says what is left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kda_core._checks import check_int
from kda_core.sim import checkpoint_bytes
from kda_core.sim.simulator import DEFAULT_TP
from kda_core.sim.tiers import TierConfig, hicache_host_states, simulate_tiers
from kda_core.workloads import Trace, require_prefix_info

__all__ = ["HostCoverage", "host_coverage"]

_UNITS = ("ratio", "gb")
_MAX_SIZES = 12


@dataclass(frozen=True, slots=True, eq=False)
class HostCoverage:
    """Per host size (``sizes``, in ``unit``: HiCache ratio or decimal GB; 0 = no host):
    ``host_states`` slots, and after the last request the shares of the ``resident_pages``
    whose prefix ends on a state on the device, the host, or either; ``state_hit_rate`` is
    the restored share of the input tokens over the run."""

    trace_name: str
    n_requests: int
    unit: str
    sizes: np.ndarray
    device_states: int
    checkpoint_bytes: int
    host_states: np.ndarray
    resident_pages: int
    device_share: np.ndarray
    host_share: np.ndarray
    any_share: np.ndarray
    state_hit_rate: np.ndarray


def _host_slots(size: float, unit: str, device: int, ckpt: int, kv_bytes: int) -> int:
    if size == 0:
        return 0
    if unit == "ratio":
        return hicache_host_states(device, ckpt, ratio=size)
    return hicache_host_states(device, ckpt, size_gb=size, kv_device_bytes=kv_bytes)


def _check_sizes(sizes: Sequence[float], unit: str) -> np.ndarray:
    if unit not in _UNITS:
        raise ValueError(f"unit must be one of {_UNITS}, got {unit!r}")
    try:
        arr = np.asarray(sizes, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(f"sizes must be numbers, got {sizes!r}") from None
    hi = 1024.0 if unit == "ratio" else float(1 << 20)
    if not 1 <= len(arr) <= _MAX_SIZES or not np.all((arr >= 0) & (arr <= hi)):
        raise ValueError(f"sizes must be 1 to {_MAX_SIZES} numbers in [0, {hi:g}], got {sizes!r}")
    return np.unique(arr)


def host_coverage(
    trace: Trace,
    *,
    sizes: Sequence[float] = (0, 0.5, 1, 2, 4, 8),
    unit: str = "ratio",
    device_states: int = 64,
    kv_device_bytes: int = 0,
    model: str = "kimi-k3",
    tp: int = DEFAULT_TP,
    policy: object = "sglang",
) -> HostCoverage:
    """The tier model at each host size (sorted, duplicates dropped). ``device_states``: the
    device's state budget in checkpoints of ``sim.checkpoint_bytes(model, tp)``;
    ``kv_device_bytes``: the KV device pool, which takes its share of a ``"gb"`` host size
    (HiCache splits ``--hicache-size`` between the KV and state host pools by device bytes).
    Lookups of at most ``input - 1`` tokens, as both engines do. ``ValueError`` for a trace
    without prefix information or a size out of range."""
    if not isinstance(trace, Trace):
        raise ValueError(f"trace must be a workloads.Trace, got {type(trace).__name__}")
    require_prefix_info(trace, "the share of KV pages with a state")
    arr = _check_sizes(sizes, unit)
    dev = check_int("device_states", device_states, 1, 1 << 20)
    kv = check_int("kv_device_bytes", kv_device_bytes, 0, 1 << 50)
    ck = checkpoint_bytes(model, tp)
    slots = np.array([_host_slots(float(s), unit, dev, ck, kv) for s in arr], dtype=np.int64)
    shares = np.zeros((3, len(arr)))
    hit = np.zeros(len(arr))
    pages = 0
    for j, n in enumerate(slots.tolist()):
        cfg = TierConfig(device_bytes=dev * ck, host_bytes=n * ck, checkpoint_bytes=ck)
        setup = "device+host" if n else "device"
        r = simulate_tiers(trace, setup, cfg, policy, cap_lookup=True)
        pages = r.resident_pages
        for k, name in enumerate(("device", "host", "any")):
            shares[k, j] = r.pages_with_state[name] / max(pages, 1)
        hit[j] = r.state_hit_rate
    return HostCoverage(trace.name, len(trace), unit, arr, dev, ck, slots, pages, *shares, hit)
