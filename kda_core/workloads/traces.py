"""The workload container: a :class:`Trace` of requests with chained block ids, built by
:func:`make_trace`, and what is computed from its ids (:func:`ideal_prefix_tokens`).

A trace lists requests in arrival order, each with an input length, an output length and the
chained ids of its input blocks (``block_size`` tokens per block, the last usually partial), in
a CSR layout ``blocks[offsets[i]:offsets[i+1]]``. Two requests share block id ``h`` at position
``j`` iff their inputs are identical up to and including block ``j`` (the Mooncake convention),
so the ids load straight into a block-level radix tree. Invariants and the id convention:
docs/workloads.md. A trace read from a lengths-only file (BurstGPT, Azure, Mooncake rows without
``hash_ids``) has ``has_prefix_info=False``: its ids are fresh per block (no sharing) and every
hit rate computed from it is refused (:func:`require_prefix_info`). Left out: raw token ids.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True, eq=False)
class Trace:
    """Requests in arrival order; block ids in CSR layout (see the module docstring).

    Arrays (N requests, B blocks in total): ``arrival_s [N]`` float64 seconds since the start,
    ``input_len [N]``, ``output_len [N]`` int64 tokens, ``offsets [N+1]`` int64, ``blocks [B]``
    int64 chained block ids, ``session [N]`` int64 (-1 when unknown), ``kind [N]`` int64 indexes
    ``kind_names``. All arrays are read-only.

    Optional output blocks (synthetic workloads whose outputs the next turn reuses):
    ``out_blocks[out_offsets[i]:out_offsets[i+1]]`` are the ids of the full blocks of
    input + output beyond the input's full blocks, i.e. blocks ``floor(in/b)`` ..
    ``floor((in+out)/b) - 1`` of the sequence after decoding; the simulator inserts them so a
    checkpoint after the last decoded token can be hit. ``None`` for Mooncake traces.

    Provenance: ``has_prefix_info`` (False: the file gave lengths only, the ids share nothing
    and hit rates cannot be computed), ``skipped_rows`` and the first ``skip_reasons`` of a
    load with ``on_error="skip"``, ``source_format`` (the loader's format name, "" if built).
    """

    name: str
    block_size: int
    arrival_s: np.ndarray
    input_len: np.ndarray
    output_len: np.ndarray
    offsets: np.ndarray
    blocks: np.ndarray
    session: np.ndarray
    kind: np.ndarray
    kind_names: tuple[str, ...]
    out_offsets: np.ndarray | None = None
    out_blocks: np.ndarray | None = None
    has_prefix_info: bool = True
    skipped_rows: int = 0
    skip_reasons: tuple[str, ...] = ()
    source_format: str = ""

    def __len__(self) -> int:
        return int(self.input_len.shape[0])

    def block_ids(self, i: int) -> np.ndarray:
        """Chained block ids of request ``i`` (read-only view)."""
        if not 0 <= i < len(self):
            raise ValueError(f"i must be in [0, {len(self)}), got {i}")
        return self.blocks[self.offsets[i] : self.offsets[i + 1]]

    def out_block_ids(self, i: int) -> np.ndarray:
        """Output block ids of request ``i`` (empty when the trace has none)."""
        if not 0 <= i < len(self):
            raise ValueError(f"i must be in [0, {len(self)}), got {i}")
        if self.out_offsets is None or self.out_blocks is None:
            return np.zeros(0, dtype=np.int64)
        return self.out_blocks[self.out_offsets[i] : self.out_offsets[i + 1]]

    def head(self, n: int) -> Trace:
        """The first ``n`` requests (all of them if n >= len)."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        n = min(int(n), len(self))
        end = int(self.offsets[n])
        oo = ob = None
        if self.out_offsets is not None and self.out_blocks is not None:
            oo = self.out_offsets[: n + 1]
            ob = self.out_blocks[: int(oo[-1])]
        return make_trace(
            f"{self.name}[:{n}]",
            self.block_size,
            self.arrival_s[:n],
            self.input_len[:n],
            self.output_len[:n],
            self.offsets[: n + 1],
            self.blocks[:end],
            self.session[:n],
            self.kind[:n],
            self.kind_names,
            oo,
            ob,
            provenance=self._provenance(),
        )

    def refined(self, g: int) -> Trace:
        """The same trace on blocks of ``g`` tokens (``g`` divides the block size): block ``b``
        becomes ``b * s .. b * s + s - 1`` of a dense renumbering (``s = block_size // g``), a
        partial last block only its first ``ceil(rest / g)``. Output blocks are dropped
        (decode-time checkpoints left out). One cut for the hit reasons, the planner and the
        fleet, whose hit grids are finer than a trace's hashing block."""
        if not 1 <= g <= self.block_size or self.block_size % g:
            raise ValueError(f"g must divide the block size {self.block_size}, got {g}")
        s = self.block_size // g
        if s == 1:
            return self
        _, dense = np.unique(self.blocks, return_inverse=True)
        want = -(-self.input_len // g)
        expanded = (dense.reshape(-1, 1) * s + np.arange(s)).reshape(-1)
        starts = self.offsets[:-1] * s
        keep = np.repeat(starts - np.concatenate(([0], np.cumsum(want)[:-1])), want)
        t = self
        return make_trace(
            t.name,
            g,
            t.arrival_s,
            t.input_len,
            t.output_len,
            np.concatenate(([0], np.cumsum(want))),
            expanded[np.arange(int(want.sum())) + keep],
            t.session,
            t.kind,
            t.kind_names,
            provenance=t._provenance(),
        )

    def _provenance(self) -> dict:
        """The provenance fields (keyword arguments of ``make_trace``)."""
        return {
            "has_prefix_info": self.has_prefix_info,
            "skipped_rows": self.skipped_rows,
            "skip_reasons": self.skip_reasons,
            "source_format": self.source_format,
        }


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


def make_trace(
    name: str,
    block_size: int,
    arrival_s: np.ndarray,
    input_len: np.ndarray,
    output_len: np.ndarray,
    offsets: np.ndarray,
    blocks: np.ndarray,
    session: np.ndarray,
    kind: np.ndarray,
    kind_names: tuple[str, ...],
    out_offsets: np.ndarray | None = None,
    out_blocks: np.ndarray | None = None,
    *,
    provenance: dict | None = None,
) -> Trace:
    offsets = np.asarray(offsets, dtype=np.int64)
    if out_offsets is not None and out_blocks is not None:
        oo = np.asarray(out_offsets, dtype=np.int64)
        out_offsets = _readonly(oo - oo[0])
        out_blocks = _readonly(np.asarray(out_blocks, dtype=np.int64))
    else:
        out_offsets = out_blocks = None
    return Trace(
        name=name,
        block_size=int(block_size),
        arrival_s=_readonly(np.asarray(arrival_s, dtype=np.float64)),
        input_len=_readonly(np.asarray(input_len, dtype=np.int64)),
        output_len=_readonly(np.asarray(output_len, dtype=np.int64)),
        offsets=_readonly(offsets - offsets[0]),
        blocks=_readonly(np.asarray(blocks, dtype=np.int64)),
        session=_readonly(np.asarray(session, dtype=np.int64)),
        kind=_readonly(np.asarray(kind, dtype=np.int64)),
        kind_names=tuple(kind_names),
        out_offsets=out_offsets,
        out_blocks=out_blocks,
        **(provenance or {}),
    )


def require_prefix_info(trace: Trace, what: str) -> None:
    """``ValueError`` saying plainly that ``what`` cannot be computed from a lengths-only trace."""
    if not trace.has_prefix_info:
        raise ValueError(
            f"{what} cannot be computed from trace {trace.name!r}: its "
            f"{trace.source_format or 'source'} file gives request lengths only, no prefix "
            "information (block hashes or tokens)"
        )


def ideal_prefix_tokens(trace: Trace) -> np.ndarray:
    """Per request, the longest input prefix already seen by an infinite block cache ``[N]``.

    Counts ``min(matched_blocks * block_size, input_len)``: the ceiling any KV-only cache (or a
    hybrid with a checkpoint at every block and no budget) can reach. Refused (``ValueError``)
    for a trace without prefix information.
    """
    require_prefix_info(trace, "the ideal prefix hit")
    seen: set[int] = set()
    out = np.zeros(len(trace), dtype=np.int64)
    blocks = trace.blocks.tolist()
    offs = trace.offsets.tolist()
    b = trace.block_size
    lens = trace.input_len.tolist()
    for i in range(len(trace)):
        ids = blocks[offs[i] : offs[i + 1]]
        m = 0
        for h in ids:
            if h not in seen:
                break
            m += 1
        out[i] = min(m * b, lens[i])
        seen.update(ids)
    return out
