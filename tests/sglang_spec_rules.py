"""The lab's rules for SGLang 0.5.23 with speculative decoding on a hybrid (KDA / Mamba) radix
tree (the track interval check is ``kda_core.cache.policy.sglang``): what the draft
flags change in the prefix cache and what they do not. Pure functions of the flags and lengths;
each names the SGLang function it follows (files under ``python/sglang/srt/``; the laws with
line numbers are in docs/hit_reasons.md). tests/real/test_spec_vs_sglang.py runs SGLang's own
tree cores (Python and Rust) and methods against each.

* EAGLE's bigram keys are off on a tree with a MAMBA component (``is_eagle`` is dropped), so
  a repeat's hit is the same with drafts as without (``tree_bigram_keys``).
* ``mamba_track_interval`` must be at least the draft tokens (``check_track_interval``): a
  verify window then crosses at most one interval boundary, and a decode checkpoint is taken
  at every boundary an accepted run crosses (``spec_track_points``), as one token per step
  takes it.
* At finish, a tracked state past the key falls back to the other ping-pong slot
  (``finished_checkpoint``); the decode ReplaySSM ring donates the state of its last flush
  (``replayssm_finish_len``).
"""

from __future__ import annotations

from collections.abc import Sequence

from kda_core._checks import check_bool, check_int
from kda_core.cache.policy.sglang import check_track_interval

__all__ = ["check_track_interval"]  # re-exported: the tests use every rule as ``S.<rule>``

MAX_TOKENS = 1 << 24


def tree_bigram_keys(is_eagle: bool, has_mamba: bool) -> bool:
    """Whether the radix tree keys bigrams (EAGLE's one-token shift): ``UnifiedTreeCore.
    __init__`` and the Rust ``RustUnifiedTreeCore.__init__`` keep ``is_eagle`` only without a
    MAMBA component. A bigram tree matches one token less than the lookup (a key of ``n``
    tokens is ``n - 1`` bigrams)."""
    return check_bool("is_eagle", is_eagle) and not check_bool("has_mamba", has_mamba)


def bigram_match(lookup_len: int, bigram: bool) -> int:
    """The longest match a ``lookup_len``-token key can reach: ``RadixKey`` in bigram mode
    iterates ``n - 1`` pairs."""
    n = check_int("lookup_len", lookup_len, 0, MAX_TOKENS)
    return max(n - 1, 0) if bigram else n


def spec_track_points(prompt_len: int, accepted: Sequence[int], grid: int) -> tuple[int, ...]:
    """Decode checkpoints with drafts (``SchedulerBatchResultProcessor.
    _mamba_check_track_boundary``): after the prefill samples one token, each verify step
    commits ``accepted[i] + 1`` tokens; with ``cur`` the committed length after the step and
    ``prev`` before it, a step whose run crosses a multiple of ``grid`` (``mamba_track_grid``)
    tracks the state at ``cur // grid * grid``, the last boundary crossed."""
    n = check_int("prompt_len", prompt_len, 1, MAX_TOKENS)
    g = check_int("grid", grid, 1, MAX_TOKENS)
    cur = n  # seqlen - 1 after the prefill sampled its token
    out = []
    for i, a in enumerate(accepted):
        a = check_int(f"accepted[{i}]", a, 0, 1 << 10)
        prev, cur = cur, cur + a + 1
        if cur // g != prev // g:
            out.append(cur // g * g)
    return tuple(out)


def track_points_one_token(prompt_len: int, steps: int, grid: int) -> tuple[int, ...]:
    """The same without drafts (``_mamba_check_track_boundary``, one token a step): every
    multiple of ``grid`` the committed length reaches. The naive twin of
    ``spec_track_points`` with all runs of one token."""
    n = check_int("prompt_len", prompt_len, 1, MAX_TOKENS)
    g = check_int("grid", grid, 1, MAX_TOKENS)
    s = check_int("steps", steps, 0, MAX_TOKENS)
    return tuple(p for p in range(n + 1, n + s + 1) if p % g == 0)


def finished_checkpoint(
    last_track: int | None, prev_track: int | None, key_len: int, ping_pong: int = 2
) -> int | None:
    """``MambaComponent._select_finished_checkpoint`` (extra_buffer): the state a finished
    request donates, at the latest tracked length when it is within the key, else at the
    previous one (the other ping-pong slot, only with 2 slots), else none (None)."""
    key = check_int("key_len", key_len, 0, MAX_TOKENS)
    slots = check_int("ping_pong", ping_pong, 1, 2)
    last = 0 if last_track is None else check_int("last_track", last_track, 0, MAX_TOKENS)
    if last <= key:
        return last
    if slots != 2 or prev_track is None or check_int("prev_track", prev_track, 0) > key:
        return None
    return prev_track


def replayssm_finish_len(
    key_len: int, prompt_len: int, ring_len: int, *, is_kda: bool = True, interval: int = 256
) -> int:
    """The state a finished no_buffer request donates under the decode ReplaySSM ring
    (``--enable-linear-replayssm``): ``MambaComponent.prepare_for_caching_req`` caps it at
    ``key_len - write_pos``, the ring's last flush. The cursor (``hybrid_linear_attn_backend``,
    decode metadata) starts at 0 after the prefill and advances once per decode step; it wraps
    to 0 after writing slot ``ring_len - 1`` and, for GDN (not KDA), also on a step whose
    sequence length is a multiple of ``interval``."""
    key = check_int("key_len", key_len, 1, MAX_TOKENS)
    n = check_int("prompt_len", prompt_len, 1, key + 1)
    L = check_int("ring_len", ring_len, 1, 1 << 16)
    kda = check_bool("is_kda", is_kda)
    g = check_int("interval", interval, 1, MAX_TOKENS)
    pos = 0
    # decode step j runs with seq_len n + j (the token it reads is the (n + j)-th)
    for seq_len in range(n + 1, key + 1):
        flushed = pos == L - 1 or (not kda and seq_len % g == 0)
        pos = 0 if flushed else (pos + 1) % L
    return key - pos
