"""Where the states of an unlimited run lie, request by request: the facts an explanation of
``studies.hit_reasons`` cites (which earlier request saved the state a request restores from,
and the nearest deeper state, past the tokens it shares or at its last prompt token).

``prefix_points`` gives the token match itself (an unlimited block cache: the longest prefix
any earlier request shares) and whether it ends on a node boundary seen before.

The run is the simulator's sequential schedule with no budget, replayed on the trace's chained
block ids (equal ids = an identical prefix up to that block): request ``i`` restores from the
deepest state any earlier request saved on its path (matched again without the last block when
that state is at the prompt's end: the engines look up ``input - 1`` tokens, as
``sim.RunCtx.lookup`` does; vLLM with drafts: at most ``VLLMPolicy.lookup_limit``
of the prefix the request shares with any earlier one), its positions come from the policy's
``plan`` (as ``sim._sequential`` calls it) and its KV is kept up to its deepest position (the
tree cuts the key there). ``hit_reasons`` checks that the restore points equal the simulator's
(a naive twin of ``simulate(..., cap_lookup=True)``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kda_core.cache.policy import Policy, VLLMPolicy
from kda_core.workloads import Trace, ideal_prefix_tokens


@dataclass(frozen=True, slots=True, eq=False)
class PathFacts:
    """Per request ``[N]`` (int64): ``restore_at`` without budgets; ``source``: the request
    that first saved the state there (-1: nothing restored); ``deeper``: the nearest state
    past the restore point saved on a path sharing all of the token match (0: none);
    ``deeper_source`` (-1: none); ``sharer``: the first earlier request sharing all of the
    token match (-1: no match)."""

    restore_at: np.ndarray
    source: np.ndarray
    deeper: np.ndarray
    deeper_source: np.ndarray
    sharer: np.ndarray


def path_facts(fine: Trace, pol: Policy, match: np.ndarray) -> PathFacts:
    """The facts on ``fine`` (the study's split trace, ``g``-token blocks) under ``pol``;
    ``match`` [N]: each request's token match (tokens, from the unsplit trace)."""
    g = fine.block_size
    n = len(fine)
    blocks, offs = fine.blocks.tolist(), fine.offsets.tolist()
    lens, shared = fine.input_len.tolist(), match.tolist()
    states: dict[int, tuple[int, int]] = {}  # block id -> (first saver, position)
    nearest: dict[int, tuple[int, int]] = {}  # block id -> the nearest state at or below it
    kv: set[int] = set()
    first: dict[int, int] = {}  # block id -> the first request holding it
    out = {k: np.full(n, -1, dtype=np.int64) for k in PathFacts.__slots__}
    drafts = isinstance(pol, VLLMPolicy) and pol.speculative_config is not None
    limit = pol.lookup_limit if isinstance(pol, VLLMPolicy) and drafts else None
    ideal = ideal_prefix_tokens(fine).tolist() if drafts else []
    for i in range(n):
        key, L = blocks[offs[i] : offs[i + 1]], lens[i]
        m = 0
        while m < len(key) and key[m] in kv:
            m += 1
        ra = _deepest(states, key, m, g)
        if limit is not None:  # vLLM with drafts: the attention hit limits the match
            m = min(m, limit(L, ideal[i], g) // g)
            ra = _deepest(states, key, m, g)
        elif ra >= L:  # the input - 1 lookup: the simulator matches the key without its last block
            m = min(m, len(key) - 1)
            ra = _deepest(states, key, m, g)
        out["restore_at"][i] = ra
        out["source"][i] = states[key[ra // g - 1]][0] if ra else -1
        top = -(-shared[i] // g)  # the blocks of the token match
        near = nearest.get(key[top - 1]) if top else None
        out["deeper"][i], out["deeper_source"][i] = (near[1], near[0]) if near else (0, -1)
        out["sharer"][i] = first[key[top - 1]] if top else -1
        for b in reversed(key):  # chained ids: a known block's ancestors are known too
            if first.setdefault(b, i) != i:
                break
        pos = pol.plan(L, min(m * g, L), ra, None, g)
        if pos:
            kv.update(key[: pos[-1] // g])
        for p in pos:
            b = key[p // g - 1]
            if b not in states:
                states[b] = (i, p)
                _push_up(nearest, key[: p // g], (i, p))
    return PathFacts(**out)


def _deepest(states: dict[int, tuple[int, int]], key: list[int], m: int, g: int) -> int:
    """The deepest state among the first ``m`` blocks of ``key`` (tokens; 0: none)."""
    for t in range(m - 1, -1, -1):
        if key[t] in states:
            return (t + 1) * g
    return 0


def _push_up(nearest: dict[int, tuple[int, int]], path: list[int], state: tuple[int, int]) -> None:
    """``state`` is below every node of ``path`` (itself included): the nearest one of each,
    deepest first. An ancestor's subtree holds its descendant's, so its nearest state is at
    most as deep: the first node that already has one at least as near ends the walk."""
    for a in reversed(path):
        have = nearest.get(a)
        if have is not None and have[1] <= state[1]:
            break
        nearest[a] = state


def prefix_points(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Per request, the matched blocks of an unlimited block cache, and whether that point
    was a node boundary before it: two earlier continuations, or an earlier request's end."""
    first_next: dict[int, int] = {}  # block id -> the first continuation seen (-1: an end)
    branched: set[int] = set()  # ids followed by two continuations, or ending a request
    blocks, offs = trace.blocks.tolist(), trace.offsets.tolist()
    n = len(trace)
    known = np.zeros(n, dtype=bool)
    matched = np.zeros(n, dtype=np.int64)
    for i in range(n):
        ids = blocks[offs[i] : offs[i + 1]]
        m = 0
        for h in ids:
            if h not in first_next:
                break
            m += 1
        matched[i] = m
        if m:
            known[i] = ids[m - 1] in branched
        for j, h in enumerate(ids):
            nxt = ids[j + 1] if j + 1 < len(ids) else -1
            if first_next.setdefault(h, nxt) != nxt or nxt == -1:
                branched.add(h)
    return matched, known
