"""State tiers on a trace: device-only vs + host (HiCache L2) vs + remote (Mooncake Store L3).

The device holds checkpoints in the KDA-aware radix tree (block keys, as ``kda_core.sim``)
under a state byte budget, placed and evicted by the same ``policy`` code. The host and the
remote tier hold *only the last tracked state of each request* (seed 004: "最终 HiCache 通常只
offload 最新边界对应的一个 Mamba state slot"): when a request finishes, its deepest checkpoint
is written through to the host (and on to the remote tier), as SGLang's
``hicache_write_policy="write_through"``; intermediate checkpoints live on the device only and
are lost when evicted there. Each tier is an LRU under a byte capacity.

Per request: the restore point is the longest boundary found on the device tree, the host or
the remote tier (Mooncake block ids are chained, so the id of block p-1 names the whole
p-block prefix). A host / remote hit is loaded onto the device (it becomes a device checkpoint)
and costs ``latency + bytes / bandwidth`` before the prefill of ``[restore, input)`` starts:

    TTFT = load_s + TimeModel.seconds(prefill_flops(restore_at, input_len))

Write-through traffic is counted in bytes moved but not in TTFT (it is asynchronous). MLA KV is
assumed resident on the device (``sim``'s unlimited-KV default); the tiers model the scarce part,
the recurrent state, so bytes moved are checkpoint bytes (Kimi K3, TP8, bf16: 29,039,616 B).

Defaults (per GPU: a 64-checkpoint device budget, host = 2 x device as SGLang's
``hicache_ratio``, PCIe 5.0 host link, Mooncake Transfer Engine remote link) and their sources:
docs/simulator.md. Runs the simulator's sequential schedule.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kda_core._checks import check_int
from kda_core.cache.protocol import PrefixCache
from kda_core.cache.radix import RadixStateCache
from kda_core.sim import costmodel
from kda_core.sim.simulator import checkpoint_bytes, resolve_policy
from kda_core.workloads import Trace, bundled_trace, require_prefix_info

__all__ = [
    "TIER_SETUPS",
    "TierConfig",
    "TierResult",
    "hicache_host_states",
    "simulate_tiers",
]

CKPT_K3_TP8 = checkpoint_bytes("kimi-k3", 8)
TIER_SETUPS = ("device", "device+host", "device+host+remote")


def hicache_host_states(
    device_states: int,
    state_bytes: int,
    *,
    ratio: float = 2.0,
    size_gb: float = 0.0,
    kv_device_bytes: int = 0,
) -> int:
    """State slots of SGLang 0.5.23's HiCache host pool for a KDA / Mamba state
    (``MambaPoolHost.__init__``, ``python/sglang/srt/mem_cache/pool_host/mamba.py``).

    ``size_gb`` > 0 (``--hicache-size``, decimal GB for the KV and state host pools together):
    the state pool's share is ``size_gb * state device bytes / (KV device bytes + state device
    bytes)`` (``_split_hicache_size`` in ``hybrid_cache/hybrid_pool_assembler.py``; the state
    device pool's bytes taken as ``device_states * state_bytes``), in slots of ``state_bytes``
    rounded down. Otherwise ``int(device_states * ratio)`` (``--hicache-ratio``, default 2.0 in
    cache mode). Then one more: ``page_num = size // 1 + 1`` with page size 1.
    """
    dev = check_int("device_states", device_states, 1, 1 << 40)
    per = check_int("state_bytes", state_bytes, 1, 1 << 40)
    kv = check_int("kv_device_bytes", kv_device_bytes, 0, 1 << 50)
    if not (isinstance(size_gb, (int, float)) and 0 <= size_gb <= 1 << 20):
        raise ValueError(f"size_gb must be a number in [0, 2**20], got {size_gb!r}")
    if size_gb > 0:
        share = size_gb * (dev * per) / (kv + dev * per)
        return int(share * 1e9 // per) + 1
    if not (isinstance(ratio, (int, float)) and 0 < ratio <= 1 << 10):
        raise ValueError(f"ratio must be a number in (0, 1024], got {ratio!r}")
    return int(dev * ratio) + 1


@dataclass(slots=True, frozen=True)
class TierConfig:
    device_bytes: int = 64 * CKPT_K3_TP8
    host_bytes: int = 128 * CKPT_K3_TP8
    remote_bytes: int = 128 << 30
    host_bw: float = 50e9
    remote_bw: float = 190e9 / 8
    host_latency_s: float = 10e-6
    remote_latency_s: float = 100e-6
    checkpoint_bytes: int = CKPT_K3_TP8  # one state (``sim.checkpoint_bytes(model, tp)``)
    # what write-through copies to the host and remote tiers: each request's "last" tracked
    # state (the tier model's default) or "all" its states (every checkpoint it inserted, as
    # SGLang's HiCache backs up every node it writes: sgl-project/sglang#39436)
    host_writes: str = "last"

    def __post_init__(self) -> None:
        if not isinstance(self.checkpoint_bytes, int) or not 1 <= self.checkpoint_bytes <= 1 << 40:
            raise ValueError(
                f"checkpoint_bytes must be an integer in [1, 2**40], got {self.checkpoint_bytes!r}"
            )
        for name in ("device_bytes", "host_bytes", "remote_bytes"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 1 << 50:
                raise ValueError(f"{name} must be an integer in [0, 2**50], got {v!r}")
        for name in ("host_bw", "remote_bw"):
            if not 1e6 <= getattr(self, name) <= 1e13:
                raise ValueError(
                    f"{name} must be in [1e6, 1e13] bytes/s, got {getattr(self, name)}"
                )
        if self.host_writes not in ("last", "all"):
            raise ValueError(f"host_writes must be 'last' or 'all', got {self.host_writes!r}")
        for name in ("host_latency_s", "remote_latency_s"):
            if not 0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1] s, got {getattr(self, name)}")


@dataclass(slots=True, frozen=True)
class TierResult:
    setup: str
    n_requests: int
    input_tokens: int
    state_hit_rate: float  # restorable prefix / input tokens
    hits: dict  # restores by tier: device / host / remote
    ttft_mean_s: float
    ttft_p50_s: float
    ttft_p95_s: float
    bytes_loaded: dict  # host -> device, remote -> device
    bytes_written: dict  # device -> host, host -> remote (write-through)
    device_evictions: int
    restore_at: np.ndarray  # per request, tokens
    source: np.ndarray  # per request: 0 none, 1 device, 2 host, 3 remote
    # after the last request: distinct full blocks seen (the resident KV pages: KV is never
    # evicted here) and how many of them end where a state is held: device / host / either
    resident_pages: int = 0
    pages_with_state: dict = field(default_factory=dict)


class _LRU:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.d: OrderedDict[int, int] = OrderedDict()
        self.used = 0

    def put(self, key: int, nbytes: int) -> bool:
        if nbytes > self.capacity:
            return False
        if key in self.d:
            self.d.move_to_end(key)
            return False
        while self.used + nbytes > self.capacity:
            _, n = self.d.popitem(last=False)
            self.used -= n
        self.d[key] = nbytes
        self.used += nbytes
        return True

    def longest(self, blocks: np.ndarray, lo: int) -> int:
        """Longest p > lo (blocks) whose prefix id blocks[p-1] is held; 0 if none."""
        for p in range(len(blocks), lo, -1):
            if int(blocks[p - 1]) in self.d:
                self.d.move_to_end(int(blocks[p - 1]))
                return p
        return 0


def _make_room(cache: PrefixCache, budget: int, need: int) -> int:
    evicted = 0
    while cache.state_bytes + need > budget:
        r = cache.evict(states=1)
        if r.states == 0:
            break
        evicted += r.states
    return evicted


def _tier_lookup(
    blocks: np.ndarray, dev: int, host: _LRU | None, remote: _LRU | None, cfg: TierConfig, ck: int
) -> tuple[int, int, float, str]:
    """Longest restorable prefix (blocks) over device / host / remote -> (blocks, source code
    0 none 1 device 2 host 3 remote, load seconds, tier name)."""
    best, src, load, name = dev, 1 if dev else 0, 0.0, ""
    for tier, code, bw, lat, tname in (
        (host, 2, cfg.host_bw, cfg.host_latency_s, "host"),
        (remote, 3, cfg.remote_bw, cfg.remote_latency_s, "remote"),
    ):
        p = tier.longest(blocks, best) if tier is not None else 0
        if p > best:
            best, src, load, name = p, code, lat + ck / bw, tname
    return best, src, load, name


def _fit_positions(cache: PrefixCache, budget: int, ck: int, m, positions) -> tuple[int, list[int]]:
    """Evict (the restore point locked) until this request's states fit; keep the shallowest
    positions that still fit. -> (states evicted, positions kept)."""
    if m.restore_at:
        cache.lock_handle(m.restore)
    evicted = _make_room(cache, budget, ck * len(positions))
    if m.restore_at:
        cache.lock_handle(m.restore, unlock=True)
    fit = max(0, (budget - cache.state_bytes) // ck)
    return evicted, sorted(positions)[: int(fit)]


def _write_through(
    cfg: TierConfig, ids: list[int], host: _LRU | None, remote: _LRU | None, written: dict
) -> None:
    """Copy a request's states (their last block ids, ascending) to the host and remote tiers:
    its last one only, or all of them (``cfg.host_writes``)."""
    ck = cfg.checkpoint_bytes
    for pid in ids if cfg.host_writes == "all" else ids[-1:]:
        if host is not None and host.put(pid, ck):
            written["host"] += ck
        if remote is not None and remote.put(pid, ck):
            written["remote"] += ck


def _resident_pages(trace: Trace) -> np.ndarray:
    """The distinct ids of every request's full input blocks (a page a state can end on)."""
    per = np.diff(trace.offsets)
    pos = np.arange(len(trace.blocks)) - np.repeat(trace.offsets[:-1], per)
    return np.unique(trace.blocks[pos < np.repeat(trace.input_len // trace.block_size, per)])


def _pages_with_state(cache: PrefixCache, host: _LRU | None, pages: np.ndarray) -> dict:
    """Of ``pages``, how many end where the device tree holds a state (a node with a state
    ends on its last block id), the host holds one (its keys are block ids), or either."""
    device = {int(nd.key[-1]) for nd in cache.export() if nd.has_state and nd.key}
    held = host.d.keys() if host is not None else set()
    on = {"device": device, "host": set(held)}
    on["any"] = on["device"] | on["host"]
    known = set(pages.tolist())
    return {k: len(v & known) for k, v in on.items()}


def simulate_tiers(
    trace: Trace | None = None,
    setup: str = "device+host",
    config: TierConfig | None = None,
    policy: Any = "sglang",
    time_model: costmodel.TimeModel | None = None,
    cap_lookup: bool = False,
) -> TierResult:
    """Run ``trace`` (default: the bundled Mooncake conversation trace) with ``setup`` tiers.
    ``cap_lookup``: look up at most ``input - 1`` tokens, as SGLang does (``simulate``)."""
    if setup not in TIER_SETUPS:
        raise ValueError(f"setup must be one of {TIER_SETUPS}, got {setup!r}")
    trace = bundled_trace("conversation") if trace is None else trace
    if not isinstance(trace, Trace):
        raise ValueError(f"trace must be a workloads.Trace or None, got {type(trace).__name__}")
    require_prefix_info(trace, "state tier hit rates")
    cfg = config or TierConfig()
    tm = time_model or costmodel.TimeModel()
    pol = resolve_policy(policy)
    spec = costmodel.cost_spec("kimi-k3")
    page, ck = trace.block_size, cfg.checkpoint_bytes
    pol.check_page(page)  # once: plan below leaves it out
    cache = RadixStateCache(page, block_keys=True, **pol.cache_options())
    host = _LRU(cfg.host_bytes) if "host" in setup else None
    remote = _LRU(cfg.remote_bytes) if "remote" in setup else None
    n = len(trace)
    restore = np.zeros(n, dtype=np.int64)
    source = np.zeros(n, dtype=np.int64)
    load_s = np.zeros(n)
    loaded = {"host": 0, "remote": 0}
    written = {"host": 0, "remote": 0}
    evictions = 0
    for i in range(n):
        L = int(trace.input_len[i])
        blocks = trace.block_ids(i)[: L // page]
        key = tuple(int(b) for b in blocks)
        seen = blocks[: (L - 1) // page] if cap_lookup else blocks  # the lookup's full blocks
        m = cache.match_prefix(key[: len(seen)])
        dev = m.restore_at // page
        best, src, load_s[i], bytes_from = _tier_lookup(seen, dev, host, remote, cfg, ck)
        if src >= 2:
            loaded[bytes_from] += ck
            evictions += _make_room(cache, cfg.device_bytes, ck)
            if cache.state_bytes + ck <= cfg.device_bytes:
                cache.insert_prefix(key[:best], kv=best * page, states=[(best * page, ck, ck)])
            m = cache.match_prefix(key[: len(seen)])
        restore[i], source[i] = best * page, src
        positions = pol.plan(L, m.token_match, m.restore_at, None, page)  # validated values
        ev, positions = _fit_positions(cache, cfg.device_bytes, ck, m, positions)
        evictions += ev
        if positions:
            cache.insert_prefix(key, kv=len(key) * page, states=[(p, ck, ck) for p in positions])
            _write_through(
                cfg, [int(blocks[p // page - 1]) for p in positions], host, remote, written
            )
    pages = _resident_pages(trace)
    L = trace.input_len
    flops = np.asarray(costmodel.prefill_flops(spec, restore, L), dtype=np.float64)
    ttft = load_s + np.asarray(tm.seconds(flops), dtype=np.float64)
    tot = int(L.sum())
    return TierResult(
        setup,
        n,
        tot,
        float(restore.sum() / tot) if tot else 0.0,
        {k: int((source == c).sum()) for k, c in (("device", 1), ("host", 2), ("remote", 3))},
        float(ttft.mean()) if n else 0.0,
        float(np.percentile(ttft, 50)) if n else 0.0,
        float(np.percentile(ttft, 95)) if n else 0.0,
        loaded,
        written,
        evictions,
        restore,
        source,
        len(pages),
        _pages_with_state(cache, host, pages),
    )
