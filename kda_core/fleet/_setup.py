"""``simulate_fleet``'s arguments checked once, and the pieces a run is built from.

Everything a replica needs comes from the lab's single-server code: the policy
(``policy.make("sglang" | "vllm", ...)``; vLLM's block from ``sizing.vllm_plan``, 768 tokens
for Kimi K3 at TP8, as ``studies.hit_reasons`` takes it), the checkpoint and KV sizes
(``sim.checkpoint_bytes``, ``sizing.mla_kv_bytes_per_token``), vLLM's KV cache groups
(``sizing.vllm_plan``'s groups) and the cost model (``sim.costmodel``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from kda_core import sizing
from kda_core._checks import check_int, check_seed
from kda_core.cache.policy import MAX_LEN
from kda_core.fleet._routers import EVENT_ROUTERS, KV_DEFAULTS, ROUTERS, SGLANG_DEFAULTS
from kda_core.policy import make
from kda_core.sim import checkpoint_bytes, costmodel
from kda_core.workloads import Trace, bundled_trace, require_prefix_info

ENGINES = ("vllm", "sglang")
MAX_REPLICAS = 256
MAX_WEIGHT = 1e6
_BUDGETS = ("state_budget_bytes", "kv_budget_bytes", "unified_budget_bytes")


@dataclass(frozen=True, slots=True)
class Setup:
    trace: Trace  # on the tree's pages (vLLM: refined when the block is not a multiple)
    pol: Any  # kda_core.policy.make's
    engine: str
    router: str
    replicas: int
    weight: float
    seed: int
    page: int
    block_tokens: int
    groups: tuple[tuple[int, ...], tuple[int, ...], str]
    budgets: tuple[int | None, int | None, int | None]
    sizes: tuple[int, int]
    cspec: costmodel.CostSpec
    time_model: costmodel.TimeModel
    router_params: dict
    outputs: bool
    oracle: bool


def _check_number(name: str, value: Any, lo: float, hi: float) -> float:
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if not ok or not (math.isfinite(float(value)) and lo <= float(value) <= hi):
        raise ValueError(f"{name} must be a number in [{lo:g}, {hi:g}], got {value!r}")
    return float(value)


def _check_budgets(budgets: dict) -> tuple[int | None, int | None, int | None]:
    out = []
    for name in _BUDGETS:
        v = budgets[name]
        out.append(None if v is None else int(_check_number(name, v, 0, 2.0**60)))
    return out[0], out[1], out[2]


def _check_params(name: str, given: Any, defaults: dict) -> dict:
    if given is None:
        return dict(defaults)
    if not isinstance(given, dict):
        raise ValueError(f"{name} must be a dict or None, got {type(given).__name__}")
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ValueError(f"{name}: unknown keys {unknown}; allowed {sorted(defaults)}")
    return {**defaults, **given}


def _check_router_params(router: str, given: Any) -> dict:
    if router == "sglang_cache_aware":
        p = _check_params("router_params", given, SGLANG_DEFAULTS)
        _check_number("cache_threshold", p["cache_threshold"], 0.0, 1.0)
        check_int("balance_abs_threshold", p["balance_abs_threshold"], 0)
        _check_number("balance_rel_threshold", p["balance_rel_threshold"], 0.0, 1e6)
        return p
    if router in EVENT_ROUTERS:
        p = _check_params("router_params", given, KV_DEFAULTS)
        _check_number("recent_decay", p["recent_decay"], 0.0, 1.0)
        check_int("index_cap", p["index_cap"], 1, 1 << 30)
        if not isinstance(p["filter_removals"], bool):
            raise ValueError(f"filter_removals must be a bool, got {p['filter_removals']!r}")
        return p
    return _check_params("router_params", given, {})


def _check_policy(engine: str, params: Any, model: str, tp: int) -> Any:
    p = _check_params("engine_params", params, _policy_fields(engine))
    if engine == "vllm":
        if p.get("block_size") is None:
            p["block_size"] = sizing.vllm_plan(
                model, 1 << 34, tp=tp, max_model_len=1 << 17
            ).block_size
        if p.get("partial_hits"):
            raise ValueError("engine_params: partial_hits is not modelled in the fleet's events")
    try:
        return make(engine, **p)
    except (TypeError, ValueError) as e:
        raise ValueError(f"engine_params: {e}") from None


def _policy_fields(engine: str) -> dict:
    """The policy's own parameters and defaults (``make`` refuses anything else)."""
    return make(engine).params()


