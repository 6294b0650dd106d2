"""SGLang's ratio calculator next to what the running scheduler keeps, on the same workload.

SGLang documents one formula for ``--mamba-full-memory-ratio`` (the ``compute-mamba-ratio``
skill, ``.claude/skills/compute-mamba-ratio/SKILL.md`` in sgl-project/sglang, and the
cookbook's "Mamba ratio calculator"):

    r* = (S + D) * token_equiv * dcp_size / L
    token_equiv = state_bytes_per_slot / kv_bytes_per_token

with ``S`` the state slots reserved per running request (5 for extra_buffer with overlap, 4
lazy or with the decode-lock skip, 3 no_buffer), ``D`` the draft tokens (0 without speculative
decoding or with ReplaySSM) and ``L`` the mean context. ``kda_core.sizing.balanced_ratio`` is
that formula; its predicted concurrency is ``max_mamba_cache_size // S`` of ``split_memory`` at
``r*``.

The formula counts S slots per request and nothing else. A request also leaves states in the
radix tree while it runs: one per chunked-prefill chunk and one for decode at a track boundary
(``kda_core.sizing.checkpoints_per_request``), capped per path by
``--mamba-max-states-per-path``. A running request that keeps them occupies its live and
tracking slots (``request_slots(...).held``) plus those checkpoints. ``calculator_check``
sweeps the input length and puts, per length: the calculator's ratio and concurrency, the slots
a request really occupies, how many requests keep their states at the calculator's ratio, and
the ratio (and concurrency) that balances the two pools with that occupancy instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kda_core import sizing
from kda_core._checks import check_int

__all__ = ["CalculatorCheck", "calculator_check"]

_MAX_LENGTHS = 12
K3_REST_BYTES = 29_497 * (1 << 20)
"""The K3 write-up's profiled rest per GPU at TP8 (docs/sizing.md, "The K3 write-up's two
deployments from one budget"): the default budget."""
_MAX_LEN = 1 << 21


@dataclass(frozen=True)
class CalculatorCheck:
    """Per input length (arrays of ``len(input_lens)``), one GPU.

    reserved: S, the calculator's slots per request; held: live + tracking slots at once;
    checkpoints: states a request leaves in the tree (chunks + decode, capped by
    ``max_states_per_path``); occupied: ``max(reserved, held + checkpoints)``;
    calc_ratio / calc_slots / calc_running / calc_kv_running: the calculator's r*, the
    slots and concurrency ``split_memory`` gives at r*, and the requests the KV pool holds at
    r* (``kv_tokens // L``); kept_running: requests that keep every state at r*
    (``calc_slots // occupied``); live_ratio / live_running: the ratio balancing the pools at
    ``occupied`` slots per request and its concurrency (the smaller of both pools' counts).
    """

    model: str
    tp: int
    rest_bytes: int
    strategy: str
    output_len: int
    chunked_prefill_size: int
    track_interval: int
    max_states_per_path: int | None
    token_equiv: float
    reserved: int
    held: int
    input_lens: np.ndarray
    checkpoints: np.ndarray
    occupied: np.ndarray
    calc_ratio: np.ndarray
    calc_slots: np.ndarray
    calc_running: np.ndarray
    calc_kv_running: np.ndarray
    kept_running: np.ndarray
    live_ratio: np.ndarray
    live_running: np.ndarray


def _check_lengths(values: object) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise ValueError(f"input_lens must be a sequence of 1..{_MAX_LENGTHS} integers")
    if not 1 <= len(values) <= _MAX_LENGTHS:
        raise ValueError(f"input_lens must hold 1..{_MAX_LENGTHS} values, got {len(values)}")
    return tuple(sorted({check_int("input_lens", v, 1, _MAX_LEN) for v in values}))


