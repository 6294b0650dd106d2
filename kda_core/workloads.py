"""Request workloads for the trace-driven simulator: the real Mooncake trace and synthetic ones.

A workload is a :class:`Trace`: requests in arrival order, each with an input length, an output
length and the chained ids of its input blocks (``block_size`` tokens per block, the last block
usually partial). Block ids follow the Mooncake convention: two requests share block id ``h`` at
position ``j`` iff their inputs are identical up to and including block ``j``, so the ids can be
loaded straight into a block-level radix tree. The ids of one request are stored in a CSR layout:
``blocks[offsets[i]:offsets[i+1]]``, ``len == ceil(input_len[i] / block_size)``.

Invariants every Trace satisfies (checked by :func:`validate`):
  * arrival times are finite, >= 0 and non-decreasing;
  * ``input_len >= 1``, ``output_len >= 0``;
  * ``offsets[i+1] - offsets[i] == ceil(input_len[i] / block_size)``;
  * chain consistency: a block id at position j > 0 always follows the same parent id, and an id
    never appears at two different depths.

Synthetic generators (seeded, sizes capped with a ``ValueError``):
  * :func:`multi_turn_chat`: each turn's prompt = history + last answer + a new user message;
  * :func:`agentic`: shared system prompt + one of a few tool-definition sets, branching
    sub-tasks, and observation collapse that rewrites history (creates branch points);
  * :func:`one_shot_documents`: long unique documents, no reuse at all;
  * :func:`uniform_prefix`: one long document, then requests that share it up to a uniformly
    random point (the probe for the analytic "replay ~ K/2" model);
  * :func:`mix`: chat + agentic + documents interleaved in time.

Left out: raw token ids (blocks only), output-token hashes (outputs are only reusable by the next
turn of a synthetic session, whose prompt contains them), tokenizer effects.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import numpy as np

MOONCAKE_BLOCK_TOKENS = 512
MAX_REQUESTS = 200_000
MAX_TOTAL_BLOCKS = 20_000_000
MAX_INPUT_TOKENS = 4_000_000
MAX_OUTPUT_TOKENS = 1_000_000

TRACES_DIR = Path(__file__).resolve().parents[1] / "assets" / "traces"
BUNDLED_TRACES: dict[str, str] = {
    "conversation": "mooncake_conversation_trace.jsonl",
    "synthetic": "mooncake_synthetic_trace.jsonl",
}


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

    def __len__(self) -> int:
        return int(self.input_len.shape[0])

    @property
    def n_requests(self) -> int:
        return len(self)

    @property
    def total_input_tokens(self) -> int:
        return int(self.input_len.sum())

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
        return _make_trace(
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
        )


class TraceStats(NamedTuple):
    n_requests: int
    duration_s: float
    total_input_tokens: int
    mean_input: float
    median_input: float
    p99_input: float
    max_input: int
    mean_output: float
    distinct_blocks: int
    ideal_token_hit_rate: float


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


def _offsets(counts: list[int]) -> np.ndarray:
    """CSR offsets ``[len(counts) + 1]`` int64: 0, then the running sum of ``counts``."""
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return offsets


def _csr(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, flat int64 ids) of a list of id lists."""
    offsets = _offsets([len(r) for r in rows])
    flat = np.fromiter((h for r in rows for h in r), dtype=np.int64, count=offsets[-1])
    return offsets, flat


def _make_trace(
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
    )


