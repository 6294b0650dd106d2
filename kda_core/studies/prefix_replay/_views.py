"""What the prefix_replay study returns per request, and how it is read off the engine.

* ``Timeline``: prompt length, token match, restore point, the replay span ``[restore_at,
  token_match)``, prefill, decode, checkpoint positions and contiguous ``segments`` (start,
  end, phase) with phase in restore / replay / prefill / decode;
* ``TreeSnapshot``: one row per radix node (depth, token span, checkpoint vs tombstone, locks,
  LRU ages, a short label), taken while the request holds its restore lock and after it;
* ``PoolsPanel``: the engine's pool counters after the request (cumulative);
* ``ReplaySteps``: one step per replayed token, the stacked KDA states ``[n, L, H, K, V]`` and
  their relative distance to the state at the token match (exactly 0 there);
* ``ScenarioResult`` (every request of a session) and ``DriftStudy`` (three restores of one
  request). Left out: drawing (the app and plots do it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kda_core._checks import check_int
from kda_core.cache.radix import NodeView
from kda_core.model import TinyHybrid, tokenizer
from kda_core.serve.report import GenerateReport
from kda_core.studies.prefix_replay._scenarios import ARMS


@dataclass(slots=True, frozen=True)
class Timeline:
    prompt_len: int
    token_match: int
    restore_at: int
    replay: tuple[int, int]
    prefill: tuple[int, int]
    decode: tuple[int, int]
    checkpoints: tuple[int, ...]  # positions parked by this request
    segments: tuple[tuple[int, int, str], ...]  # (start, end, phase), contiguous from 0

    @property
    def replayed(self) -> int:
        """Tokens replayed (``token_match - restore_at``; 0: the restore point is the match)."""
        return self.token_match - self.restore_at


@dataclass(slots=True, frozen=True)
class TreeSnapshot:
    """One entry per node (root first, DFS). Ages are logical-clock ticks (-1: no state)."""

    node_id: np.ndarray
    parent: np.ndarray
    depth: np.ndarray
    start: np.ndarray
    end: np.ndarray
    has_state: np.ndarray
    kv_lock: np.ndarray
    state_lock: np.ndarray
    kv_age: np.ndarray
    state_age: np.ndarray
    is_leaf: np.ndarray
    row: np.ndarray  # icicle layout row (root 0)
    label: tuple[str, ...]
    states: int
    tombstones: int


@dataclass(slots=True, frozen=True)
class PoolsPanel:
    active_capacity: int
    active_peak: int
    checkpoint_capacity: int
    checkpoint_used: int
    checkpoint_bytes: int
    checkpoint_slot_bytes: int
    copies: int
    donations: int
    track_writes: int
    evicted_states: int
    evicted_kv_tokens: int
    int8: bool


@dataclass(slots=True, frozen=True)
class ReplaySteps:
    """Steps restore_at..token_match (n = replayed + 1; n = 0 when nothing was restored)."""

    positions: np.ndarray  # [n]
    tokens: np.ndarray  # [n] token consumed to reach the position (-1 at n=0 root)
    token_text: tuple[str, ...]
    dist: np.ndarray  # [n] relative distance to the replayed state at the match; dist[-1] == 0
    state_norm: np.ndarray  # [n]
    states: np.ndarray  # [n, L, H, K, V]
    uncached_error: float  # relative distance of the state at the match to an uncached prefill


@dataclass(slots=True, frozen=True)
class RequestView:
    index: int
    prompt: str
    output: str
    timeline: Timeline
    tree_during: TreeSnapshot
    tree_after: TreeSnapshot
    pools: PoolsPanel
    replay_steps: ReplaySteps
    copies: int
    donations: int
    evicted_states: int
    seconds: float
    output_tokens: tuple[int, ...] = ()  # the decoded token ids (``output`` is their text)

    @property
    def output_readable(self) -> str:
        """``output_tokens`` as one line of decoded text (see ``readable``)."""
        return readable(self.output_tokens)


@dataclass(slots=True, frozen=True)
class ScenarioResult:
    name: str
    policy: str
    spacing: int
    int8: bool
    requests: tuple[RequestView, ...]
    state_hits: int
    restored_tokens: int
    replayed_tokens: int
    prefilled_tokens: int
    prompt_tokens: int
    saved_fraction: float  # restored / prompt tokens


@dataclass(slots=True, frozen=True)
class DriftStudy:
    """Per generated token: max |logits - uncached logits| for three restores of one request."""

    request: int
    token_match: int
    restore_at: int
    exact: np.ndarray  # [n]
    int8: np.ndarray  # [n]
    inconsistent: np.ndarray  # [n]
    exact_tokens: tuple[int, ...]
    int8_tokens: tuple[int, ...]
    inconsistent_tokens: tuple[int, ...]
    uncached_tokens: tuple[int, ...]
    int8_restore_error: tuple[float, float]  # (max abs, rel Frobenius) of the parked state
    policy: str = "interval"  # the settings all three arms were served with
    spacing: int = 32
    checkpoint_slots: int | None = None
    inconsistent_int8: bool = False  # the inconsistent arm restored from INT8 checkpoints

    @property
    def replayed(self) -> int:
        """Tokens the exact arm replayed; 0 means the inconsistent restore IS the exact one."""
        return self.token_match - self.restore_at

    def agree(self, arm: str) -> np.ndarray:
        """[n] bool: the arm's greedy token equals the uncached run's (arm in ``ARMS``)."""
        if arm not in ARMS:
            raise ValueError(f"arm must be one of {ARMS}, got {arm!r}")
        toks = getattr(self, f"{arm}_tokens")
        return np.array(toks, dtype=np.int64) == np.array(self.uncached_tokens, dtype=np.int64)

    def same_tokens(self, arm: str) -> int:
        """How many of the arm's greedy tokens equal the uncached run's."""
        return int(self.agree(arm).sum())


def readable(tokens: Sequence[int]) -> str:
    """Byte tokens as one line of decoded text (`kda_core.model.tokenizer.display`: escapes only for
    bytes that are not valid UTF-8, newlines as ⏎)."""
    return tokenizer.display([int(t) for t in tokens])


def _label(key: tuple, width: int = 18) -> str:
    text = readable(key)
    return text if len(text) <= width else text[: width - 1] + "…"


def tree_snapshot(views: list[NodeView]) -> TreeSnapshot:
    """Arrays + icicle layout of ``RadixStateCache.export()``."""
    rows: dict[int, int] = {}
    next_row = 0
    children: dict[int, int] = {}
    for v in views:
        children[v.parent] = children.get(v.parent, 0) + 1
    for v in views:  # DFS order: a node takes its parent's row if it is the first child
        if v.parent < 0:
            rows[v.id] = 0
            continue
        seen = rows.get(("c", v.parent), 0)  # type: ignore[call-overload]
        if seen == 0:
            rows[v.id] = rows[v.parent]
        else:
            next_row += 1
            rows[v.id] = next_row
        rows[("c", v.parent)] = seen + 1  # type: ignore[index]

    def arr(f: str, dt: type = np.int64) -> np.ndarray:
        return np.array([getattr(v, f) for v in views], dtype=dt)

    has = arr("has_state", bool)
    return TreeSnapshot(
        node_id=arr("id"),
        parent=arr("parent"),
        depth=arr("depth"),
        start=arr("start"),
        end=arr("end"),
        has_state=has,
        kv_lock=arr("kv_lock"),
        state_lock=arr("state_lock"),
        kv_age=arr("kv_age"),
        state_age=arr("state_age"),
        is_leaf=arr("is_leaf", bool),
        row=np.array([rows[v.id] for v in views], dtype=np.int64),
        label=tuple("root" if v.parent < 0 else _label(v.key) for v in views),
        states=int(has.sum()),
        tombstones=int(len(views) - 1 - has.sum()),
    )


def timeline_of(r: GenerateReport) -> Timeline:
    P = len(r.prompt)
    end = P + len(r.tokens)
    segs = []
    for a, b, ph in (
        (0, r.restore_at, "restore"),
        (r.restore_at, r.token_match, "replay"),
        (r.token_match, P, "prefill"),
        (P, end, "decode"),
    ):
        if b > a:
            segs.append((a, b, ph))
    return Timeline(
        prompt_len=P,
        token_match=r.token_match,
        restore_at=r.restore_at,
        replay=(r.restore_at, r.token_match),
        prefill=(r.token_match, P),
        decode=(P, end),
        checkpoints=r.checkpoints,
        segments=tuple(segs),
    )


def replay_steps_of(r: GenerateReport, model: TinyHybrid) -> ReplaySteps:
    steps = [s for s in r.step_log if s.phase in ("restore", "replay")]
    if r.replay_states is None or not steps:
        c = model.config
        shape = (0, len(model.kda_layers), c.n_heads, c.head_dim, c.head_dim)
        e = np.zeros(0)
        return ReplaySteps(
            np.zeros(0, np.int64), np.zeros(0, np.int64), (), e, e, np.zeros(shape), 0.0
        )
    # the engine measured the state at the match against an uncached prefill (record_states)
    unc = float(steps[-1].dist_to_uncached)
    toks = np.array([r.prompt[s.pos - 1] for s in steps], dtype=np.int64)
    labels = tokenizer.token_labels(r.prompt)  # in context: a character's bytes name it
    return ReplaySteps(
        positions=np.array([s.pos for s in steps], dtype=np.int64),
        tokens=toks,
        token_text=tuple(labels[s.pos - 1] for s in steps),
        dist=np.array([s.dist_to_match for s in steps]),
        state_norm=np.array([s.state_norm for s in steps]),
        states=r.replay_states,
        uncached_error=unc,
    )


def heatmap(
    replay_steps: ReplaySteps, step: int, layer: int = 0, head: int = 0, *, delta: bool = False
):
    """State ``[K, V]`` of one (step, KDA layer, head); ``delta``: minus the state at the match."""
    n, L, H = replay_steps.states.shape[:3]
    if n == 0:
        raise ValueError("no replay steps (nothing was restored)")
    step = check_int("step", step, 0, n - 1)
    layer = check_int("layer", layer, 0, L - 1)
    head = check_int("head", head, 0, H - 1)
    S = replay_steps.states[step, layer, head]
    return S - replay_steps.states[-1, layer, head] if delta else S


POOL_COUNTERS: tuple[tuple[str, str], ...] = (
    ("checkpoint slots used", "checkpoint_used"),
    ("COW copies (restores)", "copies"),
    ("donations (track slot -> pool)", "donations"),
    ("evicted states", "evicted_states"),
)
