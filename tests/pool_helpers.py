"""Shared helper of the pool tests (tests/test_pool.py, test_serve_bookkeeping.py,
test_serve_fastpaths.py): per-layer states bound to an active slot, as the kernel leaves them."""

from __future__ import annotations

import numpy as np

from kda_core.model import KDALayerState
from kda_core.serve._slots import ActivePool


def bind(pool: ActivePool, slot: int, kda: list[KDALayerState]) -> None:
    """Bind the layer states, stacked (S [L, H, K, V], conv [L, W-1, D]), to ``slot``; a wrong
    layer count or shape raises ``ValueError`` (``StateShape.check``)."""
    S, conv = np.stack([st.S for st in kda]), np.stack([st.conv for st in kda])
    pool.shape.check(S, conv)
    pool.rebind(slot, S, conv)