def _row(
    spec: sizing.ModelSpec,
    rest: int,
    n_in: int,
    out: int,
    chunk: int,
    track: int,
    cap: int | None,
    slots: sizing.SlotsPerRequest,
    knobs: dict,
) -> tuple:
    """One input length: checkpoints, occupied, r*, slots at r*, running at r* (state, KV),
    running that keep their states at r*, the balancing ratio and its concurrency."""
    L = n_in + out
    c = sizing.checkpoints_per_request(n_in, out, chunk, track)
    c = c if cap is None else min(c, cap)
    occ = max(slots.reserved, slots.held + c)
    r = sizing.balanced_ratio(spec, L, **knobs)
    at_r = sizing.split_memory(spec, rest, r, **knobs)
    r_live = sizing.balanced_ratio(spec, L, slots_per_req=occ, **knobs)
    live = sizing.split_memory(spec, rest, r_live, **knobs)
    live_n = min(live.max_mamba_cache_size // occ, live.kv_tokens // L)
    n_slots = at_r.max_mamba_cache_size
    return c, occ, r, n_slots, at_r.max_running, at_r.kv_tokens // L, n_slots // occ, r_live, live_n


def calculator_check(
    model: str = "kimi-k3",
    input_lens: Sequence[int] = (2048, 4096, 8192, 16384, 32768, 65536, 131072),
    output_len: int = 1024,
    *,
    tp: int = 8,
    rest_bytes: int = K3_REST_BYTES,
    ssm_dtype: str = "float32",
    kv_dtype: str = "bfloat16",
    strategy: str = "extra_buffer",
    overlap: bool = True,
    skip_decode_lock: bool = False,
    chunked_prefill_size: int = 8192,
    track_interval: int = 256,
    max_states_per_path: int | None = None,
) -> CalculatorCheck:
    """The calculator's ratio and concurrency vs the slots a running request occupies when it
    keeps its chunked-prefill and decode states (see the module docstring). Kimi K3 at TP8,
    float32 state, bf16 KV and the K3 write-up's profiled rest by default."""
    sizing.check_knobs(model, ssm_dtype=ssm_dtype, kv_dtype=kv_dtype)
    spec = sizing.as_spec(model)
    tp = check_int("tp", tp, 1, 1 << 10)
    rest = check_int("rest_bytes", rest_bytes, 1, 1 << 50)
    out = check_int("output_len", output_len, 0, _MAX_LEN)
    chunk = check_int("chunked_prefill_size", chunked_prefill_size, 1, _MAX_LEN)
    track = check_int("track_interval", track_interval, 1, _MAX_LEN)
    cap = max_states_per_path
    if cap is not None:
        cap = check_int("max_states_per_path", cap, 1, 1 << 16)
    slots = sizing.request_slots(strategy, overlap, skip_decode_lock)
    lens = _check_lengths(input_lens)
    per_slot = sizing.slot_bytes(spec, tp, ssm_dtype, "bfloat16")
    per_tok = sizing.kv_bytes_per_token(spec, tp, kv_dtype)
    knobs = dict(tp=tp, ssm_dtype=ssm_dtype, kv_dtype=kv_dtype, strategy=strategy)
    knobs.update(overlap=overlap, skip_decode_lock=skip_decode_lock)
    rows = [_row(spec, rest, n_in, out, chunk, track, cap, slots, knobs) for n_in in lens]
    cols = list(zip(*rows))
    ints = [np.array(col, dtype=np.int64) for col in cols]
    return CalculatorCheck(
        model=spec.name,
        tp=tp,
        rest_bytes=rest,
        strategy=strategy,
        output_len=out,
        chunked_prefill_size=chunk,
        track_interval=track,
        max_states_per_path=cap,
        token_equiv=per_slot / per_tok,
        reserved=slots.reserved,
        held=slots.held,
        input_lens=np.array(lens, dtype=np.int64),
        checkpoints=ints[0],
        occupied=ints[1],
        calc_ratio=np.array(cols[2], dtype=np.float64),
        calc_slots=ints[3],
        calc_running=ints[4],
        calc_kv_running=ints[5],
        kept_running=ints[6],
        live_ratio=np.array(cols[7], dtype=np.float64),
        live_running=ints[8],
    )
