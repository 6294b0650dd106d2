"""Who made a state object: model fingerprint (weights + config), tokenizer, TP layout.

``Identity.of(model, layout, tokenizer_fingerprint)`` is what one instance serves; an object is
restored only if it matches every field (``kda_core.transfer.objects.decode_object``). The
prefix hash (sha256 of the token ids) is the key objects are stored and looked up under.
"""

from __future__ import annotations

import hashlib
import struct
import weakref
from dataclasses import dataclass, fields, is_dataclass

import numpy as np

from kda_core.model import TOKENIZER_FINGERPRINT, TinyHybrid

__all__ = ["Identity", "Layout", "model_fingerprint", "prefix_hash", "prefix_hashes"]


@dataclass(slots=True, frozen=True)
class Layout:
    """Tensor-parallel layout: KDA heads split contiguously over ``tp_size`` ranks; the MLA
    latent KV is replicated on every rank (it has no head axis)."""

    tp_size: int = 1
    tp_rank: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.tp_size, int) or not 1 <= self.tp_size <= 64:
            raise ValueError(f"tp_size must be an integer in [1, 64], got {self.tp_size!r}")
        if not isinstance(self.tp_rank, int) or not 0 <= self.tp_rank < self.tp_size:
            raise ValueError(f"tp_rank must be in [0, {self.tp_size - 1}], got {self.tp_rank!r}")

    def heads(self, total: int) -> tuple[int, int]:
        if total % self.tp_size:
            raise ValueError(f"tp_size={self.tp_size} must divide the {total} KDA heads")
        n = total // self.tp_size
        return self.tp_rank * n, (self.tp_rank + 1) * n

    def describe(self, total: int) -> dict:
        lo, hi = self.heads(total)
        return {
            "tp_size": self.tp_size,
            "tp_rank": self.tp_rank,
            "kda_heads": [lo, hi],
            "kda_heads_total": total,
            "mla": "replicated",
        }


_FP_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _hash_arrays(h: hashlib._Hash, obj: object) -> None:
    if isinstance(obj, np.ndarray):
        h.update(str(obj.dtype).encode() + str(obj.shape).encode())
        h.update(np.ascontiguousarray(obj).view(np.uint8))
    elif is_dataclass(obj):
        for f in fields(obj):
            _hash_arrays(h, getattr(obj, f.name))
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            _hash_arrays(h, x)


def model_fingerprint(model: TinyHybrid) -> str:
    """sha256 over the config and every weight array (cached per model object)."""
    if not isinstance(model, TinyHybrid):
        raise ValueError(f"model must be a TinyHybrid, got {type(model).__name__}")
    fp = _FP_CACHE.get(model)
    if fp is None:
        h = hashlib.sha256(repr(model.config).encode())
        for part in (model.embed, model.blocks, model.final_norm, model.lm_head):
            _hash_arrays(h, part)
        fp = h.hexdigest()[:32]
        _FP_CACHE[model] = fp
    return fp


def prefix_hash(tokens) -> str:
    """sha256 of the token ids as little-endian int64: the key objects are stored under."""
    ids = np.asarray(list(tokens), dtype="<i8")
    return hashlib.sha256(ids.tobytes()).hexdigest()[:40]


def prefix_hashes(tokens) -> list[str]:
    """``prefix_hash(tokens[:p])`` for p = 0..len(tokens), in one incremental pass."""
    h = hashlib.sha256()
    out = [h.copy().hexdigest()[:40]]
    for t in tokens:
        h.update(struct.pack("<q", int(t)))
        out.append(h.copy().hexdigest()[:40])
    return out


@dataclass(slots=True, frozen=True)
class Identity:
    """What an instance serves: the fields every object it accepts must match."""

    model_fingerprint: str
    tokenizer_fingerprint: str
    layout: Layout
    n_mla: int
    mla_latent: int
    kda_layers: int
    kda_heads: int
    head_dim: int
    conv_rows: int
    dtype: str = "float64"

    @classmethod
    def of(
        cls,
        model: TinyHybrid,
        layout: Layout | None = None,
        tokenizer_fingerprint: str = TOKENIZER_FINGERPRINT,
    ) -> Identity:
        c = model.config
        return cls(
            model_fingerprint(model),
            tokenizer_fingerprint,
            layout or Layout(),
            len(model.mla_layers),
            c.mla_latent,
            len(model.kda_layers),
            c.n_heads,
            c.head_dim,
            c.conv_size - 1,
        )

    def shapes(self, T: int) -> dict[str, tuple[int, ...]]:
        lo, hi = self.layout.heads(self.kda_heads)
        h = hi - lo
        K = self.head_dim
        return {
            "tokens": (T,),
            "mla_kv": (T, self.n_mla, self.mla_latent),
            "kda_state": (self.kda_layers, h, K, K),
            "conv_window": (self.kda_layers, self.conv_rows, 3 * h * K),
        }
