"""Prefix hit vs state hit, for real: requests through the caching engine (the prefix_replay app).

``run_scenario`` sends a scenario's prompts (text) one by one through ``kda_core.engine.Engine``
and returns, per request, everything the app and the replay-timeline figure draw, computed
once (stepping through the replay only indexes precomputed arrays):

* ``Timeline`` - prompt length, token match, restore point, the replay span ``[restore_at,
  token_match)``, prefill ``[token_match, prompt_len)``, decode, checkpoint positions, and
  contiguous ``segments`` (start, end, phase) with phase in restore (reused from the
  checkpoint), replay, prefill, decode;
* ``TreeSnapshot`` (twice: ``tree_during`` while the request holds its restore lock, and
  ``tree_after`` after insert/eviction) - one row per node: depth, token span, checkpoint vs
  tombstone, lock counts, LRU ages, leaf flag, a short text label and an icicle layout
  (``row``: DFS leaf order; x = token span);
* ``PoolsPanel`` - active / checkpoint slots, bytes, COW copies, donations, track writes and
  evictions (cumulative over the scenario so far);
* ``ReplayTrace`` - one step per replayed token: position, token, the stacked KDA states
  ``states [n, L, H, K, V]``, ``dist [n]`` = relative Frobenius distance of all KDA states to
  the replayed state at the token match (exactly 0 there); ``uncached_error`` is that state's
  relative distance to an uncached prefill of the same tokens (the engine's
  ``dist_to_uncached`` at the match): ~1e-16 for exact restores, the propagated quantization
  error (~1e-3) with INT8 checkpoints. ``heatmap`` slices one (step, layer, head).

``Session`` serves the same requests incrementally: ``Session.new(...)``, ``send(prompt) ->
RequestView`` (one request's cost), ``result() -> ScenarioResult``; ``run_scenario`` is built
on it (identical views), ``serve(...)`` returns a private (forked) served session to extend.

``restore_drift`` runs a scenario three ways (exact restore, INT8 checkpoints, and the
inconsistent teaching restore for one request: MLA KV at the token match, KDA state at the
checkpoint, no replay) under a session's settings (policy, spacing, checkpoint slots, INT8
parking for the inconsistent arm) and returns the per-token max |logit - uncached logit| of
each.

Results are cached per argument tuple (``functools.lru_cache``): treat them as read-only.
Left out: concurrency (one request at a time), sampling (greedy), scenario texts beyond the
three built-ins (``prompts=`` takes any texts).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from kda_core import policy as pol
from kda_core import tokenizer
from kda_core.model import TinyHybrid, encode
from kda_core.radix import NodeView
from kda_core.serve.engine import Engine, GenerateReport

MAX_PROMPTS = 12
MAX_PROMPT_TOKENS = 1024
MAX_NEW = 64
POLICIES: tuple[str, ...] = ("interval", "sglang", "vllm", "marconi")
# the three restores of ``restore_drift`` in a fixed order (series colours follow it)
ARMS: tuple[str, ...] = ("exact", "int8", "inconsistent")

_SYS = (
    "System: You are Kimi, a concise assistant. Answer in one line.\n"
    "Tools: weather(city) -> forecast; calc(expr) -> number; search(q) -> links.\n"
)
_DOC = (
    "Document: The Delta rule updates a memory matrix S by writing v along k after erasing "
    "what S already stored along k. Kimi Delta Attention adds a per-channel decay, so each key "
    "channel forgets at its own rate. Its state has a fixed size, unlike a KV cache, which "
    "grows with every token.\n"
)


@dataclass(slots=True, frozen=True)
class Scenario:
    title: str
    title_zh: str
    prompts: tuple[str, ...]
    note: str


SCENARIOS: dict[str, Scenario] = {
    "system_tools_branches": Scenario(
        "System prompt + tools, two user branches",
        "系统提示 + 工具，两个用户分支",
        (
            _SYS + "User: What's the weather in Paris?\nAssistant:",
            _SYS + "User: Compute 17*23.\nAssistant:",
            _SYS + "User: What's the weather in Berlin?\nAssistant:",
        ),
        "Both branches share the system prompt; each later request matches text past the "
        "last checkpoint on its path, so it restores earlier and replays up to the match.",
    ),
    "multi_turn": Scenario(
        "Multi-turn chat (English and Chinese)",
        "多轮对话（中英文）",
        (
            _SYS + "User: Hi, I'm Ana.\nAssistant:",
            _SYS + "User: Hi, I'm Ana.\nAssistant: Hello Ana!\nUser: 你好吗？\nAssistant:",
            _SYS + "User: Hi, I'm Ana.\nAssistant: Hello Ana!\nUser: 你好吗？\nAssistant: 很好。"
            "\nUser: What's my name?\nAssistant:",
        ),
        "Every turn extends the previous one: the hit grows with the conversation.",
    ),
    "long_document": Scenario(
        "Long document, several questions",
        "长文档，多个问题",
        (
            _DOC + "Q: What does the decay act on?\nA:",
            _DOC + "Q: Why is the state fixed-size?\nA:",
            _DOC + "Q: What does the decay do?\nA:",
        ),
        "The document is computed once; each question restores at the document's last "
        "checkpoint and replays the shared question prefix.",
    ),
}
SCENARIO_NAMES: tuple[str, ...] = tuple(SCENARIOS)

_MODEL: list[TinyHybrid] = []


def _model() -> TinyHybrid:
    if not _MODEL:
        _MODEL.append(TinyHybrid())
    return _MODEL[0]


# ---------------------------------------------------------------------------------------------
# results


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
class ReplayTrace:
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
    trace: ReplayTrace
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

    @property
    def replaying(self) -> tuple[int, ...]:
        """Indices of the requests that replayed at least one token."""
        return tuple(r.index for r in self.requests if r.timeline.replayed > 0)


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


# ---------------------------------------------------------------------------------------------
# helpers


def _check_int(value: object, name: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {value!r}")
    if not lo <= int(value) <= hi:
        raise ValueError(f"{name} must be in [{lo}, {hi}], got {value}")
    return int(value)


def make_policy(name: str, spacing: int) -> pol.Policy:
    """The scenario policy: ``spacing`` is the interval (interval, plus a checkpoint at the
    request end so later requests match deep and replay), grid (sglang) or block (vllm, mode
    "all"); marconi places by branch points and ignores it."""
    if name not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {name!r}")
    spacing = _check_int(spacing, "spacing", 1, 1024)
    if name == "interval":
        return pol.make("interval", every=spacing, request_end=True)
    if name == "sglang":
        return pol.make("sglang", grid=spacing, track_interval=spacing)
    if name == "vllm":
        return pol.make("vllm", mode="all", block_size=spacing)
    return pol.make("marconi")


def _prompts(name: str | None, prompts: tuple[str, ...] | None) -> tuple[str, ...]:
    if prompts is None:
        if name not in SCENARIOS:
            raise ValueError(f"name must be one of {SCENARIO_NAMES}, got {name!r}")
        return SCENARIOS[name].prompts
    if isinstance(prompts, str) or not isinstance(prompts, (tuple, list)):
        raise ValueError("prompts must be a tuple of texts")
    out = tuple(prompts)
    if not 1 <= len(out) <= MAX_PROMPTS:
        raise ValueError(f"prompts must hold 1 to {MAX_PROMPTS} texts, got {len(out)}")
    for p in out:
        if not isinstance(p, str) or not p:
            raise ValueError("prompts must be non-empty texts")
        if len(encode(p)) > MAX_PROMPT_TOKENS:
            raise ValueError(f"prompts: at most {MAX_PROMPT_TOKENS} tokens (UTF-8 bytes) each")
    return out


def readable(tokens: Sequence[int]) -> str:
    """Byte tokens as one line of decoded text (`kda_core.tokenizer.display`: escapes only for
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


def _timeline(r: GenerateReport) -> Timeline:
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


def _trace(r: GenerateReport, model: TinyHybrid) -> ReplayTrace:
    steps = [s for s in r.trace if s.phase in ("restore", "replay")]
    if r.replay_states is None or not steps:
        c = model.config
        shape = (0, len(model.kda_layers), c.n_heads, c.head_dim, c.head_dim)
        e = np.zeros(0)
        return ReplayTrace(
            np.zeros(0, np.int64), np.zeros(0, np.int64), (), e, e, np.zeros(shape), 0.0
        )
    # the engine measured the state at the match against an uncached prefill (record_states)
    unc = float(steps[-1].dist_to_uncached)
    toks = np.array([r.prompt[s.pos - 1] for s in steps], dtype=np.int64)
    labels = tokenizer.token_labels(r.prompt)  # in context: a character's bytes name it
    return ReplayTrace(
        positions=np.array([s.pos for s in steps], dtype=np.int64),
        tokens=toks,
        token_text=tuple(labels[s.pos - 1] for s in steps),
        dist=np.array([s.dist_to_match for s in steps]),
        state_norm=np.array([s.state_norm for s in steps]),
        states=r.replay_states,
        uncached_error=unc,
    )


def heatmap(trace: ReplayTrace, step: int, layer: int = 0, head: int = 0, *, delta: bool = False):
    """State ``[K, V]`` of one (step, KDA layer, head); ``delta``: minus the state at the match."""
    n, L, H = trace.states.shape[:3]
    if n == 0:
        raise ValueError("trace has no replay steps (nothing was restored)")
    step = _check_int(step, "step", 0, n - 1)
    layer = _check_int(layer, "layer", 0, L - 1)
    head = _check_int(head, "head", 0, H - 1)
    S = trace.states[step, layer, head]
    return S - trace.states[-1, layer, head] if delta else S


# ---------------------------------------------------------------------------------------------
# studies


def _check_settings(
    policy: str,
    spacing: int,
    int8: bool,
    checkpoint_slots: int | None,
    max_new_tokens: int,
) -> tuple[str, int, bool, int | None, int]:
    make_policy(policy, spacing)  # validates policy and spacing
    if not isinstance(int8, bool):
        raise ValueError(f"int8 must be a bool, got {int8!r}")
    if checkpoint_slots is not None:
        checkpoint_slots = _check_int(checkpoint_slots, "checkpoint_slots", 1, 4096)
    n = _check_int(max_new_tokens, "max_new_tokens", 1, MAX_NEW)
    return policy, int(spacing), int8, checkpoint_slots, n


def _check_prompt(prompt: object) -> str:
    if not isinstance(prompt, str) or not prompt:
        raise ValueError("prompt must be a non-empty text")
    if len(encode(prompt)) > MAX_PROMPT_TOKENS:
        raise ValueError(f"prompt: at most {MAX_PROMPT_TOKENS} tokens (UTF-8 bytes) each")
    return prompt


@dataclass(slots=True, eq=False)
class Session:
    """One engine serving requests incrementally: the state behind ``run_scenario``.

    ``Session.new(...)`` builds an empty engine under the settings; ``send(prompt)`` serves ONE
    request and returns its ``RequestView`` (cost: that request only, not the session so far);
    ``result()`` gives the ``ScenarioResult`` of every request sent so far (built once per
    length, then the same object). ``run_scenario(prompts=P)`` is exactly
    ``Session.new(...)`` + ``send`` of each prompt + ``result()`` (tests: identical views).

    ``send`` mutates the session (its engine). ``fork()`` is an independent copy (the engine
    deep-copied, the TinyHybrid weights and the immutable views shared: ~ms): fork before
    sending from a session another holder may still use (the app's ``gr.State``, the
    ``serve`` cache). At most ``MAX_PROMPTS`` requests; settings are fixed per session (a new
    setting means a new engine: re-serve the prompts). Memory: besides the views, the engine
    holds its checkpoints (~0.2 MB each native, at most ``checkpoint_slots``, default 256)
    and the tree's MLA KV (measured: ~7 MB after 12 requests of ~110 tokens, spacing 32).
    """

    name: str
    policy: str
    spacing: int
    int8: bool
    checkpoint_slots: int | None
    strategy: str
    max_new_tokens: int
    engine: Engine
    views: tuple[RequestView, ...] = ()
    peak: int = 0  # most active slots in use at once, over the session so far
    _result: ScenarioResult | None = None

    @classmethod
    def new(
        cls,
        name: str = "custom",
        *,
        policy: str = "interval",
        spacing: int = 32,
        int8: bool = False,
        checkpoint_slots: int | None = None,
        strategy: str = "extra_buffer",
        max_new_tokens: int = 6,
    ) -> Session:
        """An empty session; arguments as in ``run_scenario`` (``name`` only labels the result:
        a built-in scenario name or "custom")."""
        if name != "custom" and name not in SCENARIOS:
            raise ValueError(f"name must be 'custom' or one of {SCENARIO_NAMES}, got {name!r}")
        policy, spacing, int8, slots, n = _check_settings(
            policy, spacing, int8, checkpoint_slots, max_new_tokens
        )
        engine = Engine(
            make_policy(policy, spacing),
            int8_checkpoints=int8,
            checkpoint_slots=slots,
            strategy=strategy,
            model=_model(),
        )
        return cls(name, policy, spacing, int8, slots, strategy, n, engine)

    @property
    def prompts(self) -> tuple[str, ...]:
        return tuple(v.prompt for v in self.views)

    def fork(self, name: str | None = None) -> Session:
        """An independent copy (``name``: relabel it, e.g. "custom" once the reader adds texts)."""
        model = self.engine.model
        return self._copy(copy.deepcopy(self.engine, {id(model): model}), name)

    def __deepcopy__(self, memo: dict) -> Session:
        """``copy.deepcopy`` == ``fork()``: the model weights and the immutable views are shared."""
        model = self.engine.model
        memo.setdefault(id(model), model)
        return self._copy(copy.deepcopy(self.engine, memo), None)

    def _copy(self, engine: Engine, name: str | None) -> Session:
        return Session(
            self.name if name is None else name,
            self.policy,
            self.spacing,
            self.int8,
            self.checkpoint_slots,
            self.strategy,
            self.max_new_tokens,
            engine,
            self.views,
            self.peak,
            self._result if name is None else None,
        )

    def send(self, prompt: str) -> RequestView:
        """Serve one more request (a non-empty text of at most ``MAX_PROMPT_TOKENS`` UTF-8
        bytes) through this session's engine. On error the session is unchanged."""
        prompt = _check_prompt(prompt)
        if len(self.views) >= MAX_PROMPTS:
            raise ValueError(f"prompts: a session holds at most {MAX_PROMPTS} requests")
        engine = self.engine
        snaps: dict[str, TreeSnapshot] = {}
        peak = [self.peak]

        def observe(stage: str, eng: Engine) -> None:
            snaps[stage] = tree_snapshot(eng.tree.export())
            peak[0] = max(peak[0], eng.active.n_used)

        r = engine.generate(prompt, self.max_new_tokens, record_states=True, observe=observe)
        st = engine.stats()
        ps = r.pools
        view = RequestView(
            index=len(self.views),
            prompt=prompt,
            output=r.text,
            timeline=_timeline(r),
            tree_during=snaps["restored"],
            tree_after=snaps["finished"],
            pools=PoolsPanel(
                active_capacity=ps.active_capacity,
                active_peak=peak[0],
                checkpoint_capacity=ps.checkpoint_capacity,
                checkpoint_used=ps.checkpoint_used,
                checkpoint_bytes=ps.checkpoint_bytes,
                checkpoint_slot_bytes=engine.checkpoints.slot_bytes,
                copies=ps.copies,
                donations=ps.donations,
                track_writes=ps.track_writes,
                evicted_states=st.evicted_states,
                evicted_kv_tokens=st.evicted_kv_tokens,
                int8=ps.int8,
            ),
            trace=_trace(r, engine.model),
            copies=r.copies,
            donations=r.donations,
            evicted_states=r.evicted_states,
            seconds=r.seconds,
            output_tokens=tuple(int(t) for t in r.tokens),
        )
        self.views = (*self.views, view)
        self.peak = peak[0]
        self._result = None
        return view

    def result(self) -> ScenarioResult:
        """Every request sent so far (at least one), with the engine's cumulative counters."""
        if not self.views:
            raise ValueError("the session is empty: send a prompt first")
        if self._result is None:
            st = self.engine.stats()
            self._result = ScenarioResult(
                name=self.name,
                policy=self.policy,
                spacing=self.spacing,
                int8=self.int8,
                requests=self.views,
                state_hits=st.state_hits,
                restored_tokens=st.restored_tokens,
                replayed_tokens=st.replayed_tokens,
                prefilled_tokens=st.prefilled_tokens,
                prompt_tokens=st.prompt_tokens,
                saved_fraction=st.prefill_saved_fraction,
            )
        return self._result


@lru_cache(maxsize=16)
def _served(
    prompts: tuple[str, ...],
    policy: str,
    spacing: int,
    int8: bool,
    checkpoint_slots: int | None,
    strategy: str,
    max_new_tokens: int,
    name: str,
) -> Session:
    s = Session.new(
        name,
        policy=policy,
        spacing=spacing,
        int8=int8,
        checkpoint_slots=checkpoint_slots,
        strategy=strategy,
        max_new_tokens=max_new_tokens,
    )
    for p in prompts:
        s.send(p)
    s.result()
    return s


def _served_args(
    name: str,
    prompts: tuple[str, ...] | None,
    policy: str,
    spacing: int,
    int8: bool,
    checkpoint_slots: int | None,
    strategy: str,
    max_new_tokens: int,
) -> tuple:
    ps = _prompts(name, prompts)
    policy, spacing, int8, slots, n = _check_settings(
        policy, spacing, int8, checkpoint_slots, max_new_tokens
    )
    label = name if prompts is None else "custom"
    return ps, policy, spacing, int8, slots, strategy, n, label


def serve(
    name: str = "system_tools_branches",
    *,
    prompts: tuple[str, ...] | None = None,
    policy: str = "interval",
    spacing: int = 32,
    int8: bool = False,
    checkpoint_slots: int | None = None,
    strategy: str = "extra_buffer",
    max_new_tokens: int = 6,
) -> Session:
    """A session that has served the scenario's prompts (or ``prompts``): a fork of a cached
    one, so the caller may ``send`` more. ``serve(...).result()`` is ``run_scenario(...)``
    (the same object)."""
    return _served(
        *_served_args(name, prompts, policy, spacing, int8, checkpoint_slots, strategy,
                      max_new_tokens)
    ).fork()  # fmt: skip


def run_scenario(
    name: str = "system_tools_branches",
    *,
    prompts: tuple[str, ...] | None = None,
    policy: str = "interval",
    spacing: int = 32,
    int8: bool = False,
    checkpoint_slots: int | None = None,
    strategy: str = "extra_buffer",
    max_new_tokens: int = 6,
) -> ScenarioResult:
    """Send a scenario's prompts (or ``prompts``) through a fresh engine, one by one
    (``Session.new`` + ``send`` each + ``result``).

    ``spacing`` in [1, 1024] (see ``make_policy``); ``checkpoint_slots`` None or [1, 4096];
    ``max_new_tokens`` in [1, 64]. Deterministic; cached per arguments.
    """
    return _served(
        *_served_args(name, prompts, policy, spacing, int8, checkpoint_slots, strategy,
                      max_new_tokens)
    ).result()  # fmt: skip


@lru_cache(maxsize=16)
def _drift(
    prompts: tuple[str, ...],
    request: int,
    policy: str,
    spacing: int,
    checkpoint_slots: int | None,
    int8: bool,
    n: int,
) -> DriftStudy:
    model = _model()

    def history(q: bool) -> Engine:  # every earlier request served exactly
        e = Engine(
            make_policy(policy, spacing),
            int8_checkpoints=q,
            checkpoint_slots=checkpoint_slots,
            model=model,
        )
        for p in prompts[:request]:
            e.generate(p, n)
        return e

    native, quant = history(False), history(True)
    # the inconsistent restore runs on a copy of the session-like engine (native or INT8)
    mine = copy.deepcopy(quant if int8 else native, {id(model): model})
    bad = mine.generate(prompts[request], n, reference=True, restore="inconsistent")
    exact = native.generate(prompts[request], n, reference=True)
    q = quant.generate(prompts[request], n, reference=True)
    assert exact.ref_logits is not None and q.ref_logits is not None
    assert bad.ref_logits is not None
    ref = exact.ref_logits
    return DriftStudy(
        request=request,
        token_match=exact.token_match,
        restore_at=exact.restore_at,
        exact=np.abs(exact.logits - ref).max(axis=1),
        int8=np.abs(q.logits - ref).max(axis=1),
        inconsistent=np.abs(bad.logits - ref).max(axis=1),
        exact_tokens=tuple(exact.tokens),
        int8_tokens=tuple(q.tokens),
        inconsistent_tokens=tuple(bad.tokens),
        uncached_tokens=tuple(int(t) for t in ref.argmax(axis=1)),
        int8_restore_error=q.restore_error,
        policy=policy,
        spacing=spacing,
        checkpoint_slots=checkpoint_slots,
        inconsistent_int8=int8,
    )


def restore_drift(
    name: str = "system_tools_branches",
    request: int = -1,
    *,
    prompts: tuple[str, ...] | None = None,
    policy: str = "interval",
    spacing: int = 32,
    checkpoint_slots: int | None = None,
    int8: bool = False,
    max_new_tokens: int = 16,
) -> DriftStudy:
    """How far the logits of request ``request`` drift from an uncached run when it is restored
    exactly, from an INT8 checkpoint, or inconsistently (MLA at the match, KDA at the
    checkpoint, no replay). Earlier requests are served exactly to fill the cache.

    ``policy``, ``spacing``, ``checkpoint_slots`` as in ``run_scenario`` (all three arms);
    ``int8`` is the session's parking, used by the inconsistent arm (the exact arm always parks
    natively, the INT8 arm always as INT8). Earlier requests decode ``max_new_tokens`` each.
    """
    ps = _prompts(name, prompts)
    request = _check_int(request, "request", -len(ps), len(ps) - 1) % len(ps)
    policy, spacing, int8, slots, n = _check_settings(
        policy, spacing, int8, checkpoint_slots, max_new_tokens
    )
    return _drift(ps, request, policy, spacing, slots, int8, n)
