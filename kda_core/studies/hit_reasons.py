"""Why a request got no hit: per request of a trace, the cached tokens SGLang and vLLM would
report (the simulator under ``make("sglang")`` / ``make("vllm")``, vLLM's block from
``sizing.vllm_plan``, lookups of at most ``input - 1`` tokens) and, when that is at most half
the token match (the prefix any earlier request shares), the first reason that holds:
``first_occurrence``, ``below_one_block``, ``state_in_unique_tokens`` / ``no_state_at_branch``
(short with unlimited budgets too: placement decides; the request is the first to leave the
path there and the earlier requests' next state lies past what it shares, or else no state was
saved where it leaves), else ``evicted_<budget>`` (with a host tier: ``host_last_state_only``
/ ``evicted_host_budget``). Every request, short or not, also carries the facts that explain
its cached tokens (``hit_requests.explain`` adds them up): who saved the state it restores
from, the nearest deeper state and who saved it, and the budget that took what an unlimited
run restores. The rules, their sources and what is left out: docs/hit_reasons.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from kda_core import sizing
from kda_core._checks import check_int
from kda_core.cache import policy as policy_mod
from kda_core.sim import checkpoint_bytes, simulate
from kda_core.sim.simulator import DEFAULT_TP
from kda_core.sim.tiers import TierConfig, simulate_tiers
from kda_core.studies._hit_paths import path_facts, prefix_points
from kda_core.workloads import Trace, ideal_prefix_tokens, require_prefix_info

__all__ = ["ENGINES", "REASONS", "EngineHits", "HitReasons", "hit_reasons"]

ENGINES = ("sglang", "vllm")
REASONS = (
    "hit",
    "first_occurrence",
    "below_one_block",
    "state_in_unique_tokens",
    "no_state_at_branch",
    "evicted_state_budget",
    "evicted_kv_budget",
    "evicted_unified_budget",
    "host_last_state_only",
    "evicted_host_budget",
    "lost_to_speculative_decoding",
)
_BUDGETS = ("state_budget_bytes", "kv_budget_bytes", "unified_budget_bytes")
_EVICTED = dict(zip(_BUDGETS, REASONS[5:8], strict=True))


@dataclass(frozen=True, slots=True, eq=False)
class EngineHits:
    """One engine on a trace: ``cached [N]`` (under the budgets), ``cached_unlimited [N]``,
    ``reason [N]`` (int8 index into ``REASONS``, 0 = not short), ``unit`` (tokens of the hit
    grid) and the policy's parameters.

    The facts of the run without budgets, per request: ``source`` (the request that first
    saved the state at ``cached_unlimited``, -1: none), ``deeper`` (the nearest state past it
    on a path sharing the whole token match, 0: none) and ``deeper_source``; ``evicted_by``:
    when ``cached < cached_unlimited``, the ``REASONS`` index of the budget that took it
    (``evicted_*`` or, with a host tier, ``host_last_state_only`` / ``evicted_host_budget``),
    else 0. ``cached_no_drafts``: with speculative decoding on, the cached tokens of the same
    run with drafts off (None: drafts off)."""

    engine: str
    unit: int
    params: dict
    cached: np.ndarray
    cached_unlimited: np.ndarray
    reason: np.ndarray
    source: np.ndarray | None = None
    deeper: np.ndarray | None = None
    deeper_source: np.ndarray | None = None
    evicted_by: np.ndarray | None = None
    cached_no_drafts: np.ndarray | None = None


@dataclass(frozen=True, slots=True, eq=False)
class HitReasons:
    """Both engines on one trace, and the shares per reason.

    ``token_match [N]``: the prefix shared with any earlier request; ``known_branch [N]``: the
    token match ended where the prefix had already branched (or an earlier request ended);
    ``sharer [N]``: the first earlier request sharing the whole token match (-1: none).
    ``share_arrays()``: per engine and reason, the share of requests and the share of the
    uncached input tokens (``input - cached``, the prefill each reason costs)."""

    trace_name: str
    block_size: int
    input_len: np.ndarray
    token_match: np.ndarray
    known_branch: np.ndarray
    budgets: dict
    sglang: EngineHits
    vllm: EngineHits
    sharer: np.ndarray | None = None

    def share_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(requests, uncached tokens): shares ``[len(ENGINES), len(REASONS)]``, rows summing
        to 1 (0 for an empty trace)."""
        req = np.zeros((len(ENGINES), len(REASONS)))
        tok = np.zeros((len(ENGINES), len(REASONS)))
        for row, name in enumerate(ENGINES):
            e = getattr(self, name)
            uncached = (self.input_len - e.cached).astype(np.float64)
            req[row] = np.bincount(e.reason, minlength=len(REASONS)) / max(len(e.reason), 1)
            tokens = np.bincount(e.reason, weights=uncached, minlength=len(REASONS))
            tok[row] = tokens / max(float(uncached.sum()), 1.0)
        return req, tok


