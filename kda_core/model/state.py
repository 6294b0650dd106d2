"""A request's model state: what TinyHybrid needs to continue a sequence.

Per KDA layer the recurrent state ``S [H, K, V]`` and the conv window ``[W-1, 3*H*K]`` (the raw
q|k|v projections of the last W-1 tokens, oldest first); per MLA layer the latent KV of every
consumed token; plus the tokens consumed (the *boundary*). Restoring a prefix needs all three
at one boundary. ``version`` / ``fingerprint`` name the model and tokenizer that made the state
(`TinyHybrid.check_state` refuses a state from another model).

Left out: paging (the MLA KV is one contiguous array here; the serving pools page it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kda_core.model.tokenizer import TOKENIZER_FINGERPRINT


@dataclass(slots=True)
class KDALayerState:
    S: np.ndarray  # [H, K, V] recurrent state
    conv: np.ndarray  # [W-1, 3*H*K] last raw q|k|v projections, oldest first

    def copy(self) -> KDALayerState:
        return KDALayerState(self.S.copy(), self.conv.copy())

    @property
    def nbytes(self) -> int:
        return self.S.nbytes + self.conv.nbytes


@dataclass(slots=True)
class ModelState:
    """Everything a request needs to continue: KDA states + conv windows + MLA latent KV."""

    kda: list[KDALayerState]
    mla_kv: np.ndarray  # [T, n_mla, C] latent KV of every consumed token
    tokens: list[int] = field(default_factory=list)
    version: str = ""
    fingerprint: str = TOKENIZER_FINGERPRINT

    @property
    def boundary(self) -> int:
        """Tokens consumed; KDA states, conv windows and MLA KV all stand at this point."""
        return len(self.tokens)

    def copy(self) -> ModelState:
        return ModelState(
            [s.copy() for s in self.kda],
            self.mla_kv.copy(),
            list(self.tokens),
            self.version,
            self.fingerprint,
        )

    def kda_distance(self, other: ModelState) -> float:
        """Relative Frobenius distance of all KDA recurrent states (0 when identical)."""
        num = sum(float(np.sum((a.S - b.S) ** 2)) for a, b in zip(self.kda, other.kda))
        den = sum(float(np.sum(b.S**2)) for b in other.kda)
        return float(np.sqrt(num / den)) if den > 0 else float(np.sqrt(num))
