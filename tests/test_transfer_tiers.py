"""Host tier under the device checkpoint pool: evicted states move to the host, host hits load
back, counts and bytes add up, tokens and logits stay those of an uncached run."""

from __future__ import annotations

import numpy as np
import pytest

from kda_core.model import TinyHybrid, encode
from kda_core.serve.engine import Engine
from kda_core.transfer._tiers import HostTier
from kda_core.transfer.instance import Instance
from kda_core.transfer.objects import _PART_KINDS as PART_KINDS

SYSTEM = "System: shared preamble for every chat in this lab. "


def object_bytes(T: int) -> int:
    """Independent size of one TinyHybrid object at boundary T: float64 MLA latent KV (2 MLA
    layers x 32) per token, 6 KDA layers of 4x32x32 state and 3x384 conv window, int64 ids."""
    return 8 * (T * 2 * 32 + 6 * 4 * 32 * 32 + 6 * 3 * 384 + T)


def run_chats(host: HostTier | None, slots: int = 3):
    kw = dict(engine_args=dict(checkpoint_slots=slots), host=host)
    inst = (
        Instance("dev", **kw)
        if host is not None
        else Instance("dev", engine=Engine(checkpoint_slots=slots))
    )
    model = TinyHybrid()
    hist = [encode(SYSTEM + f"User {i}: question number {i} about states? ") for i in range(4)]
    restored, worst, same = 0, 0.0, True
    for turn in range(3):
        for i in range(4):
            rep, _ = inst.serve(hist[i], 6)
            ref_tokens, ref_logits = model.generate(hist[i], 6)
            same &= rep.tokens == ref_tokens
            worst = max(worst, float(np.max(np.abs(rep.logits - ref_logits))))
            restored += rep.restore_at
            hist[i] = hist[i] + rep.tokens + encode(f" more {turn}. ")
    inst.engine.check_integrity()
    return inst, restored, worst, same


@pytest.fixture(scope="module")
def both():
    return run_chats(None), run_chats(HostTier(64 << 20))


def test_tiers_are_exact(both):
    for _, _, worst, same in both:
        assert same and worst <= 1e-9


def test_evictions_move_to_host_and_hits_load_back(both):
    (dev, restored_dev, _, _), (tier, restored_tier, _, _) = both
    st = tier.host.stats
    assert st.offloads > 0 and st.loads > 0 and st.host_evictions == 0
    assert restored_tier > restored_dev  # host copies turned misses into restores
    offs = [e for e in tier.events if e.kind == "offload"]
    loads = [e for e in tier.events if e.kind == "host_load"]
    assert len(offs) == st.offloads and len(loads) == st.loads
    assert st.offload_bytes == sum(object_bytes(e.boundary) for e in offs)
    assert st.load_bytes == sum(object_bytes(e.boundary) for e in loads)
    assert all(e.nbytes == object_bytes(e.boundary) for e in offs + loads)
    # every load restored the request at exactly that boundary
    restores = [e for e in tier.events if e.kind == "restore" and e.detail == "host"]
    assert [e.boundary for e in restores] == [e.boundary for e in loads]


def test_host_objects_carry_only_transferable_parts(both):
    _, (tier, _, _, _) = both
    for obj in tier.host._objs.values():
        assert set(obj.part_arrays()) == set(PART_KINDS)
        assert obj.kda_state.shape == (6, 4, 32, 32) and obj.conv_window.shape == (6, 3, 384)
        assert obj.mla_kv.shape == (obj.boundary, 2, 32)
        assert obj.physical_location == "host"  # the cache entry's location (seed 000 §4.1)


def test_host_capacity_is_an_lru():
    one = object_bytes(40)
    host = HostTier(capacity_bytes=2 * one + one // 2)  # room for two objects of length 40
    inst, _, worst, same = run_chats(host, slots=2)
    assert same and worst <= 1e-9
    assert host.used_bytes <= host.capacity_bytes
    assert host.stats.host_evictions > 0
    assert host.used_bytes == sum(o.nbytes for o in host._objs.values())
    tiny = HostTier(capacity_bytes=1000)
    run_chats(tiny, slots=2)
    assert len(tiny) == 0 and tiny.stats.too_big > 0


def test_host_tier_arguments():
    for bad in (0, -1, 1.5, True, 1 << 40):
        with pytest.raises(ValueError, match="capacity_bytes"):
            HostTier(bad)
