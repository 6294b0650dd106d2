"""KV events on the wire: the lab's structs encode as the engines' (msgpack maps tagged with
``type``, omitted defaults, the batch as ``[ts, events, rank]``), decode back, and anything
else is refused with a message naming ``payload``. The bytes are checked against msgpack
written by hand from the engines' struct definitions (vllm/distributed/kv_events.py,
sglang/srt/disaggregation/kv_events.py); tests/real decodes them with vLLM's own classes."""

from __future__ import annotations

import msgspec
import pytest

from kda_core.fleet._events import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    SglangBlockRemoved,
    SglangBlockStored,
    VllmBlockRemoved,
    VllmBlockStored,
    decode_batch,
    encode_batch,
)
from kda_core.fleet._replica import Replica, block_hashes
from kda_core.fleet._setup import check_args
from kda_core.sim._sequential import request_keys
from tests.test_fleet import page_trace


def test_vllm_batch_bytes():
    ev = VllmBlockStored([7, 8], None, [1, 2], 1, None, "GPU", None, None, 3, "mla_attention")
    raw = msgspec.msgpack.decode(encode_batch(1.5, [ev, VllmBlockRemoved([7], "GPU", 0)], 0))
    assert raw == [
        1.5,
        [
            {
                "type": "BlockStored",
                "block_hashes": [7, 8],
                "parent_block_hash": None,
                "token_ids": [1, 2],
                "block_size": 1,
                "lora_id": None,
                "medium": "GPU",
                "lora_name": None,
                "group_idx": 3,
                "kv_cache_spec_kind": "mla_attention",
            },
            {"type": "BlockRemoved", "block_hashes": [7], "medium": "GPU", "group_idx": 0},
        ],
        0,
    ]


def test_sglang_batch_bytes_have_no_group_fields():
    evs = [SglangBlockStored([5], 4, [9], 1, None, "GPU"), SglangBlockRemoved([5], "GPU")]
    raw = msgspec.msgpack.decode(encode_batch(2.0, [*evs, AllBlocksCleared()]))
    assert raw[1] == [
        {
            "type": "BlockStored",
            "block_hashes": [5],
            "parent_block_hash": 4,
            "token_ids": [9],
            "block_size": 1,
            "lora_id": None,
            "medium": "GPU",
        },
        {"type": "BlockRemoved", "block_hashes": [5], "medium": "GPU"},
        {"type": "AllBlocksCleared"},
    ]


def test_round_trip_reads_both_engines():
    evs = [
        VllmBlockStored([1], None, [1], 1, None, "GPU", None, None, 0, "mamba"),
        SglangBlockStored([2], 1, [2], 1, None, "GPU"),
        VllmBlockRemoved([1], "GPU", 0),
        AllBlocksCleared(),
    ]
    ts, got = decode_batch(encode_batch(3.0, evs, 1))
    assert ts == 3.0
    assert got == [
        BlockStored([1], None, [1], 1, "GPU", 0, "mamba"),
        BlockStored([2], 1, [2], 1, "GPU", None, None),
        BlockRemoved([1], "GPU", 0),
        AllBlocksCleared(),
    ]


def test_bytes_hashes_are_read_too():
    # VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0 publishes the raw hash bytes
    raw = msgspec.msgpack.encode([0.0, [{"type": "BlockRemoved", "block_hashes": [b"\x01\x02"]}]])
    assert decode_batch(raw)[1] == [BlockRemoved([b"\x01\x02"], None, None)]


@pytest.mark.parametrize(
    "payload",
    [
        b"\xc1",
        b"not msgpack at all",
        msgspec.msgpack.encode({"ts": 1}),
        msgspec.msgpack.encode([1.0, [{"type": "Nope"}]]),
        msgspec.msgpack.encode([1.0, [{"type": "BlockStored"}]]),
        "text",
    ],
)
def test_bad_payload_is_refused_by_name(payload):
    with pytest.raises(ValueError, match="payload"):
        decode_batch(payload)


def test_oversize_payload_is_refused():
    with pytest.raises(ValueError, match="payload must be at most 10 bytes"):
        decode_batch(encode_batch(0.0, [AllBlocksCleared()] * 20), max_bytes=10)


def test_block_hashes_chain_like_the_engine():
    # h_j depends on every page before it (a chained hash), one per whole block
    a = block_hashes([1, 2, 3, 4, 5, 6, 7], 3, False)
    b = block_hashes([1, 2, 3, 9, 5, 6], 3, False)
    assert len(a) == 2 and len(b) == 2 and a[0] == b[0] and a[1] != b[1]
    assert all(0 <= h < 1 << 64 for h in a)
    assert all(-(1 << 63) <= h < 1 << 63 for h in block_hashes([1, 2], 1, True))


def sglang_replica(state_events: bool = False):
    budgets = {f"{k}_budget_bytes": None for k in ("state", "kv", "unified")}
    o = dict(replicas=1, router="kv_events", model="kimi-k3", tp=8, engine="sglang", weight=1.0)
    o |= dict(seed=0, engine_params=None, router_params=None, time_model=None, oracle=False)
    s = check_args(page_trace([[1, 2, 3], [1, 2, 4, 5]], block=512), o | {"budgets": budgets})
    rep = Replica(s.pol, s.page, 1, "sglang", s.groups, s.budgets, s.sizes, state_events)
    return s, rep


def sglang_batches(state_events: bool) -> list[list]:
    s, rep = sglang_replica(state_events)
    out = []
    for i in range(2):
        key, ins, total = request_keys(s.trace, i, False)
        rep.serve(key, ins, int(s.trace.input_len[i]), total, ins.tolist())
        out.append(decode_batch(encode_batch(0.0, rep.take_events()))[1])
    return out


def test_sglang_replica_publishes_kv_pages_and_no_state():
    # SGLang's KvEventsRecorder: one coalesced BlockStored per inserted node chain, pages chained
    # by parent hash. Request 0 ([1, 2, 3] + 100 tokens, 512-token pages) keeps its state at
    # 1536 with the KV of pages 1-3. Request 1 ([1, 2, 4, 5] + tail) shares pages 1-2: SGLang
    # checkpoints the branch point (1024) on its first chunk and cuts the key there, so it adds
    # a state on KV already held: nothing is published (Mamba-only changes are silent,
    # sgl-project/sglang#23678); the lab's proposed state event names page 2's hash
    out = sglang_batches(False)
    h = block_hashes([1, 2, 3], 1, True)
    assert len(out[0]) == 1 and out[1] == []
    first = out[0][0]
    assert first.block_hashes == h and first.parent_block_hash is None
    assert first.token_ids == [1, 2, 3] and first.kv_cache_spec_kind is None
    proposed = sglang_batches(True)
    assert proposed[0][0] == first
    assert [(e.block_hashes, e.kv_cache_spec_kind) for e in proposed[0][1:]] == [([h[2]], "mamba")]
    assert [(e.block_hashes, e.kv_cache_spec_kind) for e in proposed[1]] == [([h[1]], "mamba")]
