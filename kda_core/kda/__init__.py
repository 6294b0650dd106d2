"""Kimi Delta Attention in numpy: the recurrence, its chunkwise form, gates and affine maps.

Re-exports the public API names (docs/architecture.md): ``recurrent``, ``chunked``,
``chunked_flops``, ``AffineMap``, ``segment_map``, ``segment_map_naive``, ``l2norm``, the
gates and ``kda_threads``. Submodules: reference (naive twins), chunkwise + _intra (the
chunked form), _threads (head threads), affine, gates, _inputs (checks), conv, varlen (+
_varlen_rounds), cp + cp_gloo (context parallelism), quant (state formats: INT8 / fp8 /
bf16); import those directly (this file stays re-exports only, so there are no import cycles).
"""

from kda_core.kda._threads import kda_threads
from kda_core.kda.affine import AffineMap, segment_map
from kda_core.kda.chunkwise import chunked, chunked_flops
from kda_core.kda.gates import l2norm, lowerbound_gate, softplus_gate
from kda_core.kda.reference import recurrent, segment_map_naive

__all__ = [
    "AffineMap",
    "chunked",
    "chunked_flops",
    "kda_threads",
    "l2norm",
    "lowerbound_gate",
    "recurrent",
    "segment_map",
    "segment_map_naive",
    "softplus_gate",
]
