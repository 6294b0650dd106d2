"""A fleet of replicas behind a router fed by the engines' KV events (docs/fleet.md).

``simulate_fleet(trace, replicas=, router=, ...)`` runs a trace through N replicas, each the
lab's single-server cache model (SGLang's radix rules or vLLM's block rules, the budgets, the
model's sizes at ``tp``), publishing KV events in the engine's wire format, with one of the
routers people run in front (``ROUTERS``, each after the source it cites) or the lab's
state-aware one. ``python -m kda_core.fleet listen tcp://HOST:PORT`` reads a live server's
event stream. The modules are the package's own: ``_events`` (wire format), ``_replica``,
``_index`` (what a router knows), ``_routers``, ``_approx_tree``, ``_setup``, ``_simulate``,
``_result``, ``_listen``.
"""

from __future__ import annotations

from kda_core.fleet._result import GAP_REASONS, FleetResult
from kda_core.fleet._routers import ROUTERS
from kda_core.fleet._setup import ENGINES, check_args
from kda_core.fleet._simulate import run
from kda_core.sim.costmodel import TimeModel
from kda_core.workloads import Trace

__all__ = ["ENGINES", "GAP_REASONS", "ROUTERS", "FleetResult", "simulate_fleet"]


def simulate_fleet(
    trace: Trace | None = None,
    *,
    replicas: int,
    router: str,
    model: str = "kimi-k3",
    tp: int = 8,
    engine: str = "vllm",
    weight: float = 1.0,
    seed: int = 0,
    state_budget_bytes: float | None = None,
    kv_budget_bytes: float | None = None,
    unified_budget_bytes: float | None = None,
    engine_params: dict | None = None,
    router_params: dict | None = None,
    time_model: TimeModel | None = None,
    oracle: bool = True,
) -> FleetResult:
    """Route ``trace`` (default: the bundled Mooncake conversation trace) over ``replicas``
    servers with ``router`` (one of ``ROUTERS``) and return per-request decisions and hits.

    Each replica is ``kda_core.sim.simulate``'s sequential single server for ``engine``
    (``policy.make(engine, **engine_params)``; vLLM's ``block_size`` None = ``sizing.vllm_plan``'s)
    of ``model`` at tensor parallel ``tp``, with the byte budgets (per replica, as in
    ``simulate``; None = unlimited). ``weight``: the overlap weight ``w`` of the event-fed
    scorers (``cost = w * (request_blocks - overlap) + load``). ``seed``: the order routers
    enumerate replicas in (0: 0..N-1; a tie goes to the first). ``router_params``: the
    SGLang router's thresholds, or the event routers' ``recent_decay`` / ``index_cap``.
    ``time_model``: prefill FLOPs / throughput per replica (FCFS), ``decode_s_per_token`` for
    how long a request stays in flight. ``oracle``: also ask every replica what it would have
    given (the regret; N lookups a request). ``ValueError`` naming the argument for bad input
    (and for a trace without prefix information). Deterministic.
    """
    opts = dict(
        replicas=replicas,
        router=router,
        model=model,
        tp=tp,
        engine=engine,
        weight=weight,
        seed=seed,
        budgets=dict(
            state_budget_bytes=state_budget_bytes,
            kv_budget_bytes=kv_budget_bytes,
            unified_budget_bytes=unified_budget_bytes,
        ),
        engine_params=engine_params,
        router_params=router_params,
        time_model=time_model,
        oracle=oracle,
    )
    return run(check_args(trace, opts))
