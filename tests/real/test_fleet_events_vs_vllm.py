"""The fleet's KV events against vLLM 0.33's own code.

* vLLM's own ``KVCacheManager`` (``enable_kv_cache_events=True``) over a Kimi K3-shaped config
  (three Mamba groups, then the MLA group, one block size of 768 tokens, as
  ``_get_kv_cache_groups_uniform_page_size`` groups 69 KDA + 24 MLA layers), stepped as
  ``Scheduler`` steps one request (``_mamba_block_aligned_split`` with
  ``max_num_batched_tokens=4096``), emits per step what AMD-AGI/Infera#98 captured off a live
  worker (Mamba groups: 3840 tokens and one hash; MLA: 3840 tokens and five), and the lab's
  replica emits the same shapes, group by group, step by step.
* vLLM's ``msgspec`` decoder of ``KVEventBatch`` reads the lab's bytes back as vLLM's structs.
* vLLM's ``ZmqEventPublisher`` publishes those real events over ZMQ on loopback (a free port;
  the publisher connects to the lab's listener, which binds): ``listen`` decodes every batch
  and counts the blocks and states vLLM holds. Both are stopped by the test.
"""

from __future__ import annotations

import socket
import threading
import time
from types import SimpleNamespace

import msgspec
import pytest
import torch
import zmq
from vllm.distributed.kv_events import BlockStored as VBlockStored
from vllm.distributed.kv_events import KVEventBatch, ZmqEventPublisher
from vllm.sampling_params import SamplingParams
from vllm.utils.hashing import sha256
from vllm.v1.core.kv_cache_manager import KVCacheManager
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.kv_cache_interface import KVCacheConfig, KVCacheGroupSpec, MambaSpec, MLAAttentionSpec
from vllm.v1.request import Request

from kda_core.fleet._events import decode_batch, encode_batch
from kda_core.fleet._listen import listen
from tests.test_fleet_records import replica_payloads

init_none_hash(sha256)
B, CHUNK = 768, 4096


def k3_manager() -> KVCacheManager:
    f32 = (torch.float32,)
    mamba = MambaSpec(block_size=B, shapes=((1,),), dtypes=f32, mamba_cache_mode="align")
    mla = MLAAttentionSpec(block_size=B, num_kv_heads=1, head_size=1, dtype=torch.float32)
    groups = [KVCacheGroupSpec([f"kda{g}"], mamba) for g in range(3)]
    groups.append(KVCacheGroupSpec(["mla"], mla))
    config = KVCacheConfig(num_blocks=256, kv_cache_tensors=[], kv_cache_groups=groups)
    return KVCacheManager(
        config,
        max_model_len=1 << 20,
        scheduler_block_size=B,
        hash_block_size=B,
        enable_caching=True,
        enable_kv_cache_events=True,
    )


SCHED = SimpleNamespace(
    block_size=B,
    cache_config=SimpleNamespace(block_size=B),
    hash_block_size=B,
    mamba_partial_cache_hit=False,
    use_eagle_block_drop=False,
    num_hash_lookahead_tokens=0,
    mamba_has_prefill_checkpoint_blocks=False,
    mamba_prefill_checkpoint_alignment=None,
    mamba_shared_prefix_checkpoint=False,
    max_num_scheduled_tokens=CHUNK,
    scheduler_config=SimpleNamespace(long_prefill_token_threshold=0),
)


def vllm_steps(tokens: list[int]) -> list[list]:
    """One request through vLLM's manager; the events ``take_events`` gives after each step."""
    mgr = k3_manager()
    hasher = get_request_block_hasher(B, sha256)
    req = Request("r", tokens, SamplingParams(max_tokens=1), None, block_hasher=hasher)
    out = []
    mgr.new_step_starts()
    blocks, hits, req.shared_prefix_boundary = mgr.get_computed_blocks(req)
    while req.num_computed_tokens < req.num_tokens:
        start = req.num_computed_tokens
        want = min(CHUNK, req.num_tokens - start)
        n = Scheduler._mamba_block_aligned_split(SCHED, req, want, 0, 0)
        assert mgr.allocate_slots(req, n, hits, blocks if start == 0 else None) is not None
        _, retained = mgr.take_kv_cache_block_copies()
        mgr.block_pool.free_blocks(retained)
        req.num_computed_tokens = start + n
        out.append(mgr.take_events())
        mgr.new_step_starts()
    return out


def shape(ev, tokens_per_id: int) -> tuple:
    return (
        ev.kv_cache_spec_kind,
        ev.group_idx,
        len(ev.token_ids) * tokens_per_id,
        len(ev.block_hashes),
        ev.parent_block_hash is None,
    )


