"""KV cache events in the engines' own wire format (msgpack through msgspec).

vLLM 0.33 (``vllm/distributed/kv_events.py``): ``KVEventBatch`` is an ``array_like`` struct
``[ts, events, data_parallel_rank]``; each event is a tagged map (``{"type": "BlockStored",
...}``, ``omit_defaults``). ``BlockPool.cache_full_blocks`` emits one ``BlockStored`` per KV
cache group and step (``group_idx``; ``KVCacheManager.take_events`` fills
``kv_cache_spec_kind``), ``BlockPool._emit_block_removed_events`` one ``BlockRemoved`` per
evicted hash, ``reset_prefix_cache`` an ``AllBlocksCleared``. Block hashes are 64-bit ints
(``maybe_convert_block_hash`` with ``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1``, the default).

SGLang 0.5.23 (``sglang/srt/disaggregation/kv_events.py``): the same batch layout ``[ts,
events, attn_dp_rank]`` and tagged maps, but ``BlockStored`` has no group fields (its
``medium`` defaults to None, ``cache_salt`` / ``session_id`` / ``lora_name`` are extra) and
``KvEventsRecorder`` (``sglang/srt/mem_cache/events.py``) publishes the full-attention KV only.

The ``Vllm*`` / ``Sglang*`` structs below declare the engines' fields in the engines' order, so
the engines' own decoders read what the lab encodes (tests/real checks vLLM's). The lab decodes
both engines with one lenient schema (every field optional but the hashes), as a router must.
"""

from __future__ import annotations

from typing import Any

import msgspec

VLLM_ATTENTION_KINDS = frozenset({"full_attention", "mla_attention", "sink_full_attention"})
"""The ``kv_cache_spec_kind`` values whose groups pair one hash with one block (the set
AMD-AGI/Infera#98 indexes; ``KVCacheSpecKind`` in vllm/v1/kv_cache_interface.py)."""
MAMBA_KIND = "mamba"
MAX_FRAME_BYTES = 64 << 20
"""Largest payload ``decode_batch`` accepts (a frame over it is refused, not parsed)."""


class VllmBlockStored(
    msgspec.Struct, omit_defaults=True, gc=False, tag="BlockStored", tag_field="type"
):
    """vLLM 0.33 ``BlockStored`` (same fields, order and defaults)."""

    block_hashes: list[int]
    parent_block_hash: int | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: list[tuple[Any, ...] | None] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None
    locality: str | None = None
    ownership: str | None = None
    session_id: str | None = None
    lookahead_token_ids: list[list[int]] | None = None


class VllmBlockRemoved(
    msgspec.Struct, omit_defaults=True, gc=False, tag="BlockRemoved", tag_field="type"
):
    """vLLM 0.33 ``BlockRemoved``."""

    block_hashes: list[int]
    medium: str | None
    group_idx: int | None = None
    locality: str | None = None
    ownership: str | None = None


class AllBlocksCleared(
    msgspec.Struct, omit_defaults=True, gc=False, tag="AllBlocksCleared", tag_field="type"
):
    """``AllBlocksCleared`` (no fields; both engines)."""


class KVEventBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    """``[ts, events, data_parallel_rank]`` (SGLang names the last field ``attn_dp_rank``)."""

    ts: float
    events: list[Any]
    data_parallel_rank: int | None = None


class SglangBlockStored(
    msgspec.Struct, omit_defaults=True, gc=False, tag="BlockStored", tag_field="type"
):
    """SGLang 0.5.23 ``BlockStored``, plus two optional fields of vLLM's that SGLang does not
    have (None, so omitted: the lab's KV events are byte for byte SGLang's). The lab sets them
    only on the state events it proposes for SGLang (``kv_cache_spec_kind="mamba"``): SGLang
    publishes none (sgl-project/sglang#23678 keeps Mamba-only eviction silent)."""

    block_hashes: list[int]
    parent_block_hash: int | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None = None
    cache_salt: str | None = None
    session_id: str | None = None
    lora_name: str | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None


class SglangBlockRemoved(
    msgspec.Struct, omit_defaults=True, gc=False, tag="BlockRemoved", tag_field="type"
):
    """SGLang 0.5.23 ``BlockRemoved`` (plus the lab's optional ``group_idx`` for state events)."""

    block_hashes: list[int]
    medium: str | None = None
    group_idx: int | None = None


class BlockStored(msgspec.Struct, gc=False, tag="BlockStored", tag_field="type"):
    """What the lab reads from either engine's ``BlockStored`` (unknown fields ignored; a hash
    is an int, or bytes when vLLM runs with ``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0``)."""

    block_hashes: list[int | bytes]
    parent_block_hash: int | bytes | None = None
    token_ids: list[int] = []
    block_size: int = 0
    medium: str | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None


class BlockRemoved(msgspec.Struct, gc=False, tag="BlockRemoved", tag_field="type"):
    """What the lab reads from either engine's ``BlockRemoved``."""

    block_hashes: list[int | bytes]
    medium: str | None = None
    group_idx: int | None = None


Event = BlockStored | BlockRemoved | AllBlocksCleared


class _WireBatch(msgspec.Struct, array_like=True, gc=False):
    ts: float
    events: list[Event]
    data_parallel_rank: int | None = None


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(_WireBatch)


def encode_batch(ts: float, events: list[Any], rank: int | None = None) -> bytes:
    """One batch as the engines put it on the wire (``events``: the ``Vllm*`` / ``Sglang*`` /
    ``AllBlocksCleared`` structs)."""
    return _ENCODER.encode(KVEventBatch(ts, events, rank))


def decode_batch(payload: bytes, max_bytes: int = MAX_FRAME_BYTES) -> tuple[float, list[Event]]:
    """``(ts, events)`` of one vLLM or SGLang batch; ``ValueError`` naming ``payload`` when it
    is over ``max_bytes`` or is not a msgpack KV event batch."""
    if not isinstance(payload, (bytes, bytearray, memoryview)):
        raise ValueError(f"payload must be bytes, got {type(payload).__name__}")
    if len(payload) > max_bytes:
        raise ValueError(f"payload must be at most {max_bytes} bytes, got {len(payload)}")
    try:
        batch = _DECODER.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise ValueError(f"payload is not a msgpack KV event batch: {e}") from None
    return batch.ts, batch.events