def validate(trace: Trace) -> None:
    """Check every invariant of the module docstring; ``ValueError`` naming the first failure."""
    n = len(trace)
    if trace.block_size < 1:
        raise ValueError(f"trace.block_size must be >= 1, got {trace.block_size}")
    for field in ("arrival_s", "output_len", "session", "kind"):
        if getattr(trace, field).shape != (n,):
            raise ValueError(f"trace.{field} must have shape [{n}]")
    if trace.offsets.shape != (n + 1,) or trace.offsets[0] != 0:
        raise ValueError(f"trace.offsets must have shape [{n + 1}] and start at 0")
    if trace.offsets[-1] != trace.blocks.shape[0]:
        raise ValueError("trace.offsets[-1] must equal len(trace.blocks)")
    a = trace.arrival_s
    if n and (not np.all(np.isfinite(a)) or a[0] < 0 or np.any(np.diff(a) < 0)):
        raise ValueError("trace.arrival_s must be finite, >= 0 and non-decreasing")
    if n and (trace.input_len.min() < 1 or trace.output_len.min() < 0):
        raise ValueError("trace.input_len must be >= 1 and trace.output_len >= 0")
    want = -(-trace.input_len // trace.block_size)
    if not np.array_equal(np.diff(trace.offsets), want):
        raise ValueError("trace block counts must equal ceil(input_len / block_size)")
    if n and (trace.kind.min() < 0 or trace.kind.max() >= len(trace.kind_names)):
        raise ValueError("trace.kind must index trace.kind_names")
    has_out = trace.out_offsets is not None and trace.out_blocks is not None
    if has_out:
        oo = trace.out_offsets
        if oo.shape != (n + 1,) or oo[0] != 0 or oo[-1] != len(trace.out_blocks):
            raise ValueError(f"trace.out_offsets must have shape [{n + 1}] and cover out_blocks")
        b = trace.block_size
        room = (trace.input_len + trace.output_len) // b - trace.input_len // b
        if np.any(np.diff(oo) > room) or np.any(np.diff(oo) < 0):
            raise ValueError("trace output block counts must be <= floor((in+out)/b) - floor(in/b)")
    parent: dict[int, int] = {}
    blocks = trace.blocks.tolist()
    offs = trace.offsets.tolist()
    outs = trace.out_blocks.tolist() if has_out else []
    ooffs = trace.out_offsets.tolist() if has_out else []
    for i in range(n):
        ids = blocks[offs[i] : offs[i + 1]]
        _check_chain(parent, ids, -1, f"request {i}: block id")
        if has_out:
            n_full = int(trace.input_len[i]) // trace.block_size
            prev = ids[n_full - 1] if n_full else -1
            _check_chain(
                parent, outs[ooffs[i] : ooffs[i + 1]], prev, f"request {i}: output block id"
            )


def _check_chain(parent: dict[int, int], ids: list[int], prev: int, what: str) -> None:
    """Record each id's parent (``prev`` for the first); ValueError when an id seen before had
    another parent. ``what`` starts the message (e.g. "request 3: block id")."""
    for h in ids:
        p = parent.setdefault(h, prev)
        if p != prev:
            raise ValueError(f"{what} {h} follows {prev} here but {p} before")
        prev = h


# ---------------------------------------------------------------------------------------------
# Mooncake JSONL


def _int_field(obj: dict, key: str, lineno: int, lo: int, hi: int) -> int:
    if key not in obj:
        raise ValueError(f"line {lineno}: missing field {key!r}")
    v = obj[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"line {lineno}: {key!r} must be a number, got {v!r}")
    if isinstance(v, float):
        if not math.isfinite(v) or v != int(v):
            raise ValueError(f"line {lineno}: {key!r} must be an integer, got {v!r}")
        v = int(v)
    if not lo <= v <= hi:
        raise ValueError(f"line {lineno}: {key!r} must be in [{lo}, {hi}], got {v}")
    return v


def parse_mooncake_lines(
    lines: Iterable[str],
    *,
    name: str = "mooncake",
    block_size: int = MOONCAKE_BLOCK_TOKENS,
    max_requests: int = MAX_REQUESTS,
) -> Trace:
    """Parse Mooncake JSONL lines (see :func:`load_mooncake`); line numbers start at 1."""
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    if not 1 <= max_requests <= MAX_REQUESTS:
        raise ValueError(f"max_requests must be in [1, {MAX_REQUESTS}], got {max_requests}")
    ts: list[float] = []
    ins: list[int] = []
    outs: list[int] = []
    counts: list[int] = []
    blocks: list[int] = []
    parent: dict[int, int] = {}
    last_t = 0.0
    lineno = 0
    for lineno, raw in enumerate(lines, start=1):  # noqa: B007
        line = raw.strip()
        if not line:
            continue  # blank lines (e.g. a trailing one) carry no request
        if len(ts) >= max_requests:
            raise ValueError(f"line {lineno}: more than max_requests={max_requests} requests")
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"line {lineno}: invalid JSON ({e.msg})") from None
        if not isinstance(obj, dict):
            raise ValueError(f"line {lineno}: expected a JSON object")
        if "timestamp" not in obj:
            raise ValueError(f"line {lineno}: missing field 'timestamp'")
        t = obj["timestamp"]
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
            raise ValueError(f"line {lineno}: 'timestamp' must be a finite number, got {t!r}")
        if t < 0:
            raise ValueError(f"line {lineno}: 'timestamp' must be >= 0, got {t}")
        if t < last_t:
            raise ValueError(f"line {lineno}: 'timestamp' {t} is before the previous {last_t}")
        last_t = float(t)
        n_in = _int_field(obj, "input_length", lineno, 1, MAX_INPUT_TOKENS)
        n_out = _int_field(obj, "output_length", lineno, 0, MAX_OUTPUT_TOKENS)
        if "hash_ids" not in obj:
            raise ValueError(f"line {lineno}: missing field 'hash_ids'")
        h = obj["hash_ids"]
        if not isinstance(h, list):
            raise ValueError(f"line {lineno}: 'hash_ids' must be a list")
        want = -(-n_in // block_size)
        if len(h) != want:
            raise ValueError(
                f"line {lineno}: 'hash_ids' has {len(h)} ids, input_length {n_in} needs "
                f"ceil({n_in}/{block_size}) = {want}"
            )
        prev = -1
        for x in h:
            if isinstance(x, bool) or not isinstance(x, int) or x < 0:
                raise ValueError(f"line {lineno}: 'hash_ids' must be non-negative ints, got {x!r}")
            p = parent.setdefault(x, prev)
            if p != prev:
                raise ValueError(
                    f"line {lineno}: hash id {x} follows {prev} here but {p} on an earlier line"
                )
            prev = x
        if len(blocks) + want > MAX_TOTAL_BLOCKS:
            raise ValueError(f"line {lineno}: more than {MAX_TOTAL_BLOCKS} blocks in total")
        ts.append(float(t) / 1000.0)
        ins.append(n_in)
        outs.append(n_out)
        counts.append(want)
        blocks.extend(h)
    if not ts:
        raise ValueError(f"{name}: the trace has no requests")
    offsets = _offsets(counts)
    n = len(ts)
    return _make_trace(
        name,
        block_size,
        np.array(ts),
        np.array(ins),
        np.array(outs),
        offsets,
        np.array(blocks, dtype=np.int64),
        np.full(n, -1),
        np.zeros(n, dtype=np.int64),
        ("conversation",),
    )


def load_mooncake(
    path: str | Path,
    *,
    block_size: int = MOONCAKE_BLOCK_TOKENS,
    max_requests: int = MAX_REQUESTS,
) -> Trace:
    """Read a Mooncake JSONL trace (``timestamp`` ms, ``input_length``, ``output_length``,
    ``hash_ids`` of ``block_size``-token blocks), streaming it line by line.

    Strict: a bad line (invalid JSON, missing field, non-integer or negative length, timestamp
    going backwards, ``len(hash_ids) != ceil(input_length / block_size)``, a hash id seen after
    two different parents) raises ``ValueError`` naming the line number (counted in the file,
    blank lines included). Blank (whitespace-only) lines are skipped. Timestamps become
    seconds. Capped at ``max_requests`` requests and ``MAX_TOTAL_BLOCKS`` blocks.
    """
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"path must be an existing file, got {str(path)!r}")
    with p.open("r", encoding="utf-8") as f:
        return parse_mooncake_lines(
            f, name=p.stem, block_size=block_size, max_requests=max_requests
        )