def _check_sglang(params: dict | None) -> policy_mod.SGLangPolicy:
    try:
        return policy_mod.make("sglang", **(params or {}))  # type: ignore[return-value]
    except (TypeError, ValueError) as e:
        raise ValueError(f"sglang: {e}") from None


def _check_vllm(params: dict | None, model: str, tp: int) -> policy_mod.VLLMPolicy:
    p = dict(params or {})
    if p.get("block_size") is None:
        plan = sizing.vllm_plan(model, 1 << 34, tp=tp, max_model_len=1 << 17)
        p["block_size"] = plan.block_size
    try:
        return policy_mod.make("vllm", **p)  # type: ignore[return-value]
    except (TypeError, ValueError) as e:
        raise ValueError(f"vllm: {e}") from None


def _units(sg: policy_mod.SGLangPolicy, vl: policy_mod.VLLMPolicy, page: int) -> tuple[int, int]:
    """(SGLang's checkpoint grid, vLLM's hit unit) on ``page``-token trace blocks."""
    g = math.lcm(max(sg.grid, page), page)
    B = int(vl.block_size)  # type: ignore[arg-type]
    return g, (math.lcm(vl.match_unit, page) if vl.partial_hits else B)


def _short(cached: np.ndarray, match: np.ndarray) -> np.ndarray:
    return 2 * cached <= match


def _classify(
    e: dict, match: np.ndarray, cap: np.ndarray, known: np.ndarray, unit: int, deeper: np.ndarray
) -> np.ndarray:
    """The reason per request (rules in the module docstring). ``e``: cached arrays by run
    ("budgets", "unlimited", and one per budget name when several are set); ``deeper``: the
    nearest state past the unlimited restore point (``PathFacts.deeper``, 0: none)."""
    short = _short(e["budgets"], match)
    reason = np.zeros(len(match), dtype=np.int8)
    placement = _short(e["unlimited"], match)
    budget_code = _budget_codes(e, lambda c: _short(c, match))
    rules = (
        (match == 0, "first_occurrence"),
        (cap < unit, "below_one_block"),
        (~_short(e.get("no_drafts", e["budgets"]), match), "lost_to_speculative_decoding"),
        (placement & ~known & (deeper > match), "state_in_unique_tokens"),
        (placement, "no_state_at_branch"),
    )
    todo = short.copy()
    for mask, name in rules:
        hit = todo & mask
        reason[hit] = REASONS.index(name)
        todo &= ~mask
    reason[todo] = budget_code[todo]
    return reason


