"""SGLang's ``generated-shared-prefix`` benchmark dataset as a trace (deterministic).

SGLang's bench_serving builds it in ``sample_generated_shared_prefix_requests``
(sgl-project/sglang ``python/sglang/bench_serving.py``, later moved to
``python/sglang/benchmark/datasets/generated_shared_prefix.py``) from the ``--gsp-*`` flags:
``num_groups`` random system prompts of ``system_prompt_len`` tokens, and for each group
``prompts_per_group`` random questions of ``question_len`` tokens; a request's prompt is its
group's system prompt + ``"\\n\\n"`` + its question, its output ``output_len`` tokens; the
request list is shuffled (``random.shuffle``) unless ``--gsp-ordered``; with
``--gsp-range-ratio`` r < 1 each length is drawn uniformly in ``[max(int(full*r), 1), full]``
(``compute_random_lens``: system prompts, then questions, then outputs, from numpy's global
RNG seeded with ``--seed``). Requests leave at ``--request-rate`` (Poisson; inf = all at once).

Here the same shape, in tokens: group g's requests share exactly its system prompt's blocks
and nothing else; each question is unique. Differences, by construction: the prompt is exactly
system + question tokens (SGLang re-tokenises the joined text, so its ``prompt_len`` can differ
by a few tokens); lengths come from ``numpy.random.RandomState(seed)`` in SGLang's draw order,
the shuffle from ``random.Random(seed)`` (SGLang's order also depends on its tokenizer's draws,
so the permutation is not SGLang's). Left out: ``--gsp-num-turns`` > 1, routing keys.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import Any

import numpy as np

from kda_core._checks import check_bool, check_int
from kda_core.workloads._builder import TraceBuilder
from kda_core.workloads._caps import MAX_INPUT_TOKENS, MAX_OUTPUT_TOKENS, MAX_REQUESTS
from kda_core.workloads.traces import Trace

# the bench flags (argparse ``dest`` names) with SGLang's defaults
GSP_DEFAULTS: dict[str, Any] = {
    "gsp_num_groups": 64,
    "gsp_prompts_per_group": 16,
    "gsp_system_prompt_len": 2048,
    "gsp_question_len": 128,
    "gsp_output_len": 256,
    "gsp_range_ratio": 1.0,
    "gsp_ordered": False,
    "seed": 1,
    "request_rate": math.inf,
}


def _random_lens(rs: np.random.RandomState, full_len: int, ratio: float, num: int) -> np.ndarray:
    """SGLang's ``compute_random_lens``: ``num`` lengths in [max(int(full*ratio), 1), full]."""
    if full_len <= 0:
        return np.zeros(num, dtype=np.int64)
    return rs.randint(max(int(full_len * ratio), 1), full_len + 1, size=num).astype(np.int64)


def _check_rate(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:  # nan is not > 0
        raise ValueError(f"request_rate must be a number > 0 (inf: all at once), got {v!r}")
    return float(v)


def generated_shared_prefix(
    num_groups: int = 64,
    prompts_per_group: int = 16,
    system_prompt_len: int = 2048,
    question_len: int = 128,
    output_len: int = 256,
    *,
    range_ratio: float = 1.0,
    ordered: bool = False,
    seed: int = 1,
    request_rate: float = math.inf,
    block_size: int = 512,
) -> Trace:
    """The generated-shared-prefix workload (see the module docstring); defaults are SGLang's.

    ``num_groups * prompts_per_group`` requests (at most ``MAX_REQUESTS``); session = group.
    """
    g = check_int("num_groups", num_groups, 1, MAX_REQUESTS)
    p = check_int("prompts_per_group", prompts_per_group, 1, MAX_REQUESTS // g)
    sys_len = check_int("system_prompt_len", system_prompt_len, 0, MAX_INPUT_TOKENS)
    q_len = check_int("question_len", question_len, 0, MAX_INPUT_TOKENS - sys_len)
    o_len = check_int("output_len", output_len, 0, MAX_OUTPUT_TOKENS)
    if sys_len + q_len < 1:
        raise ValueError("system_prompt_len + question_len must be >= 1")
    ratio_ok = isinstance(range_ratio, (int, float)) and not isinstance(range_ratio, bool)
    if not (ratio_ok and 0 <= range_ratio <= 1):
        raise ValueError(f"range_ratio must be a number in [0, 1], got {range_ratio!r}")
    check_bool("ordered", ordered)
    seed = check_int("seed", seed, 0, 2**32 - 1)
    rate = _check_rate(request_rate)
    rs = np.random.RandomState(seed)
    sys_lens = _random_lens(rs, sys_len, range_ratio, g)
    q_lens = _random_lens(rs, q_len, range_ratio, g * p).reshape(g, p)
    out_lens = _random_lens(rs, o_len, range_ratio, g * p).reshape(g, p)
    order = [(gi, pi) for gi in range(g) for pi in range(p)]
    if not ordered:
        random.Random(seed).shuffle(order)
    n = len(order)
    gaps = np.zeros(n) if math.isinf(rate) else rs.exponential(1.0 / rate, size=n)
    arrival = np.concatenate([[0.0], np.cumsum(gaps[:-1])])
    bld = TraceBuilder(block_size, seed, ("shared-prefix",))
    system = [bld.seg(int(x)) for x in sys_lens]
    for k, (gi, pi) in enumerate(order):
        segs = [s for s in (system[gi], bld.seg(int(q_lens[gi, pi]))) if s[1] > 0]
        if not segs:
            raise ValueError(f"group {gi} prompt {pi} has no tokens (lengths drawn as 0)")
        bld.add(float(arrival[k]), segs, bld.ids(segs, None), int(out_lens[gi, pi]), gi, 0)
    name = f"gsp-{g}x{p}-{sys_len}+{q_len}"
    return bld.finish(name)


def gsp_from_settings(settings: Mapping[str, Any], *, block_size: int = 512) -> Trace:
    """:func:`generated_shared_prefix` from a mapping of SGLang's flag names (``gsp_num_groups``,
    ... as in ``GSP_DEFAULTS``; ``dataset_name`` must be ``"generated-shared-prefix"`` if given).
    An unknown key is refused (a typo must not fall back to a default)."""
    s = dict(settings)
    name = s.pop("dataset_name", "generated-shared-prefix")
    if name != "generated-shared-prefix":
        raise ValueError(f"dataset_name must be 'generated-shared-prefix', got {name!r}")
    unknown = sorted(set(s) - set(GSP_DEFAULTS))
    if unknown:
        raise ValueError(f"unknown setting {unknown[0]!r}; known: {', '.join(GSP_DEFAULTS)}")
    v = {**GSP_DEFAULTS, **s}
    return generated_shared_prefix(
        v["gsp_num_groups"],
        v["gsp_prompts_per_group"],
        v["gsp_system_prompt_len"],
        v["gsp_question_len"],
        v["gsp_output_len"],
        range_ratio=v["gsp_range_ratio"],
        ordered=v["gsp_ordered"],
        seed=v["seed"],
        request_rate=v["request_rate"],
        block_size=block_size,
    )
