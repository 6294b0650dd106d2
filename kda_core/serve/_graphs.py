"""Decode on fixed shapes (``Engine(cuda_graph_bs=...)``), SGLang's CUDA graphs on a CPU: an
all-decode step runs on the smallest captured size that holds it
(``BaseCudaGraphRunner._pad_to_bucket``), the padding rows on the sink (SGLang's slot 0,
``MambaSlotAllocator``: a dummy write target); the largest size caps the running requests.
``GraphStep`` is a step's index table in SGLang's numbering. docs/serving.md."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kda_core._checks import check_int
from kda_core.serve._slots import MAX_SLOTS

SINK = 0  # the sink's state index in SGLang's numbering (its reserved slot 0)
MAX_GRAPH_SIZES = 64


@dataclass(slots=True, frozen=True)
class GraphStep:
    """``batch_size`` requests padded to the captured ``padded_size``; ``state_index`` the
    per-row state index in SGLang's numbering (a request's slot + 1, or ``SINK``)."""

    batch_size: int
    padded_size: int
    state_index: tuple[int, ...]


def check_graph_bs(sizes: object) -> tuple[int, ...] | None:
    """``cuda_graph_bs``: None (eager decode) or captured batch sizes in [1, 4096], sorted."""
    if sizes is None:
        return None
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence):
        raise ValueError("cuda_graph_bs must be None or a sequence of batch sizes")
    if not 1 <= len(sizes) <= MAX_GRAPH_SIZES:
        raise ValueError(f"cuda_graph_bs must hold 1 to {MAX_GRAPH_SIZES} sizes, got {len(sizes)}")
    ints = {check_int(f"cuda_graph_bs[{i}]", s, 1, MAX_SLOTS) for i, s in enumerate(sizes)}
    return tuple(sorted(ints))


def padded_size(n: int, sizes: Sequence[int]) -> int:
    """The smallest captured size >= n (``_pad_to_bucket``)."""
    if n > sizes[-1]:
        raise ValueError(f"batch of {n} exceeds the largest captured size {sizes[-1]}")
    return sizes[bisect.bisect_left(sizes, n)]


def pad_rows(S: np.ndarray, conv: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """States [L, n, ...] and conv windows [L, n, ...] with the sink's zero rows up to size."""
    pad = size - S.shape[1]
    if pad == 0:
        return S, conv
    zs = np.zeros((S.shape[0], pad, *S.shape[2:]))
    zc = np.zeros((conv.shape[0], pad, *conv.shape[2:]))
    return np.concatenate([S, zs], axis=1), np.concatenate([conv, zc], axis=1)


def graph_step(slots: Sequence[int], size: int) -> GraphStep:
    """The step's index table in SGLang's numbering: slot + 1 per request, the sink after."""
    index = tuple(s + 1 for s in slots) + (SINK,) * (size - len(slots))
    return GraphStep(batch_size=len(slots), padded_size=size, state_index=index)
