"""What chunking buys, as deterministic arithmetic: sequential steps T (one per token) vs
ceil(T / C) (one per chunk), and matmul FLOPs of the recurrence vs `kda.chunked_flops`.
Chunking does *more* arithmetic, in far fewer, matmul-shaped steps (docs/kda.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kda_core import kda
from kda_core._checks import check_int
from kda_core.studies._kda_inputs import check_grid

_MAX_COST_T = 1 << 24


def recurrent_flops(T: int, H: int, K: int, V: int) -> int:
    """Matmul-like FLOPs of the token recurrence (2 per multiply-add): S^T k, the rank-1 write
    and the read-out, 2 K V each per token and head (the K V decay multiply is not counted,
    as `kda.chunked_flops` does not count elementwise work)."""
    return 6 * T * H * K * V


@dataclass(slots=True)
class Cost:
    """Per layer and sequence: ``T_values [nT]`` x ``chunk_sizes [nC]``. ``recurrent_steps [nT]``
    = T; ``chunked_steps [nT, nC]`` = ceil(T / C); ``recurrent_flops [nT]``; ``chunked_flops
    [nT, nC]``; ``flops_ratio`` = chunked / recurrent; ``steps_ratio`` = T / ceil(T / C)."""

    H: int
    K: int
    V: int
    T_values: np.ndarray
    chunk_sizes: np.ndarray
    recurrent_steps: np.ndarray
    chunked_steps: np.ndarray
    recurrent_flops: np.ndarray
    chunked_flops: np.ndarray
    flops_ratio: np.ndarray
    steps_ratio: np.ndarray


def cost(
    T_values: Sequence[int] = (1024, 8192, 65536),
    chunk_sizes: Sequence[int] = (16, 32, 64, 128),
    H: int = 96,
    K: int = 128,
    V: int = 128,
) -> Cost:
    """Sequential steps and FLOPs of both forms; defaults: one Kimi K3 KDA layer (96 heads of
    128 x 128) on one GPU without TP."""
    Ts = check_grid("T_values", T_values, 1, _MAX_COST_T)
    Cs = check_grid("chunk_sizes", chunk_sizes, 1, 1024)
    H = check_int("H", H, 1, 4096)
    K = check_int("K", K, 1, 1024)
    V = check_int("V", V, 1, 1024)
    rs = np.array(Ts, dtype=np.int64)
    cs = np.array([[-(-T // min(C, T)) for C in Cs] for T in Ts], dtype=np.int64)
    rf = np.array([recurrent_flops(T, H, K, V) for T in Ts], dtype=np.int64)
    cf = np.array([[kda.chunked_flops(T, H, K, V, C) for C in Cs] for T in Ts], dtype=np.int64)
    return Cost(H, K, V, rs, np.array(Cs), rs, cs, rf, cf, cf / rf[:, None], rs[:, None] / cs)