def test_vllm_emits_the_captured_shapes_and_so_does_the_lab():
    prompt = list(range(1, 6 * B + 101))  # 6 blocks + 100 tokens, as the lab's [1..6] + tail
    real = [[shape(e, 1) for e in step] for step in vllm_steps(prompt)]
    assert real[0] == [
        ("mamba", 0, 3840, 1, True),
        ("mamba", 1, 3840, 1, True),
        ("mamba", 2, 3840, 1, True),
        ("mla_attention", 3, 3840, 5, True),
    ]
    payloads, s = replica_payloads([[1, 2, 3, 4, 5, 6]], {"max_num_batched_tokens": CHUNK})
    lab = [shape(e, s.page) for e in decode_batch(payloads[0])[1]]
    assert lab == [e for step in real for e in step]  # every step, group by group


def test_vllm_decodes_what_the_lab_emits():
    payloads, _ = replica_payloads([[1, 2, 3, 4, 5, 6]], {"max_num_batched_tokens": CHUNK})
    batch = msgspec.msgpack.Decoder(type=KVEventBatch).decode(payloads[0])
    ours = decode_batch(payloads[0])[1]
    assert all(isinstance(e, VBlockStored) for e in batch.events)
    for theirs, mine in zip(batch.events, ours, strict=True):
        assert theirs.block_hashes == mine.block_hashes
        assert theirs.parent_block_hash == mine.parent_block_hash
        assert theirs.token_ids == mine.token_ids and theirs.block_size == mine.block_size
        assert theirs.group_idx == mine.group_idx and theirs.medium == "GPU"
        assert theirs.kv_cache_spec_kind == mine.kv_cache_spec_kind


def _free_port() -> int:
    """A loopback port nothing holds now (a plain socket closes at once; a ZMQ socket closes on
    its I/O thread, later, so the listener's bind could find the port still taken)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_listener(batches: int, result: dict, timeout_s: float = 20.0) -> threading.Thread:
    """The lab's listener on a free loopback port, bound before this returns (a TCP connection
    is accepted); a port another process took in between is tried again with a new one."""
    for _ in range(3):
        port = _free_port()
        result.clear()

        def run(port: int = port) -> None:
            try:
                result["st"] = listen(
                    f"tcp://127.0.0.1:{port}",
                    bind=True,
                    seconds=60,
                    batches=batches,
                    out=lambda s: None,
                )
            except zmq.ZMQError as e:  # the port was taken before the bind
                result["error"] = e

        t = threading.Thread(target=run, daemon=True)
        t.start()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and "error" not in result:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
                result["port"] = port
                return t
            except OSError:
                time.sleep(0.05)
        t.join(1.0)
    raise AssertionError(f"the listener could not bind a loopback port: {result.get('error')}")


def test_the_lab_listens_to_vllms_own_publisher():
    steps = vllm_steps(list(range(1, 6 * B + 101)))
    result: dict = {}
    t = _start_listener(len(steps), result)  # under load the listener's thread can bind late
    port = result["port"]
    pub = ZmqEventPublisher(0, endpoint=f"tcp://127.0.0.1:{port}", topic="")
    try:
        time.sleep(2.0)  # the subscription reaches the publisher before the first batch (PUB drops)
        for i, evs in enumerate(steps):
            pub.publish(KVEventBatch(ts=float(i), events=evs))
        t.join(65)
    finally:
        pub.shutdown()
    assert "st" in result, "the listener did not return within its 60 s"
    st = result["st"]
    assert st.batches == len(steps) and st.not_kv_events == 0 and st.oversize == 0
    # vLLM holds 6 MLA blocks and states at blocks 5 and 6 (3840 and 4608 tokens)
    assert st.over == {"states": 2, "prefixes": 4, "blocks": 10}
    assert st.block_size == B


@pytest.mark.parametrize("payload", [b"\xc1", msgspec.msgpack.encode({"x": 1})])
def test_vllm_refuses_what_the_lab_refuses(payload):
    with pytest.raises((msgspec.DecodeError, msgspec.ValidationError)):
        msgspec.msgpack.Decoder(type=KVEventBatch).decode(payload)
    with pytest.raises(ValueError, match="payload"):
        decode_batch(payload)


def test_lab_bytes_equal_vllms_bytes_for_the_same_events():
    payloads, _ = replica_payloads([[1, 2, 3]], {"max_num_batched_tokens": CHUNK})
    theirs = msgspec.msgpack.Decoder(type=KVEventBatch).decode(payloads[0])
    again = msgspec.msgpack.Encoder().encode(theirs)
    assert again == payloads[0] == encode_batch(theirs.ts, theirs.events, theirs.data_parallel_rank)
