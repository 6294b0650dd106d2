"""``python -m kda_core.fleet listen tcp://HOST:PORT``: a live server's KV event stream.

Subscribes (pyzmq SUB, connect) to what vLLM's or SGLang's ``ZmqEventPublisher`` publishes:
multipart frames ``(topic, 8-byte big-endian sequence, msgpack payload)``. The payload is read
by ``_events.decode_batch``; a frame that is not a KV event batch, or over the size cap, is
counted and skipped, never fatal. The index is the state-aware one (``_index.StateView``, each
event's own block size, real token ids), bounded at ``max_blocks`` entries: blocks leave as
the server's ``BlockRemoved`` says, and past the cap the oldest go.

It prints, every ``every_s`` seconds and at the end: the KV blocks and the state checkpoints
(blocks every Mamba group holds) the server has, and the prefixes a KV-only router would count
as hits beyond the deepest state on them (a request ending there restores earlier), with the
tokens over-counted. SGLang publishes no state events: then only the KV side is shown.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kda_core.fleet._events import MAX_FRAME_BYTES, decode_batch
from kda_core.fleet._index import ROUTER_SEED, StateView, apply_events


@dataclass(slots=True)
class ListenStats:
    """Counters of one listen (frames, batches, events; skipped frames by cause)."""

    frames: int = 0
    batches: int = 0
    events: int = 0
    not_kv_events: int = 0
    oversize: int = 0
    last_error: str = ""
    block_size: int = 0
    over: dict = field(default_factory=dict)


def over_counted(view: StateView) -> tuple[int, int, int]:
    """(states, prefixes a KV-only count over-counts, blocks over-counted): for each KV block
    whose whole chain is held, its depth minus the depth of the deepest state on the chain."""
    up = view.parents or {}
    need = view.mamba_groups() or 1
    memo: dict[int, tuple[int, int] | None] = {ROUTER_SEED: (0, 0)}
    n_over = blocks = 0
    for h in view.view:
        got = _depth(h, up, view, need, memo)
        if got is not None and got[0] > got[1]:
            n_over += 1
            blocks += got[0] - got[1]
    states = sum(1 for s in view.states.values() if len(s) >= need)
    return states, n_over, blocks


def _depth(h: int, up: dict, view: StateView, need: int, memo: dict) -> tuple[int, int] | None:
    """(depth, deepest state depth) of block ``h``; None when its chain is not all held."""
    chain = []
    while h not in memo:
        if h not in view.view or h not in up:
            for c in chain:
                memo[c] = None
            memo[h] = None
            return None
        chain.append(h)
        h = up[h]
    base = memo[h]
    for c in reversed(chain):
        if base is None:
            memo[c] = None
            continue
        held = view.states.get(c)
        d = base[0] + 1
        base = (d, d if held is not None and len(held) >= need else base[1])
        memo[c] = base
    return memo[chain[0]] if chain else base


def report(view: StateView, st: ListenStats) -> str:
    """One status line."""
    states, n_over, blocks = over_counted(view)
    st.over = {"states": states, "prefixes": n_over, "blocks": blocks}
    head = (
        f"frames {st.frames} (skipped: {st.not_kv_events} not KV events, {st.oversize} over "
        f"the cap), events {st.events}; KV blocks {len(view.view)}"
    )
    if not view.mamba_groups():
        return head + "; no state events seen (SGLang publishes the KV only)"
    tok = blocks * st.block_size
    return (
        f"{head}, state checkpoints {states}; a KV-only router over-counts {n_over} prefixes "
        f"by {blocks} blocks ({tok} tokens)"
    )


def listen(
    endpoint: str,
    *,
    topic: str = "",
    max_frame_bytes: int = MAX_FRAME_BYTES,
    max_blocks: int = 1_000_000,
    seconds: float | None = None,
    batches: int | None = None,
    every_s: float = 2.0,
    bind: bool = False,
    out: Callable[[str], object] = print,
) -> ListenStats:
    """Read ``endpoint`` until ``seconds`` pass or ``batches`` batches arrived (None: forever);
    returns the counters (the CLI prints as it goes). ``bind``: bind the endpoint instead of
    connecting (vLLM's publisher connects when its endpoint has no wildcard)."""
    import zmq

    ctx = zmq.Context.instance()
    sock = ctx.socket(zmq.SUB)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SUBSCRIBE, topic.encode())
    if bind:
        sock.bind(endpoint)
    else:
        sock.connect(endpoint)
    view = StateView(0, max_blocks)
    view.parents = {}
    st = ListenStats()
    start = last = time.monotonic()
    try:
        while (seconds is None or time.monotonic() - start < seconds) and (
            batches is None or st.batches < batches
        ):
            if not sock.poll(100):
                continue
            _frame(sock.recv_multipart(), view, st, max_frame_bytes)
            if time.monotonic() - last >= every_s:
                out(report(view, st))
                last = time.monotonic()
    finally:
        sock.close(0)
    out(report(view, st))
    return st


def _frame(parts: list[bytes], view: StateView, st: ListenStats, cap: int) -> None:
    """One multipart frame into the index; anything else is counted, never raised."""
    st.frames += 1
    payload = parts[-1]
    if len(payload) > cap:
        st.oversize += 1
        return
    try:
        _, events = decode_batch(payload, cap)
    except ValueError as e:
        st.not_kv_events += 1
        st.last_error = str(e)
        return
    for ev in events:
        bs = getattr(ev, "block_size", 0)
        if bs and getattr(ev, "kv_cache_spec_kind", None) != "mamba":
            st.block_size = bs
    apply_events(view, events)
    st.batches += 1
    st.events += len(events)
