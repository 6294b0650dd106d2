"""Synthetic workloads (seeded, sizes capped with a ``ValueError``) and ``workload(name)``.

* :func:`multi_turn_chat`: each turn's prompt = history + last answer + a new user message;
* :func:`agentic`: shared system prompt + one of a few tool-definition sets, branching
  sub-tasks, and observation collapse that rewrites history (creates branch points);
* :func:`one_shot_documents`: long unique documents, no reuse at all;
* :func:`uniform_prefix`: one long document, then requests sharing it up to a uniformly random
  point (the probe for the analytic "replay ~ K/2" model);
* :func:`mix`: chat + agentic + documents interleaved in time.

Left out: raw token ids (blocks only), tokenizer effects. Parameters: docs/workloads.md.
"""

from __future__ import annotations

from kda_core._checks import check_int as _check_int
from kda_core.workloads._builder import KINDS, Segment, TraceBuilder, check_pos
from kda_core.workloads._caps import (
    MAX_INPUT_TOKENS,
    MAX_OUTPUT_TOKENS,
    MAX_REQUESTS,
    MAX_TOTAL_BLOCKS,
)
from kda_core.workloads.mooncake import BUNDLED_TRACES, bundled_trace
from kda_core.workloads.traces import Trace


def _chat_into(
    bld: TraceBuilder,
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
    check_pos("user_tokens", user_tokens, 1, 100_000)
    check_pos("answer_tokens", answer_tokens, 1, 100_000)
    check_pos("session_rate", session_rate, 1e-6, 1e6)
    check_pos("think_time_s", think_time_s, 0, 1e6)
    _check_int("max_context", max_context, 1, MAX_INPUT_TOKENS)
    bld = TraceBuilder(block_size, seed, KINDS)
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
    bld: TraceBuilder,
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
    check_pos("task_tokens", task_tokens, 1, 100_000)
    check_pos("action_tokens", action_tokens, 1, 100_000)
    check_pos("observation_tokens", observation_tokens, 1, 100_000)
    _check_int("keep_observations", keep_observations, 0, 1000)
    _check_int("collapsed_tokens", collapsed_tokens, 1, 10_000)
    check_pos("branch_prob", branch_prob, 0, 1)
    _check_int("max_branches", max_branches, 0, 100)
    check_pos("session_rate", session_rate, 1e-6, 1e6)
    check_pos("step_time_s", step_time_s, 0, 1e6)
    _check_int("max_context", max_context, 1, MAX_INPUT_TOKENS)
    bld = TraceBuilder(block_size, seed, KINDS)
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
    bld: TraceBuilder,
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
    check_pos("doc_tokens", doc_tokens, 1, MAX_INPUT_TOKENS)
    check_pos("question_tokens", question_tokens, 1, 100_000)
    check_pos("answer_tokens", answer_tokens, 1, 100_000)
    check_pos("rate", rate, 1e-6, 1e6)
    _check_int("max_doc", max_doc, 1, MAX_INPUT_TOKENS - 4096)
    bld = TraceBuilder(block_size, seed, KINDS)
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
    check_pos("rate", rate, 1e-6, 1e6)
    bld = TraceBuilder(block_size, seed, KINDS)
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
    check_pos("duration_s", duration_s, 1e-3, 1e7)
    if chat_sessions + agent_sessions + documents == 0:
        raise ValueError("chat_sessions + agent_sessions + documents must be >= 1")
    bld = TraceBuilder(block_size, seed, KINDS)
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
