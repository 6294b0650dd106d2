"""Builds synthetic traces: prompts as segment lists, turned into chained block ids.

Used by ``kda_core.workloads._synthetic``; equal prefixes get equal block ids, so a synthetic
trace loads into the block-level radix tree exactly as a Mooncake one does. Output blocks (the
ids of input + output beyond the input's full blocks) are recorded too, so the next turn of a
session can hit a state saved after the last decoded token.
"""

from __future__ import annotations

import math

import numpy as np

from kda_core._checks import check_seed
from kda_core.workloads._caps import MAX_INPUT_TOKENS, MAX_REQUESTS, MAX_TOTAL_BLOCKS
from kda_core.workloads.traces import Trace, make_trace

Segment = tuple[int, int]  # (content id, length in tokens)


def _csr(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, flat int64 ids) of a list of id lists."""
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=offsets[1:])
    flat = np.fromiter((h for r in rows for h in r), dtype=np.int64, count=offsets[-1])
    return offsets, flat


class TraceBuilder:
    """Accumulates requests; turns segment lists into chained block ids.

    A prompt is a list of segments (content id, token count). Block j covers tokens
    [j*b, min((j+1)*b, L)); its signature is the tuple of (content id, offset, length) pieces it
    covers, and its id is interned from (parent id, signature), so equal prefixes get equal ids.
    """

    __slots__ = ("b", "rng", "table", "next_seg", "rows", "n_blocks", "kind_names")

    def __init__(self, block_size: int, seed: int, kind_names: tuple[str, ...]) -> None:
        if not 1 <= block_size <= 65536:
            raise ValueError(f"block_size must be in [1, 65536], got {block_size}")
        self.b = int(block_size)
        self.rng = np.random.default_rng(check_seed("seed", seed))
        self.table: dict[tuple[int, tuple[tuple[int, int, int], ...]], int] = {}
        self.next_seg = 0
        self.rows: list[tuple[float, int, int, list[int], int, int, list[int]]] = []
        self.n_blocks = 0
        self.kind_names = kind_names

    @staticmethod
    def _check_blocks(n_blocks: int) -> None:
        if n_blocks > MAX_TOTAL_BLOCKS:
            raise ValueError(
                f"the workload exceeds {MAX_TOTAL_BLOCKS} blocks; "
                "lower its size or raise block_size"
            )

    def seg(self, length: int) -> Segment:
        self.next_seg += 1
        return (self.next_seg, int(length))

    def ids(self, segs: list[Segment], prev: tuple[list[Segment], list[int]] | None) -> list[int]:
        b = self.b
        total = sum(n for _, n in segs)
        if total > MAX_INPUT_TOKENS:
            raise ValueError(f"a prompt reached {total} tokens; the cap is {MAX_INPUT_TOKENS}")
        self._check_blocks(self.n_blocks + -(-total // b))
        out: list[int] = []
        start_tok = 0
        if prev is not None:
            psegs, pids = prev
            shared = 0
            for s, t in zip(segs, psegs):
                if s[0] != t[0]:
                    break
                shared += min(s[1], t[1])  # same content id: same tokens, maybe truncated
                if s[1] != t[1]:
                    break
            reuse = min(shared // b, len(pids))
            out = pids[:reuse]
            start_tok = reuse * b
        parent = out[-1] if out else -1
        # locate the segment holding start_tok
        si, seg_start = 0, 0
        while si < len(segs) and seg_start + segs[si][1] <= start_tok:
            seg_start += segs[si][1]
            si += 1
        pos = start_tok
        table = self.table
        while pos < total:
            end = min(pos + b, total)
            pieces = []
            p = pos
            while p < end:
                sid, slen = segs[si]
                off = p - seg_start
                take = min(slen - off, end - p)
                pieces.append((sid, off, take))
                p += take
                if off + take == slen:
                    seg_start += slen
                    si += 1
            key = (parent, tuple(pieces))
            h = table.get(key)
            if h is None:
                h = len(table)
                table[key] = h
            out.append(h)
            parent = h
            pos = end
        return out

    def _out_ids(self, segs: list[Segment], ids: list[int], out: Segment) -> list[int]:
        """Ids of the full blocks of ``segs + [out]`` beyond the full blocks of ``segs``."""
        n_in = sum(n for _, n in segs)
        full = self.ids([*segs, out], (segs, ids))
        return full[n_in // self.b : (n_in + out[1]) // self.b]

    def add(
        self,
        t: float,
        segs: list[Segment],
        ids: list[int],
        n_out: int,
        sess: int,
        kind: int,
        out_ids: list[int] | None = None,
    ) -> None:
        if len(self.rows) >= MAX_REQUESTS:
            raise ValueError(f"the workload exceeds {MAX_REQUESTS} requests; lower its size")
        self.n_blocks += len(ids)
        self._check_blocks(self.n_blocks)
        n_in = sum(n for _, n in segs)
        self.rows.append((float(t), n_in, int(n_out), ids, sess, kind, out_ids or []))

    def turn(
        self,
        t: float,
        segs: list[Segment],
        prev: tuple[list[Segment], list[int]] | None,
        mean_out: float,
        max_out: int,
        sess: int,
        kind: str,
    ) -> tuple[Segment, tuple[list[Segment], list[int]]]:
        """Add one request of a session: prompt ``segs`` (sharing ids with ``prev``), output a
        new log-normal segment in [1, ``max_out``] whose full blocks the next turn can reuse.
        Returns (output segment, the ``prev`` for the next turn)."""
        ids = self.ids(segs, prev)
        out = self.seg(self.length(mean_out, 1, max_out))
        oids = self._out_ids(segs, ids, out)
        self.add(t, segs, ids, out[1], sess, KINDS.index(kind), oids)
        return out, (segs, ids)

    def length(self, mean: float, lo: int, hi: int) -> int:
        """A log-normal length (sigma 0.6) with the given mean, clipped to [lo, hi]."""
        sigma = 0.6
        mu = math.log(max(mean, 1.0)) - sigma * sigma / 2
        return int(min(max(round(self.rng.lognormal(mu, sigma)), lo), hi))

    def finish(self, name: str) -> Trace:
        if not self.rows:
            raise ValueError(f"{name}: the workload has no requests")
        order = sorted(range(len(self.rows)), key=lambda i: (self.rows[i][0], i))
        rows = [self.rows[i] for i in order]
        offsets, blocks = _csr([r[3] for r in rows])
        out_offsets, out_blocks = _csr([r[6] for r in rows])
        return make_trace(
            name,
            self.b,
            np.array([r[0] for r in rows]),
            np.array([r[1] for r in rows]),
            np.array([r[2] for r in rows]),
            offsets,
            blocks,
            np.array([r[4] for r in rows]),
            np.array([r[5] for r in rows]),
            self.kind_names,
            out_offsets,
            out_blocks,
        )


KINDS: tuple[str, ...] = ("chat", "agent", "document", "probe")


def check_pos(name: str, v: float, lo: float = 0.0, hi: float = 1e9) -> float:
    if not (isinstance(v, (int, float, np.floating)) and math.isfinite(v) and lo <= v <= hi):
        raise ValueError(f"{name} must be a number in [{lo}, {hi}], got {v!r}")
    return float(v)