def _budget_codes(e: dict, lacks: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Which budget a request's loss is charged to (``lacks(cached)``: the run lacks what it
    is charged for). With a host tier: a host that never evicts lacks it too
    (``host_last_state_only``) or not (the host's own capacity evicted it). Else the first
    budget whose run alone lacks it."""
    if "host_unlimited" in e:
        code = np.where(lacks(e["host_unlimited"]), *(REASONS.index(r) for r in REASONS[8:10]))
        return code.astype(np.int8)
    n = len(e["unlimited"])
    code = np.full(n, REASONS.index(_EVICTED[e["order"][0]]), dtype=np.int8)
    for name in reversed(e["order"]):
        if name in e:
            code[lacks(e[name])] = REASONS.index(_EVICTED[name])
    return code


def _evicted_by(e: dict) -> np.ndarray:
    """Per request, the budget that took what the unlimited run restores (0: nothing)."""
    full = e["unlimited"]
    code = _budget_codes(e, lambda c: c < full)
    return np.where(e["budgets"] < full, code, 0).astype(np.int8)


def _check_host(budgets: dict, host_bytes: Any, ckpt: int) -> TierConfig | None:
    if host_bytes is None:
        return None
    host = check_int("host_bytes", host_bytes, 0, 1 << 50)
    sb = budgets["state_budget_bytes"]
    if sb is None or budgets["kv_budget_bytes"] is not None or budgets["unified_budget_bytes"]:
        raise ValueError("host_bytes needs state_budget_bytes (the device tier) and no KV budget")
    if isinstance(sb, bool) or not isinstance(sb, (int, float)) or not 0 <= sb <= 1 << 50:
        raise ValueError(f"state_budget_bytes must be in [0, 2**50] with a host tier, got {sb!r}")
    device = int(sb)
    return TierConfig(device_bytes=device, host_bytes=host, checkpoint_bytes=ckpt)


def _run_host(trace: Trace, pol: policy_mod.Policy, cfg: TierConfig) -> dict:
    """SGLang with a host tier (``sim.tiers``: the host keeps each request's last state):
    cached tokens at this host size and with an unlimited host."""
    big = replace(cfg, host_bytes=1 << 50)
    return {
        "budgets": simulate_tiers(trace, "device+host", cfg, pol, cap_lookup=True).restore_at,
        "host_unlimited": simulate_tiers(
            trace, "device+host", big, pol, cap_lookup=True
        ).restore_at,
    }


def _run_engine(trace: Trace, pol: policy_mod.Policy, model: str, tp: int, budgets: dict) -> dict:
    """Cached tokens under the budgets, without them, and per budget alone (several set)."""

    def cached(b: dict) -> np.ndarray:
        r = simulate(trace, pol, model=model, tp=tp, outputs=False, cap_lookup=True, **b)
        return r.series.restore_at

    given = {k: v for k, v in budgets.items() if v is not None}
    out: dict[str, Any] = {"order": [k for k in _BUDGETS if k in given] or ["state_budget_bytes"]}
    out["unlimited"] = cached({})
    out["budgets"] = cached(given) if given else out["unlimited"]
    if len(given) > 1:
        for k, v in given.items():
            out[k] = cached({k: v})
    return out


def _without_drafts(
    trace: Trace, pol: policy_mod.Policy, model: str, tp: int, budgets: dict, runs: dict
) -> np.ndarray | None:
    """The cached tokens under the same budgets with drafts off (None: drafts are off). vLLM:
    the policy without ``speculative_config``. SGLang 0.5.23: the same as with drafts (its
    hybrid tree keys no bigrams: ``UnifiedTreeCore.__init__`` drops ``is_eagle`` with a MAMBA
    component; a decode checkpoint is taken at every boundary an accepted run crosses, as one
    token a step takes it), so the run with drafts is the run without."""
    if isinstance(pol, policy_mod.VLLMPolicy) and pol.speculative_config is not None:
        return _run_engine(trace, replace(pol, speculative_config=None), model, tp, budgets)[
            "budgets"
        ]
    if isinstance(pol, policy_mod.SGLangPolicy) and pol.speculative_num_draft_tokens:
        return runs["budgets"]
    return None


def hit_reasons(
    trace: Trace,
    *,
    model: str | sizing.ModelSpec = "kimi-k3",
    tp: int = DEFAULT_TP,
    sglang: dict | None = None,
    vllm: dict | None = None,
    state_budget_bytes: float | None = None,
    kv_budget_bytes: float | None = None,
    unified_budget_bytes: float | None = None,
    host_bytes: int | None = None,
) -> HitReasons:
    """Per request of ``trace``, SGLang's and vLLM's cached tokens and the reason when short.

    ``sglang`` / ``vllm``: parameters of ``policy.make("sglang" | "vllm", ...)`` (vLLM's
    ``block_size`` None = ``sizing.vllm_plan(model, tp=tp).block_size``: 768 tokens for Kimi
    K3 at TP8). Budgets as in ``simulate`` (bytes on one GPU; None = unlimited). The trace runs
    on blocks of ``gcd(trace block, vLLM hit unit)`` tokens (a block split into equal parts: the
    trace says nothing finer), so matches are whole trace blocks. ``host_bytes``: SGLang with a
    host tier of this size behind the device's ``state_budget_bytes`` (``sim.tiers``: the host
    keeps each request's last state); the vLLM column has none. ``ValueError`` for a trace
    without prefix information. Rules: the module docstring and docs/hit_reasons.md.
    """
    if not isinstance(trace, Trace):
        raise ValueError(f"trace must be a workloads.Trace, got {type(trace).__name__}")
    require_prefix_info(trace, "why a request got no hit")
    model = sizing.preset_name(model)  # a preset name or a ModelSpec of a preset's shape
    sg, vl = _check_sglang(sglang), _check_vllm(vllm, model, tp)
    g = math.gcd(trace.block_size, _units(sg, vl, 1)[1])
    fine = trace.refined(g)
    sg_unit, vl_unit = _units(sg, vl, g)
    blocks, known = prefix_points(trace)
    L = trace.input_len
    match = np.minimum(blocks * trace.block_size, L)
    assert np.array_equal(match, ideal_prefix_tokens(trace)), "one definition of the match"
    given = (state_budget_bytes, kv_budget_bytes, unified_budget_bytes)
    budgets = dict(zip(_BUDGETS, given, strict=True))
    host = _check_host(budgets, host_bytes, checkpoint_bytes(model, tp))
    engines: dict[str, EngineHits] = {}
    caps = {"sglang": match, "vllm": np.minimum(match, L - 1)}
    for name, pol, unit in (("sglang", sg, sg_unit), ("vllm", vl, vl_unit)):
        runs = _run_engine(fine, pol, model, tp, budgets)
        if name == "sglang" and host is not None:
            runs.update(_run_host(fine, pol, host))
        no_drafts = _without_drafts(fine, pol, model, tp, budgets, runs)
        if no_drafts is not None:
            runs["no_drafts"] = no_drafts
        facts = path_facts(fine, pol, match)  # replayed apart from the simulator: they agree
        assert np.array_equal(facts.restore_at, runs["unlimited"]), "one run, two replays"
        reason = _classify(runs, match, caps[name], known | (match >= L), unit, facts.deeper)
        engines[name] = EngineHits(
            name,
            unit,
            pol.params(),
            runs["budgets"],
            runs["unlimited"],
            reason,
            facts.source,
            facts.deeper,
            facts.deeper_source,
            _evicted_by(runs),
            no_drafts,
        )
    return HitReasons(
        trace.name,
        trace.block_size,
        L,
        match,
        known,
        budgets,
        engines["sglang"],
        engines["vllm"],
        facts.sharer,
    )


def _table(r: HitReasons) -> str:
    """The breakdown as a Markdown table (the README's; reasons no request has left out)."""
    req, tok = r.share_arrays()
    rate = [float(getattr(r, e).cached.sum() / max(r.input_len.sum(), 1)) for e in ENGINES]
    out = [
        "| reason | SGLang requests | SGLang uncached tokens | vLLM requests "
        "| vLLM uncached tokens |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for k, r in enumerate(REASONS):
        cells = (req[0, k], tok[0, k], req[1, k], tok[1, k])
        if any(cells):  # a reason no request has is left out
            out.append(f"| `{r}` | " + " | ".join(f"{c:.1%}" for c in cells) + " |")
    out.append(f"| cached / input tokens | {rate[0]:.1%} | | {rate[1]:.1%} | |")
    return "\n".join(out)


def _main(argv: list[str] | None = None) -> None:
    """``python -m kda_core.studies.hit_reasons``: the breakdown on a bundled trace or a file
    (``load_trace``, format detected), and request by request for ``--requests``."""
    import argparse

    from kda_core.workloads import BUNDLED_TRACES, bundled_trace, load_trace

    p = argparse.ArgumentParser(prog="python -m kda_core.studies.hit_reasons")
    p.add_argument("--trace", choices=sorted(BUNDLED_TRACES), default="conversation")
    p.add_argument("--file", help="a trace file instead (any load_trace format)")
    p.add_argument("--block-size", type=int, default=512, help="hashing block of a token file")
    p.add_argument("--state-budget-gib", type=float, default=None, help="per GPU; none: unlimited")
    p.add_argument("--requests", type=int, nargs="*", default=[], metavar="I")
    a = p.parse_args(argv)
    trace = (
        bundled_trace(a.trace) if a.file is None else load_trace(a.file, block_size=a.block_size)
    )
    sb = None if a.state_budget_gib is None else a.state_budget_gib * (1 << 30)
    r = hit_reasons(trace, state_budget_bytes=sb)
    budget = "unlimited" if sb is None else f"{a.state_budget_gib:g} GiB"
    head = f"{trace.name}: {len(r.input_len):,} requests, SGLang grid {r.sglang.unit} tokens"
    print(f"{head}, vLLM block {r.vllm.unit} tokens, state budget {budget} per GPU")
    print(_table(r))
    for i in a.requests:
        if not 0 <= i < len(r.input_len):
            p.error(f"--requests: {i} is not in [0, {len(r.input_len)})")
        cells = [
            f"{e} {getattr(r, e).cached[i]} ({REASONS[getattr(r, e).reason[i]]})" for e in ENGINES
        ]
        print(
            f"request {i}: input {r.input_len[i]}, shared {r.token_match[i]}; " + ", ".join(cells)
        )


if __name__ == "__main__":
    _main()