@lru_cache(maxsize=4)
def bundled_trace(name: str = "conversation") -> Trace:
    """A bundled Mooncake trace (``"conversation"``, the default real workload, or
    ``"synthetic"``), loaded once per process from ``assets/traces/`` next to the package."""
    if name not in BUNDLED_TRACES:
        raise ValueError(f"name must be one of {sorted(BUNDLED_TRACES)}, got {name!r}")
    return load_mooncake(TRACES_DIR / BUNDLED_TRACES[name])


def ideal_prefix_tokens(trace: Trace) -> np.ndarray:
    """Per request, the longest input prefix already seen by an infinite block cache ``[N]``.

    Counts ``min(matched_blocks * block_size, input_len)``: the ceiling any KV-only cache (or a
    hybrid with a checkpoint at every block and no budget) can reach.
    """
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


def trace_stats(trace: Trace) -> TraceStats:
    """Summary numbers of a trace (lengths in tokens)."""
    if len(trace) == 0:
        raise ValueError("trace must have at least one request")
    lens = trace.input_len
    ideal = ideal_prefix_tokens(trace)
    return TraceStats(
        n_requests=len(trace),
        duration_s=float(trace.arrival_s[-1] - trace.arrival_s[0]),
        total_input_tokens=int(lens.sum()),
        mean_input=float(lens.mean()),
        median_input=float(np.median(lens)),
        p99_input=float(np.percentile(lens, 99)),
        max_input=int(lens.max()),
        mean_output=float(trace.output_len.mean()),
        distinct_blocks=int(np.unique(trace.blocks).shape[0]),
        ideal_token_hit_rate=float(ideal.sum() / lens.sum()),
    )


