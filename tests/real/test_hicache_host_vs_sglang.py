"""``sim.tiers.hicache_host_states`` against SGLang 0.5.23's own ``MambaPoolHost`` (tiny CPU
state tensors, no pinned memory) and ``_split_hicache_size``: the host pool's state slots from
``--hicache-ratio`` and from ``--hicache-size``. Runs in the real-engine venv."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sglang.srt.mem_cache.pool_host.mamba")

from sglang.srt.mem_cache.device_pool_info import MambaStateBufferInfo  # noqa: E402
from sglang.srt.mem_cache.hybrid_cache.hybrid_pool_assembler import (  # noqa: E402
    _split_hicache_size,
)
from sglang.srt.mem_cache.pool_host.mamba import MambaPoolHost  # noqa: E402

from kda_core.sim.tiers import hicache_host_states  # noqa: E402


def _host(layers: int, slots: int, ratio: float, host_size: float) -> MambaPoolHost:
    temporal = torch.zeros(layers, slots, 2, 4, 4, dtype=torch.float32)
    conv = (torch.zeros(layers, slots, 6, 3, dtype=torch.bfloat16),)
    info = MambaStateBufferInfo(temporal=temporal, conv=conv)
    return MambaPoolHost(
        info, ratio, host_size, device_capacity=slots, pin_memory=False, layout="page_first"
    )


@pytest.mark.parametrize(("layers", "slots", "ratio"), [(3, 5, 2.0), (2, 7, 1.5), (4, 3, 0.5)])
def test_ratio(layers: int, slots: int, ratio: float) -> None:
    real = _host(layers, slots, ratio, 0)
    assert real.size_per_token == layers * (2 * 4 * 4 * 4 + 6 * 3 * 2)
    assert hicache_host_states(slots, real.size_per_token, ratio=ratio) == real.size


@pytest.mark.parametrize(("slots", "kv_bytes", "size_gb"), [(5, 0, 1e-5), (7, 40_000, 3e-5)])
def test_size(slots: int, kv_bytes: int, size_gb: float) -> None:
    per = _host(3, slots, 2.0, 0).size_per_token
    pools = (
        SimpleNamespace(get_kv_size_bytes=lambda: kv_bytes),
        SimpleNamespace(get_kv_size_bytes=lambda: slots * per),
    )
    share = _split_hicache_size(size_gb, pools)[1]
    real = _host(3, slots, 2.0, share)
    assert real.size != int(slots * 2.0) + 1  # the size, not the ratio, decided it
    got = hicache_host_states(slots, per, size_gb=size_gb, kv_device_bytes=kv_bytes)
    assert got == real.size
