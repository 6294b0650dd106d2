"""Speculative-verify memory of one request (``studies.speculative.memory_over_d``): ReplaySSM
rings vs a full state per draft token, ``kda_core.sizing`` arithmetic for a real preset or
TinyHybrid (``sizing.tiny_spec``: its config as a ``sizing.ModelSpec``)."""

from __future__ import annotations

from typing import NamedTuple

from kda_core import sizing
from kda_core.serve.spec import check_draft_tokens, check_ring_len


class SpecMemory(NamedTuple):
    """Speculative-verify buffers of ONE request on one GPU (bytes).

    ring_bytes: the six ReplaySSM rings (d, k, rawv, rawk in ``dtype``; g, beta float32);
    per_draft_state_bytes: the naive alternative, D full states [L_kda, D, h, K, V] in ``dtype``;
    conv_window_bytes: the per-step conv windows both approaches need; ratio = naive / rings.
    """

    model: str
    draft_tokens: int
    ring_len: int
    tp: int
    dtype: str
    ring_bytes: dict[str, int]
    ring_total: int
    per_draft_state_bytes: int
    conv_window_bytes: int
    ratio: float


def spec_memory(
    spec: sizing.ModelSpec | str,
    draft_tokens: int = 8,
    ring_len: int | None = None,
    tp: int = 1,
    dtype: str = "bfloat16",
) -> SpecMemory:
    """Rings vs per-draft states for one request (``kda_core.sizing`` arithmetic).

    Kimi K3 at TP8, bf16, D = 8, L = 16: rings 295,680 B per KDA layer vs 3,145,728 B of
    per-draft states (x10.6).
    """
    d = check_draft_tokens(draft_tokens)
    L = check_ring_len(ring_len, d)
    spec = sizing.preset(spec) if isinstance(spec, str) else spec
    rings = sizing.replayssm_ring_bytes(spec, 1, tp, L, dtype)
    naive = sizing.intermediate_ssm_bytes(spec, 0, d, tp, dtype, replayssm=False)
    conv = sizing.intermediate_conv_window_bytes(spec, 0, d, tp, dtype)
    total = sum(rings.values())
    return SpecMemory(spec.name, d, L, tp, dtype, rings, total, naive, conv, naive / total)