# ---------------------------------------------------------------------------------------------
# Synthetic workloads

Segment = tuple[int, int]  # (content id, length in tokens)


class _Builder:
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
        self.rng = np.random.default_rng(seed)
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

    def out_ids(self, segs: list[Segment], ids: list[int], out: Segment) -> list[int]:
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
        oids = self.out_ids(segs, ids, out)
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
        return _make_trace(
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


def _check_int(name: str, v: int, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= v <= hi:
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {v!r}")
    return int(v)


def _check_pos(name: str, v: float, lo: float = 0.0, hi: float = 1e9) -> float:
    if not (isinstance(v, (int, float, np.floating)) and math.isfinite(v) and lo <= v <= hi):
        raise ValueError(f"{name} must be a number in [{lo}, {hi}], got {v!r}")
    return float(v)


def _chat_into(
    bld: _Builder,
    n_sessions: int,
    turns: int,
    system_tokens: int,
    user_tokens: float,
    answer_tokens: float,
    session_rate: float,
    think_time_s: float,
    max_context: int,
    sess0: int,
) -> None:
    rng = bld.rng
    system = bld.seg(system_tokens) if system_tokens > 0 else None
    t0 = 0.0
    for s in range(n_sessions):
        t0 += rng.exponential(1.0 / session_rate)
        t = t0
        segs: list[Segment] = [system] if system else []
        prev: tuple[list[Segment], list[int]] | None = None
        n_turns = int(rng.integers(max(1, turns // 2), turns + turns // 2 + 1))
        for _ in range(n_turns):
            segs = segs + [bld.seg(bld.length(user_tokens, 8, 32_768))]
            if sum(n for _, n in segs) > max_context:
                break
            ans, prev = bld.turn(t, segs, prev, answer_tokens, 8192, sess0 + s, "chat")
            segs = segs + [ans]
            t += rng.exponential(think_time_s) + 1e-3


def multi_turn_chat(
    n_sessions: int = 200,
    *,
    turns: int = 8,
    system_tokens: int = 1500,
    user_tokens: float = 300.0,
    answer_tokens: float = 400.0,
    session_rate: float = 2.0,
    think_time_s: float = 30.0,
    max_context: int = 32_768,
    block_size: int = 64,
    seed: int = 0,
) -> Trace:
    """Multi-turn chat: turn t's prompt = system prompt + all earlier (user, answer) pairs + a new
    user message; its output is the answer the next turn's prompt contains.

    Sessions start as a Poisson process (``session_rate`` per second); turns are
    ``think_time_s`` (exponential mean) apart; the number of turns is uniform in
    [turns/2, 3*turns/2]; a session stops once its prompt would exceed ``max_context`` tokens.
    Lengths are log-normal with the given means.
    """
    _check_int("n_sessions", n_sessions, 1, 20_000)
    _check_int("turns", turns, 1, 200)
    _check_int("system_tokens", system_tokens, 0, 200_000)
    _check_pos("user_tokens", user_tokens, 1, 100_000)
    _check_pos("answer_tokens", answer_tokens, 1, 100_000)
    _check_pos("session_rate", session_rate, 1e-6, 1e6)
    _check_pos("think_time_s", think_time_s, 0, 1e6)
    _check_int("max_context", max_context, 1, MAX_INPUT_TOKENS)
    bld = _Builder(block_size, seed, KINDS)
    _chat_into(
        bld,
        n_sessions,
        turns,
        system_tokens,
        user_tokens,
        answer_tokens,
        session_rate,
        think_time_s,
        max_context,
        0,
    )
    return bld.finish(f"chat(n={n_sessions},seed={seed})")


def _agent_into(
    bld: _Builder,
    n_sessions: int,
    steps: int,
    system_tokens: int,
    n_toolsets: int,
    tool_tokens: int,
    task_tokens: float,
    action_tokens: float,
    observation_tokens: float,
    keep_observations: int,
    collapsed_tokens: int,
    branch_prob: float,
    max_branches: int,
    session_rate: float,
    step_time_s: float,
    max_context: int,
    sess0: int,
) -> None:
    rng = bld.rng
    system = bld.seg(system_tokens)
    toolsets = [bld.seg(tool_tokens) for _ in range(n_toolsets)]
    t0 = 0.0
    for s in range(n_sessions):
        t0 += rng.exponential(1.0 / session_rate)
        head = [system, toolsets[int(rng.integers(n_toolsets))]]
        # a thread: (arrival time, fixed head, list of (action, observation) turns, steps left)
        threads: list[tuple[float, list[Segment], list[tuple[Segment, Segment]], int]] = [
            (t0, head + [bld.seg(bld.length(task_tokens, 8, 8192))], [], steps)
        ]
        branches = 0
        prev: tuple[list[Segment], list[int]] | None = None
        while threads:
            t, fixed, turns_, left = threads.pop()
            while left > 0:
                # observation collapse: only the last `keep_observations` stay raw; the one that
                # just fell out of the window becomes a short placeholder (content id -sid)
                n = len(turns_)
                if n > keep_observations:
                    i = n - keep_observations - 1
                    act, obs = turns_[i]
                    if obs[0] > 0:
                        turns_ = [*turns_[:i], (act, (-obs[0], collapsed_tokens)), *turns_[i + 1 :]]
                segs = fixed + [x for pair in turns_ for x in pair]
                if sum(n for _, n in segs) > max_context:
                    break
                act, prev = bld.turn(t, segs, prev, action_tokens, 4096, sess0 + s, "agent")
                obs_len = bld.length(observation_tokens, 1, 32_768)
                turns_ = turns_ + [(act, bld.seg(obs_len))]
                left -= 1
                t += rng.exponential(step_time_s) + 1e-3
                if branches < max_branches and left > 1 and rng.random() < branch_prob:
                    # fork a sub-task: same history + a sub-task message, explored later
                    branches += 1
                    sub = fixed + [x for pair in turns_ for x in pair]
                    sub = sub + [bld.seg(bld.length(task_tokens / 2, 8, 4096))]
                    threads.append(
                        (t + rng.exponential(step_time_s), sub, [], int(rng.integers(1, left + 1)))
                    )


def agentic(
    n_sessions: int = 100,
    *,
    steps: int = 12,
    system_tokens: int = 2000,
    n_toolsets: int = 3,
    tool_tokens: int = 3000,
    task_tokens: float = 300.0,
    action_tokens: float = 150.0,
    observation_tokens: float = 800.0,
    keep_observations: int = 5,
    collapsed_tokens: int = 16,
    branch_prob: float = 0.15,
    max_branches: int = 3,
    session_rate: float = 1.0,
    step_time_s: float = 5.0,
    max_context: int = 65_536,
    block_size: int = 64,
    seed: int = 0,
) -> Trace:
    """Agent loops: shared system prompt + one of ``n_toolsets`` tool-definition blocks + a task,
    then steps of (action = output, observation = tool result) appended to the history.

    Observation collapse (SWE-agent style): observations older than the last
    ``keep_observations`` are replaced by a ``collapsed_tokens`` placeholder, so the history is
    rewritten and the next prompt diverges from the previous one inside the history (branch
    points, partial overlaps). With probability ``branch_prob`` per step (at most
    ``max_branches`` per session) a sub-task forks from the current history. Caps: a thread stops
    once its prompt would exceed ``max_context``.
    """
    _check_int("n_sessions", n_sessions, 1, 20_000)
    _check_int("steps", steps, 1, 500)
    _check_int("system_tokens", system_tokens, 1, 200_000)
    _check_int("n_toolsets", n_toolsets, 1, 1000)
    _check_int("tool_tokens", tool_tokens, 1, 200_000)
    _check_pos("task_tokens", task_tokens, 1, 100_000)
    _check_pos("action_tokens", action_tokens, 1, 100_000)
    _check_pos("observation_tokens", observation_tokens, 1, 100_000)
    _check_int("keep_observations", keep_observations, 0, 1000)
    _check_int("collapsed_tokens", collapsed_tokens, 1, 10_000)
    _check_pos("branch_prob", branch_prob, 0, 1)
    _check_int("max_branches", max_branches, 0, 100)
    _check_pos("session_rate", session_rate, 1e-6, 1e6)
    _check_pos("step_time_s", step_time_s, 0, 1e6)
    _check_int("max_context", max_context, 1, MAX_INPUT_TOKENS)
    bld = _Builder(block_size, seed, KINDS)
    _agent_into(
        bld,
        n_sessions,
        steps,
        system_tokens,
        n_toolsets,
        tool_tokens,
        task_tokens,
        action_tokens,
        observation_tokens,
        keep_observations,
        collapsed_tokens,
        branch_prob,
        max_branches,
        session_rate,
        step_time_s,
        max_context,
        0,
    )
    return bld.finish(f"agentic(n={n_sessions},seed={seed})")


def _docs_into(
    bld: _Builder,
    n_requests: int,
    doc_tokens: float,
    question_tokens: float,
    answer_tokens: float,
    rate: float,
    max_doc: int,
    sess0: int,
) -> None:
    rng = bld.rng
    t = 0.0
    for r in range(n_requests):
        t += rng.exponential(1.0 / rate)
        segs = [
            bld.seg(bld.length(doc_tokens, 1, max_doc)),
            bld.seg(bld.length(question_tokens, 1, 4096)),
        ]
        ids = bld.ids(segs, None)
        bld.add(
            t, segs, ids, bld.length(answer_tokens, 1, 8192), sess0 + r, KINDS.index("document")
        )


def one_shot_documents(
    n_requests: int = 300,
    *,
    doc_tokens: float = 16_000.0,
    question_tokens: float = 100.0,
    answer_tokens: float = 300.0,
    rate: float = 1.0,
    max_doc: int = 131_072,
    block_size: int = 64,
    seed: int = 0,
) -> Trace:
    """One-shot long documents: each request is a fresh document + a question; nothing is reused
    (not even a system prompt), so every checkpoint stored is wasted memory. Poisson arrivals."""
    _check_int("n_requests", n_requests, 1, MAX_REQUESTS)
    _check_pos("doc_tokens", doc_tokens, 1, MAX_INPUT_TOKENS)
    _check_pos("question_tokens", question_tokens, 1, 100_000)
    _check_pos("answer_tokens", answer_tokens, 1, 100_000)
    _check_pos("rate", rate, 1e-6, 1e6)
    _check_int("max_doc", max_doc, 1, MAX_INPUT_TOKENS - 4096)
    bld = _Builder(block_size, seed, KINDS)
    if n_requests * doc_tokens / bld.b > MAX_TOTAL_BLOCKS:
        raise ValueError(
            f"n_requests * doc_tokens / block_size must be <= {MAX_TOTAL_BLOCKS} blocks, got "
            f"{n_requests} * {doc_tokens} / {bld.b}"
        )
    _docs_into(bld, n_requests, doc_tokens, question_tokens, answer_tokens, rate, max_doc, 0)
    return bld.finish(f"documents(n={n_requests},seed={seed})")


def uniform_prefix(
    n_requests: int = 400,
    *,
    doc_tokens: int = 65_536,
    suffix_tokens: int = 256,
    output_tokens: int = 64,
    rate: float = 1.0,
    block_size: int = 16,
    seed: int = 0,
) -> Trace:
    """The analytic-model probe: request 0 is a ``doc_tokens`` document; every later request
    shares it up to a uniformly random token ``U ~ U[0, doc_tokens]`` and continues with
    ``suffix_tokens`` of its own. Token match points are uniform over block boundaries, so with a
    checkpoint every K tokens the mean replay is (K - block_size) / 2 ~ K/2."""
    _check_int("n_requests", n_requests, 2, MAX_REQUESTS)
    _check_int("doc_tokens", doc_tokens, 1, MAX_INPUT_TOKENS // 2)
    _check_int("suffix_tokens", suffix_tokens, 1, 100_000)
    _check_int("output_tokens", output_tokens, 0, MAX_OUTPUT_TOKENS)
    _check_pos("rate", rate, 1e-6, 1e6)
    bld = _Builder(block_size, seed, KINDS)
    if n_requests * (doc_tokens / 2 + suffix_tokens) / bld.b > MAX_TOTAL_BLOCKS:
        raise ValueError(
            f"n_requests * (doc_tokens / 2 + suffix_tokens) / block_size must be <= "
            f"{MAX_TOTAL_BLOCKS} blocks"
        )
    rng = bld.rng
    doc = bld.seg(doc_tokens)
    full = [doc]
    first = bld.ids(full, None)
    kind = KINDS.index("probe")
    t = 0.0
    bld.add(t, full, first, output_tokens, 0, kind)
    for r in range(1, n_requests):
        t += rng.exponential(1.0 / rate)
        u = int(rng.integers(0, doc_tokens + 1))
        segs = ([(doc[0], u)] if u else []) + [bld.seg(suffix_tokens)]
        ids = bld.ids(segs, (full, first))  # shares the document's full blocks inside [0, u)
        bld.add(t, segs, ids, output_tokens, r, kind)
    return bld.finish(f"uniform_prefix(n={n_requests},seed={seed})")


def mix(
    *,
    chat_sessions: int = 120,
    agent_sessions: int = 40,
    documents: int = 80,
    duration_s: float = 600.0,
    block_size: int = 64,
    seed: int = 0,
) -> Trace:
    """Chat, agentic and one-shot-document traffic interleaved over ``duration_s`` seconds (each
    kind with its defaults; session start rates chosen so each kind spans the duration).
    ``Trace.kind`` tells the kinds apart."""
    _check_int("chat_sessions", chat_sessions, 0, 20_000)
    _check_int("agent_sessions", agent_sessions, 0, 20_000)
    _check_int("documents", documents, 0, MAX_REQUESTS)
    _check_pos("duration_s", duration_s, 1e-3, 1e7)
    if chat_sessions + agent_sessions + documents == 0:
        raise ValueError("chat_sessions + agent_sessions + documents must be >= 1")
    bld = _Builder(block_size, seed, KINDS)
    if chat_sessions:
        _chat_into(
            bld, chat_sessions, 8, 1500, 300.0, 400.0, chat_sessions / duration_s, 30.0, 32_768, 0
        )
    if agent_sessions:
        _agent_into(
            bld,
            agent_sessions,
            12,
            2000,
            3,
            3000,
            300.0,
            150.0,
            800.0,
            5,
            16,
            0.15,
            3,
            agent_sessions / duration_s,
            5.0,
            65_536,
            100_000,
        )
    if documents:
        _docs_into(bld, documents, 16_000.0, 100.0, 300.0, documents / duration_s, 131_072, 200_000)
    return bld.finish(f"mix(seed={seed})")


SYNTHETIC = {
    "chat": multi_turn_chat,
    "agentic": agentic,
    "documents": one_shot_documents,
    "uniform_prefix": uniform_prefix,
    "mix": mix,
}


def workload(name: str, **params: object) -> Trace:
    """A workload by name: ``"conversation"`` / ``"synthetic"`` (bundled Mooncake traces) or a
    synthetic generator (``"chat"``, ``"agentic"``, ``"documents"``, ``"uniform_prefix"``,
    ``"mix"``) called with ``params``."""
    if name in BUNDLED_TRACES:
        if params:
            raise ValueError(f"params are not accepted for the bundled trace {name!r}")
        return bundled_trace(name)
    if name not in SYNTHETIC:
        raise ValueError(
            f"name must be one of {sorted([*BUNDLED_TRACES, *SYNTHETIC])}, got {name!r}"
        )
    return SYNTHETIC[name](**params)  # type: ignore[operator]
