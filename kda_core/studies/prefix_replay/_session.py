"""An engine serving a session's requests one at a time, incrementally (the prefix_replay app).

``ServingSession.new(...)`` builds an empty engine under the settings (policy, spacing, INT8
parking, checkpoint slots, radix strategy); ``send(prompt)`` serves ONE request and returns its
``RequestView`` (cost: that request only); ``result()`` packages every request so far.
``run_scenario`` is ``new`` + ``send`` of each prompt + ``result`` (cached per arguments: treat
the results as read-only); ``serve`` returns a private fork of such a served session to extend.
Left out: concurrency (the batch view, ``studies.batch_view``, serves requests together),
sampling (greedy).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import lru_cache

from kda_core._checks import check_bool
from kda_core.serve.engine import Engine
from kda_core.studies.prefix_replay._scenarios import (
    MAX_PROMPTS,
    SCENARIOS,
    check_prompt,
    check_prompts,
    check_settings,
    make_policy,
    shared_model,
)
from kda_core.studies.prefix_replay._views import (
    PoolsPanel,
    RequestView,
    ScenarioResult,
    TreeSnapshot,
    replay_steps_of,
    timeline_of,
    tree_snapshot,
)


@dataclass(slots=True, eq=False)
class ServingSession:
    """One engine serving requests incrementally: the state behind ``run_scenario``.

    ``ServingSession.new(...)`` builds an empty engine under the settings; ``send(prompt)``
    serves ONE request and returns its ``RequestView`` (cost: that request only);
    ``result()`` gives the ``ScenarioResult`` of every request sent so far (built once per
    length, then the same object). ``run_scenario(prompts=P)`` is exactly
    ``ServingSession.new(...)`` + ``send`` of each prompt + ``result()`` (tests: identical views).

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
    ) -> ServingSession:
        """An empty session; arguments as in ``run_scenario`` (``name`` only labels the result:
        a built-in scenario name or "custom")."""
        if name != "custom" and name not in SCENARIOS:
            raise ValueError(f"name must be 'custom' or one of {tuple(SCENARIOS)}, got {name!r}")
        policy, spacing, int8, slots, n = check_settings(
            policy, spacing, int8, checkpoint_slots, max_new_tokens
        )
        engine = Engine(
            make_policy(policy, spacing),
            int8_checkpoints=int8,
            checkpoint_slots=slots,
            strategy=strategy,
            model=shared_model(),
        )
        return cls(name, policy, spacing, int8, slots, strategy, n, engine)

    @property
    def prompts(self) -> tuple[str, ...]:
        return tuple(v.prompt for v in self.views)

    def fork(self, name: str | None = None) -> ServingSession:
        """An independent copy (``name``: relabel it, e.g. "custom" once the reader adds texts)."""
        model = self.engine.model
        return self._copy(copy.deepcopy(self.engine, {id(model): model}), name)

    def __deepcopy__(self, memo: dict) -> ServingSession:
        """``copy.deepcopy`` == ``fork()``: the model weights and the immutable views are shared."""
        model = self.engine.model
        memo.setdefault(id(model), model)
        return self._copy(copy.deepcopy(self.engine, memo), None)

    def _copy(self, engine: Engine, name: str | None) -> ServingSession:
        return ServingSession(
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
        prompt = check_prompt(prompt)
        if len(self.views) >= MAX_PROMPTS:
            raise ValueError(f"prompts: a session holds at most {MAX_PROMPTS} requests")
        engine = self.engine
        snaps: dict[str, TreeSnapshot] = {}
        peak = [self.peak]

        def observe(stage: str, eng: Engine) -> None:
            snaps[stage] = tree_snapshot(eng.cache.export())
            peak[0] = max(peak[0], eng.pools.active.n_used)

        r = engine.generate(prompt, self.max_new_tokens, record_states=True, observe=observe)
        st = engine.stats()
        ps = r.pools
        view = RequestView(
            index=len(self.views),
            prompt=prompt,
            output=r.text,
            timeline=timeline_of(r),
            tree_during=snaps["restored"],
            tree_after=snaps["finished"],
            pools=PoolsPanel(
                active_capacity=ps.active_capacity,
                active_peak=peak[0],
                checkpoint_capacity=ps.checkpoint_capacity,
                checkpoint_used=ps.checkpoint_used,
                checkpoint_bytes=ps.checkpoint_bytes,
                checkpoint_slot_bytes=engine.pools.checkpoints.slot_bytes,
                copies=ps.copies,
                donations=ps.donations,
                track_writes=ps.track_writes,
                evicted_states=st.evicted_states,
                evicted_kv_tokens=st.evicted_kv_tokens,
                int8=ps.int8,
            ),
            replay_steps=replay_steps_of(r, engine.model),
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
) -> ServingSession:
    s = ServingSession.new(
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
    ps = check_prompts(name, prompts)
    policy, spacing, int8, slots, n = check_settings(
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
    fork: bool = True,
) -> ServingSession:
    """A session that has served the scenario's prompts (or ``prompts``): a fork of a cached
    one, so the caller may ``send`` more. ``serve(...).result()`` is ``run_scenario(...)``
    (the same object). ``fork=False``: the cached session itself, shared by every caller (no
    engine copy, for a holder of many sessions such as the app's browser tabs): read it, or
    ``fork()`` it before sending, never ``send`` to it."""
    served = _served(
        *_served_args(
            name, prompts, policy, spacing, int8, checkpoint_slots, strategy, max_new_tokens
        )
    )
    return served.fork() if check_bool("fork", fork) else served


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
    (``ServingSession.new`` + ``send`` each + ``result``).

    ``spacing`` in [1, 1024] (see ``make_policy``); ``checkpoint_slots`` None or [1, 4096];
    ``max_new_tokens`` in [1, 64]. Deterministic; cached per arguments.
    """
    return _served(
        *_served_args(
            name, prompts, policy, spacing, int8, checkpoint_slots, strategy, max_new_tokens
        )
    ).result()
