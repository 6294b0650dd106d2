"""Public API entry: ``kda_core.cp.context_parallel(q, k, v, g, beta, *, ranks,
scan="allgather" | "logdepth", initial_state=None) -> (o, S)``, KDA context parallelism by an
affine prefix scan (``ranks=1`` needs no torch), with its varlen and conv-halo companions. It
lives in `kda_core.kda.cp`; code inside the project imports it from there.
"""

from kda_core.kda.cp import (
    SCANS,
    context_parallel,
    context_parallel_varlen,
    short_conv_cp,
    short_conv_cp_varlen,
)

__all__ = [
    "SCANS",
    "context_parallel",
    "context_parallel_varlen",
    "short_conv_cp",
    "short_conv_cp_varlen",
]
