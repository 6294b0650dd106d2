"""vLLM 0.33's speculative-decoding flags (``SPEC_KEYS``, spelled as vLLM spells them), what
its scheduler derives from them, and the checkpoint, replay and retention rules: what
``policy.vllm``, ``cache.vllm_blocks`` and the repeat rules (tests/vllm_spec_rules.py) share.
Each names the vLLM function it follows (files under ``vllm/``; the laws with line numbers:
docs/hit_reasons.md, "Speculative decoding"). ``n_predict`` is the draft model's MTP module
count (vLLM reads ``num_nextn_predict_layers`` from its config). DSpark is taken with its draft
config's default ``sample_from_anchor=True`` (the lab reads no draft config here).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kda_core._checks import check_bool, check_int

METHODS = ("eagle", "eagle3", "mtp", "dflash", "dspark")
SPEC_KEYS = (
    "method",
    "num_speculative_tokens",
    "n_predict",
    "disable_lookahead_block_hashes",
    "disable_eagle_block_drop",
)
MAX_DRAFTS = 64


class SpecStallWarning(UserWarning):
    """vLLM's scheduler can make no progress on a prompt (it schedules 0 tokens every step)."""


@dataclass(frozen=True, slots=True)
class Drafts:
    """What vLLM 0.33 derives from ``speculative_config`` (and a KV connector): ``drop``
    (``Scheduler.use_eagle_block_drop``: the trailing-block drop), ``hash_lookahead``
    (``VllmConfig.num_hash_lookahead_tokens``: tokens past a block its hash covers),
    ``prefill_lookahead`` (``num_prefill_lookahead_tokens``: no prefill chunk ends closer to
    the prompt end), ``lookahead`` (``num_lookahead_tokens``: KV slots past the scheduled
    tokens). ``Drafts()``: no drafts."""

    method: str | None = None
    num_speculative_tokens: int = 0
    n_predict: int = 1
    disable_lookahead_block_hashes: bool = False
    disable_eagle_block_drop: bool = False
    drop: bool = False
    hash_lookahead: int = 0
    prefill_lookahead: int = 0
    lookahead: int = 0


def parse_speculative_config(cfg: Mapping[str, Any] | None) -> dict | None:
    """``speculative_config`` checked and completed with vLLM's defaults (``n_predict`` 1, the
    ``disable_*`` flags False); None: no drafts."""
    if cfg is None:
        return None
    if not isinstance(cfg, Mapping):
        raise ValueError(f"speculative_config must be a dict or None, got {cfg!r}")
    unknown = sorted(set(cfg) - set(SPEC_KEYS))
    if unknown:
        raise ValueError(f"speculative_config: unknown keys {unknown}; allowed: {SPEC_KEYS}")
    method = cfg.get("method")
    if method not in METHODS:
        raise ValueError(f"speculative_config.method must be one of {METHODS}, got {method!r}")
    k = cfg.get("num_speculative_tokens")  # required: None fails the check
    k = check_int("speculative_config.num_speculative_tokens", k, 1, MAX_DRAFTS)
    m = check_int("speculative_config.n_predict", cfg.get("n_predict", 1), 1, MAX_DRAFTS)
    flags = {
        name: check_bool(f"speculative_config.{name}", cfg.get(name, False))
        for name in SPEC_KEYS[3:]
    }
    return {"method": method, "num_speculative_tokens": k, "n_predict": m, **flags}


def derive(spec: dict | None, kv_transfer: bool = False) -> Drafts:
    """The ``Drafts`` of a parsed ``speculative_config`` as vLLM 0.33 derives them."""
    if spec is None:
        return Drafts()
    k, method = spec["num_speculative_tokens"], spec["method"]
    # SpeculativeConfig.use_multi_module_mtp: min(num_nextn_predict_layers, k) > 1
    multi = method == "mtp" and min(spec["n_predict"], k) > 1
    # VllmConfig.num_prefill_lookahead_tokens: k for multi-module MTP, else 1 (use_eagle():
    # the EAGLE family, MTP, DFlash, DSpark)
    pre = k if multi else 1
    # SpeculativeConfig.use_eagle_block_drop: EAGLE/EAGLE3/MTP unless disable_eagle_block_drop
    # (needs_eagle_block_drop: EAGLE-style drafters build a position's draft KV from the next
    # token too; DFlash / DSpark from the target's hidden state alone)
    wants_drop = method in ("eagle", "eagle3", "mtp") and not spec["disable_eagle_block_drop"]
    # VllmConfig.num_hash_lookahead_tokens: lookahead hashes unless disabled or a connector
    lookahead = wants_drop and not spec["disable_lookahead_block_hashes"] and not kv_transfer
    L_hash = pre if lookahead else 0
    # Scheduler.__init__: lookahead hashes prove the boundary token, so no drop
    return Drafts(
        **spec,
        drop=wants_drop and not L_hash,
        hash_lookahead=L_hash,
        prefill_lookahead=pre,
        # VllmConfig.num_lookahead_tokens: k for the EAGLE family, MTP and anchor-sampling
        # DSpark; DFlash drafts a bonus query too (k + 1)
        lookahead=k + 1 if method == "dflash" else k,
    )


def checkpoint_position(num_tokens: int, unit: int, drop: bool, hash_lookahead: int) -> int:
    """``kv_cache_interface.get_mamba_prefill_checkpoint_position``: the last reusable state
    boundary of a prefill of ``num_tokens`` tokens on a ``unit`` grid (no drafts: ``(n - 1)
    // unit * unit``)."""
    limit = num_tokens if drop else num_tokens - max(1, hash_lookahead)
    position = limit // unit * unit - (unit if drop else 0)
    return max(position, 0)


def replay_boundaries(prompt_len: int, block: int, drop: bool) -> tuple[int, ...]:
    """``kv_cache_coordinator.replay_boundaries``: where a later request replaying the prompt
    resumes (kept under sparse retention): ``n - 1``; with the drop a resend and an extension,
    one block below their aligned boundaries."""
    if not drop:
        return (prompt_len - 1,)
    resend = (prompt_len - 1) // block * block
    extension = prompt_len // block * block
    return tuple(sorted({max(resend - block, 0), max(extension - block, 0)}))


def retained(position: int, block: int, retention: int | None, reach: Iterable[int]) -> bool:
    """``MambaManager.reachable_block_mask`` for the state after ``position`` tokens: every
    state when retention is dense (None, or ``0 < retention <= block``), else only the
    reachable boundaries ``reach`` (the replay point and the junction, on the hit grid) and,
    for ``retention > 0``, the multiples of ``retention``."""
    if retention is None or 0 < retention <= block:
        return True
    return position in reach or (retention > 0 and position % retention == 0)


def stall_message(d: Drafts, block: int, chunk: int, unit: int, n: int = 0) -> str:
    """The ``SpecStallWarning`` text: what stalls and why (``n``: the prompt, 0: any)."""
    what = f"a {n}-token prompt" if n else "a prompt"
    return (
        f"vLLM's scheduler stalls on {what}: with multi-module MTP (num_speculative_tokens="
        f"{d.num_speculative_tokens}, n_predict={d.n_predict}) a prefill chunk may not end "
        f"within {d.prefill_lookahead} tokens of the prompt end, and the align-mode split stops "
        f"at the block boundary there (block_size={block}, max_num_batched_tokens={chunk}, "
        f"prefix_match_unit={unit}); it schedules 0 tokens every step"
    )
