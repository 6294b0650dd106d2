"""Streaming trace assembly: rows in file order become the CSR arrays of a Trace, chunk by chunk.

A format's row parser hands each request to :class:`Accumulator` (arrival, lengths, its block
ids or None for a lengths-only row); every ``FLUSH_ROWS`` requests or ``FLUSH_BLOCKS`` ids the
pending ones are checked in bulk for the chain rule of their own ids (``_chains.ChainTable``)
and appended to growing column arrays (``array``, 8 bytes a value), which become the Trace's
numpy arrays without a copy. No line is kept after it is parsed. A malformed row
raises ``ValueError`` naming the source, the line and the field, or (``skip=True``) is skipped,
counted and its reason kept (the first ``MAX_SKIP_REASONS`` in file order). The caps
(``ingest``) are checked as the rows come, a ``ValueError`` naming the line.
Rows without ids get fresh ids at the end (above every id of the file: they share nothing).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable

import numpy as np

from kda_core.workloads._caps import MAX_SKIP_REASONS, MAX_TRACE_BLOCKS, MAX_TRACE_REQUESTS
from kda_core.workloads._chains import ChainTable
from kda_core.workloads._messages import chain_conflict, grouped, n_rows
from kda_core.workloads.ingest import RowError
from kda_core.workloads.traces import Trace, make_trace

_MAX_KINDS = 64
_FLUSH_ROWS = 1 << 16
_FLUSH_BLOCKS = 1 << 21
_MIN_FLUSH_ROWS = 256  # after a refused row: small chunks keep re-checks cheap
_COLUMNS = ("t", "line", "in", "out", "cnt", "sess", "kind", "own", "ocnt")
_STORED = ("t", "in", "out", "cnt", "sess", "kind", "ocnt", "blocks", "oblocks")


class Accumulator:
    """Requests in file order -> a Trace (see the module docstring)."""

    def __init__(
        self,
        source: str,
        block_size: int,
        kind: str | None,
        *,
        skip: bool = False,
        chain_check: bool = True,
        max_requests: int = MAX_TRACE_REQUESTS,
        limit: int | None = None,
    ) -> None:
        self.source, self.b, self.skip = source, int(block_size), skip
        self.max_requests = max_requests
        self.limit = limit  # None: read to the end (more than max_requests is an error)
        self.table = ChainTable() if chain_check else None
        self.n = self.n_blocks = self.skipped = 0
        self.reasons: list[tuple[int, str]] = []
        self.sessions: dict[object, int] = {}
        self.kind_names: list[str] = [kind] if kind is not None else []
        self.has_prefix_info = True
        self.with_outputs = False
        # admitted requests, column by column (growing in place: no chunk list to concatenate)
        self.cols: dict[str, array] = {k: array("d" if k == "t" else "q") for k in _STORED}
        self.flush_rows = _FLUSH_ROWS
        self._reset()

    def _reset(self) -> None:
        # per pending request: (t, line, in, out, blocks, session, kind, own ids?, out blocks)
        self.rows: list[tuple[float, int, int, int, int, int, int, bool, int]] = []
        self.p_blocks, self.p_oblocks = array("q"), array("q")

    @property
    def full(self) -> bool:
        """True once ``limit`` requests are in: the caller stops reading."""
        return self.limit is not None and self.n >= self.limit

    def session(self, key: object) -> int:
        return -1 if key is None else self.sessions.setdefault(key, len(self.sessions))

    def kind(self, name: str) -> int:
        """Index of ``name`` in the trace's kind names (added on first use)."""
        if name not in self.kind_names:
            if len(self.kind_names) >= _MAX_KINDS:
                raise RowError("kind", f"more than {_MAX_KINDS} distinct request kinds ({name!r})")
            self.kind_names.append(name)
        return self.kind_names.index(name)

    def add(
        self,
        lineno: int,
        t: float,
        n_in: int,
        n_out: int,
        ids: Iterable[int] | None,
        session: int = -1,
        kind: int = 0,
        out_ids: list[int] | None = None,
    ) -> None:
        """One request (lengths already checked; ``ids`` has ``ceil(n_in / b)`` entries)."""
        if self.n >= self.max_requests:
            raise ValueError(
                f"{self.source}line {lineno}: more than max_requests={self.max_requests} requests"
            )
        cnt = -(-n_in // self.b)
        n_out_ids = len(out_ids) if out_ids is not None else 0
        if self.n_blocks + cnt + n_out_ids > MAX_TRACE_BLOCKS:
            raise ValueError(f"{self.source}line {lineno}: more than {MAX_TRACE_BLOCKS} block ids")
        self.n += 1
        self.n_blocks += cnt + n_out_ids
        self.rows.append((t, lineno, n_in, n_out, cnt, session, kind, ids is not None, n_out_ids))
        if ids is None:
            self.has_prefix_info = False
            self.p_blocks.extend(array("q", [-1]) * cnt)
        else:
            self.p_blocks.extend(ids)
        if out_ids is not None:
            self.with_outputs = True
            self.p_oblocks.extend(out_ids)
        if len(self.rows) >= self.flush_rows or len(self.p_blocks) >= _FLUSH_BLOCKS:
            self.flush()

    def row_failed(self, lineno: int, err: RowError) -> None:
        """Raise (after the pending rows, whose chain errors come first) or skip and count.
        The reason names the field (prefixed when its message does not)."""
        msg = str(err) if err.field in str(err) else f"{err.field}: {err}"
        if not self.skip:
            self.flush()
            raise ValueError(f"{self.source}line {lineno}: {msg}") from None
        self._note(lineno, msg)

    def _note(self, lineno: int, reason: str) -> None:
        self.skipped += 1
        self.reasons.append((lineno, reason))
        if len(self.reasons) > 8 * MAX_SKIP_REASONS:
            self.reasons = sorted(self.reasons)[:MAX_SKIP_REASONS]

    def _check_chains(self, keep: np.ndarray, cols: dict[str, np.ndarray]) -> None:
        """Chain-check the pending rows that brought ids; refused ones are cleared in ``keep``."""
        own, cnt = cols["own"], cols["cnt"]
        rows = np.flatnonzero(own)
        if self.table is None or not rows.size:
            return
        ids = cols["blocks"][np.repeat(own, cnt)] if rows.size < own.size else cols["blocks"]
        starts = np.cumsum(cnt[rows]) - cnt[rows]
        refused = self.table.admit(ids, starts)
        for r, h, here, before in refused:
            line = int(cols["line"][rows[r]])
            msg = chain_conflict(h, here, before)
            if not self.skip:
                raise ValueError(f"{self.source}line {line}: {msg}")
            keep[rows[r]] = False
            self._note(line, msg)
        shrink = max(_MIN_FLUSH_ROWS, self.flush_rows // 8)
        self.flush_rows = shrink if refused else min(_FLUSH_ROWS, self.flush_rows * 2)

    def flush(self) -> None:
        """Turn the pending rows into a numpy chunk (chain-checked, refused rows dropped)."""
        if not self.rows:
            return
        table = np.array(self.rows, dtype=np.float64)  # every value < 2**53: exact
        cols = {k: table[:, j].astype(np.int64) for j, k in enumerate(_COLUMNS) if j}
        cols["t"], cols["own"] = table[:, 0], cols["own"].astype(bool)
        cols["blocks"] = np.frombuffer(self.p_blocks, dtype=np.int64)
        cols["oblocks"] = np.frombuffer(self.p_oblocks, dtype=np.int64)
        keep = np.ones(cols["in"].size, dtype=bool)
        self._check_chains(keep, cols)
        del cols["line"], cols["own"]
        if not keep.all():
            self.n -= int((~keep).sum())
            self.n_blocks -= int(cols["cnt"][~keep].sum() + cols["ocnt"][~keep].sum())
            cols["blocks"] = cols["blocks"][np.repeat(keep, cols["cnt"])]
            cols["oblocks"] = cols["oblocks"][np.repeat(keep, cols["ocnt"])]
            cols.update({k: v[keep] for k, v in cols.items() if k not in ("blocks", "oblocks")})
        for k, buf in self.cols.items():
            buf.frombytes(memoryview(np.ascontiguousarray(cols[k])).cast("B"))
        self._reset()

    def _skip_report(self) -> tuple[int, tuple[str, ...]]:
        """The count and the first reasons, one entry per distinct reason ('lines 1-5: ...')."""
        first = sorted(self.reasons)[: 8 * MAX_SKIP_REASONS]
        return self.skipped, tuple(grouped(first)[:MAX_SKIP_REASONS])

    def finish(self, name: str, fmt: str, *, relative_time: bool = False) -> Trace:
        """The Trace: fresh ids for rows without ids, arrivals sorted (stable; ``relative_time``
        shifts them to start at 0), the skip report attached."""
        self.flush()
        if not self.cols["in"]:
            n, first = self._skip_report()
            why = f"; {n_rows(n)} skipped: {'; '.join(first)}" if n else ""
            msg = f"{self.source}the trace has no requests{why}"
            raise RowError("rows", msg, skipped=n, reasons=first, format=fmt)
        cat = {
            k: np.frombuffer(v, dtype=np.float64 if k == "t" else np.int64)
            for k, v in self.cols.items()
        }
        self.cols = {}
        first = _check_fresh_room(cat["blocks"], cat["oblocks"])
        if first >= 0:
            _fresh_ids(cat["blocks"], first)
        t = cat["t"] - cat["t"].min() if relative_time else cat["t"]
        if t.size > 1 and np.any(np.diff(t) < 0):
            order = np.argsort(t, kind="stable")
            t = t[order]
            cat["blocks"] = _gather_csr(cat["blocks"], cat["cnt"], order)
            cat["oblocks"] = _gather_csr(cat["oblocks"], cat["ocnt"], order)
            cat.update({k: cat[k][order] for k in ("in", "out", "cnt", "ocnt", "sess", "kind")})
        skipped, reasons = self._skip_report()
        prov = dict(
            has_prefix_info=self.has_prefix_info,
            skipped_rows=skipped,
            skip_reasons=reasons,
            source_format=fmt,
        )
        outs = (_offsets(cat["ocnt"]), cat["oblocks"]) if self.with_outputs else (None, None)
        return make_trace(
            name,
            self.b,
            t,
            cat["in"],
            cat["out"],
            _offsets(cat["cnt"]),
            cat["blocks"],
            cat["sess"],
            cat["kind"],
            tuple(self.kind_names),
            *outs,
            provenance=prov,
        )


def _offsets(counts: np.ndarray) -> np.ndarray:
    out = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def _gather_csr(flat: np.ndarray, counts: np.ndarray, order: np.ndarray) -> np.ndarray:
    """The CSR rows of ``flat`` (``counts`` each) in the request order ``order``."""
    starts = _offsets(counts)[:-1][order]
    new_counts = counts[order]
    new_starts = _offsets(new_counts)[:-1]
    return flat[np.repeat(starts - new_starts, new_counts) + np.arange(int(new_counts.sum()))]


def _check_fresh_room(blocks: np.ndarray, out_blocks: np.ndarray) -> int:
    """The first fresh id (above every id of the file), refused if the fresh ids would pass
    2**63; -1 when no row needs fresh ids."""
    step = 1 << 22
    n = sum(int(np.count_nonzero(blocks[i : i + step] < 0)) for i in range(0, blocks.size, step))
    if not n:
        return -1
    top = max(int(blocks.max()), int(out_blocks.max()) if out_blocks.size else -1)
    if top + n >= 2**63:
        raise ValueError("the trace's hash ids leave no room for fresh ids (ids near 2**63)")
    return top + 1


def _fresh_ids(blocks: np.ndarray, first: int) -> None:
    """Replace the -1 placeholders of rows without ids by ``first``, ``first + 1``, ... in
    file order (a slice at a time: no temporary the size of the whole array)."""
    step = 1 << 22
    for i in range(0, blocks.size, step):
        part = blocks[i : i + step]
        fresh = part < 0
        k = int(np.count_nonzero(fresh))
        part[fresh] = np.arange(first, first + k, dtype=np.int64)
        first += k