def _pages(trace: Trace, pol: Any, engine: str) -> tuple[Trace, int, int, bool]:
    """(trace on the tree's pages, page tokens, event block tokens, insert output blocks)."""
    b = trace.block_size
    outputs = trace.out_offsets is not None
    if engine == "sglang":
        return trace, b, b, outputs
    B = int(pol.block_size)  # type: ignore[attr-defined]
    if B % b == 0:
        return trace, b, B, outputs
    g = math.gcd(b, B)
    return trace.refined(g), g, B, False


def _groups(model: str, engine: str) -> tuple[tuple[int, ...], tuple[int, ...], str]:
    """(Mamba group ids, attention group ids, attention kind). vLLM: ``vllm_plan``'s groups
    (``_get_kv_cache_groups_uniform_page_size``), the linear layers' groups first (layer
    order; Kimi K3: Mamba 0-2, MLA 3 as captured in AMD-AGI/Infera#98). SGLang has no groups:
    group 0 tags the lab's proposed state events."""
    spec = sizing.preset(model)
    if engine == "sglang":
        return (0,), (), "full_attention"
    plan = sizing.vllm_plan(spec, 1 << 40, max_model_len=1 << 17)  # groups: budget-free
    n_attn, n_mamba = plan.attn_groups, plan.mamba_groups
    kind = "mla_attention" if spec.attn_kind == "mla" else "full_attention"
    return tuple(range(n_mamba)), tuple(range(n_mamba, n_mamba + n_attn)), kind


def check_args(trace: Any, opts: dict) -> Setup:
    """Validate ``simulate_fleet``'s arguments (``ValueError`` naming the argument)."""
    if trace is None:
        trace = bundled_trace("conversation")
    if not isinstance(trace, Trace):
        raise ValueError(f"trace must be a workloads.Trace or None, got {type(trace).__name__}")
    require_prefix_info(trace, "fleet routing (hit rates)")
    if not len(trace):
        raise ValueError("trace must hold at least one request")
    n = check_int("replicas", opts["replicas"], 1, MAX_REPLICAS)
    router = opts["router"]
    if router not in ROUTERS:
        raise ValueError(f"router must be one of {ROUTERS}, got {router!r}")
    engine = opts["engine"]
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
    model = opts["model"]
    if model not in sizing.PRESETS or model not in costmodel.COST_PRESETS:
        allowed = sorted(set(sizing.PRESETS) & set(costmodel.COST_PRESETS))
        raise ValueError(f"model must be one of {allowed}, got {model!r}")
    tp = check_int("tp", opts["tp"], 1, 1024)
    weight = _check_number("weight", opts["weight"], 0.0, MAX_WEIGHT)
    seed = check_seed("seed", opts["seed"])
    tm = opts["time_model"] if opts["time_model"] is not None else costmodel.TimeModel()
    if not isinstance(tm, costmodel.TimeModel):
        raise ValueError("time_model must be a costmodel.TimeModel or None")
    if not isinstance(opts["oracle"], bool):
        raise ValueError(f"oracle must be a bool, got {opts['oracle']!r}")
    pol = _check_policy(engine, opts["engine_params"], model, tp)
    fine, page, bt, outputs = _pages(trace, pol, engine)
    pol.check_page(page)
    top = int(fine.input_len.max())
    if int(fine.input_len.min()) < 1 or top > MAX_LEN:
        raise ValueError(f"trace request lengths must be in [1, {MAX_LEN}] tokens")
    spec = sizing.preset(model)
    sizes = (checkpoint_bytes(model, tp), sizing.mla_kv_bytes_per_token(spec))
    return Setup(
        trace=fine,
        pol=pol,
        engine=engine,
        router=router,
        replicas=n,
        weight=weight,
        seed=seed,
        page=page,
        block_tokens=bt,
        groups=_groups(model, engine),
        budgets=_check_budgets(opts["budgets"]),
        sizes=sizes,
        cspec=costmodel.cost_spec(model),
        time_model=tm,
        router_params=_check_router_params(router, opts["router_params"]),
        outputs=outputs,
        oracle=opts["oracle"],
    )
