"""How far the logits drift when a request is restored exactly, from INT8, or inconsistently.

``restore_drift`` serves the earlier requests of a scenario exactly (to fill the cache), then
request ``request`` three ways: the exact restore (checkpoint + replay), an INT8 checkpoint +
exact replay, and the inconsistent teaching restore (MLA KV at the token match, KDA state at
the checkpoint, no replay), each against an uncached run. Cached per arguments. Left out:
sampling (greedy tokens only).
"""

from __future__ import annotations

import copy
from functools import lru_cache

import numpy as np

from kda_core._checks import check_int
from kda_core.serve.engine import Engine
from kda_core.studies.prefix_replay._scenarios import (
    check_prompts,
    check_settings,
    make_policy,
    shared_model,
)
from kda_core.studies.prefix_replay._views import DriftStudy


@lru_cache(maxsize=16)
def _drift(
    prompts: tuple[str, ...],
    request: int,
    policy: str,
    spacing: int,
    checkpoint_slots: int | None,
    int8: bool,
    n: int,
) -> DriftStudy:
    model = shared_model()

    def history(q: bool) -> Engine:  # every earlier request served exactly
        e = Engine(
            make_policy(policy, spacing),
            int8_checkpoints=q,
            checkpoint_slots=checkpoint_slots,
            model=model,
        )
        for p in prompts[:request]:
            e.generate(p, n)
        return e

    native, quant = history(False), history(True)
    # the inconsistent restore runs on a copy of the session-like engine (native or INT8)
    mine = copy.deepcopy(quant if int8 else native, {id(model): model})
    bad = mine.generate(prompts[request], n, reference=True, restore="inconsistent")
    exact = native.generate(prompts[request], n, reference=True)
    q = quant.generate(prompts[request], n, reference=True)
    assert exact.ref_logits is not None and q.ref_logits is not None
    assert bad.ref_logits is not None
    ref = exact.ref_logits
    return DriftStudy(
        request=request,
        token_match=exact.token_match,
        restore_at=exact.restore_at,
        exact=np.abs(exact.logits - ref).max(axis=1),
        int8=np.abs(q.logits - ref).max(axis=1),
        inconsistent=np.abs(bad.logits - ref).max(axis=1),
        exact_tokens=tuple(exact.tokens),
        int8_tokens=tuple(q.tokens),
        inconsistent_tokens=tuple(bad.tokens),
        uncached_tokens=tuple(int(t) for t in ref.argmax(axis=1)),
        int8_restore_error=q.restore_error,
        policy=policy,
        spacing=spacing,
        checkpoint_slots=checkpoint_slots,
        inconsistent_int8=int8,
    )


def restore_drift(
    name: str = "system_tools_branches",
    request: int = -1,
    *,
    prompts: tuple[str, ...] | None = None,
    policy: str = "interval",
    spacing: int = 32,
    checkpoint_slots: int | None = None,
    int8: bool = False,
    max_new_tokens: int = 16,
) -> DriftStudy:
    """How far the logits of request ``request`` drift from an uncached run when it is restored
    exactly, from an INT8 checkpoint, or inconsistently (MLA at the match, KDA at the
    checkpoint, no replay). Earlier requests are served exactly to fill the cache.

    ``policy``, ``spacing``, ``checkpoint_slots`` as in ``run_scenario`` (all three arms);
    ``int8`` is the session's parking, used by the inconsistent arm (the exact arm always parks
    natively, the INT8 arm always as INT8). Earlier requests decode ``max_new_tokens`` each.
    """
    ps = check_prompts(name, prompts)
    request = check_int("request", request, -len(ps), len(ps) - 1) % len(ps)
    policy, spacing, int8, slots, n = check_settings(
        policy, spacing, int8, checkpoint_slots, max_new_tokens
    )
    return _drift(ps, request, policy, spacing, slots, int8, n)
