"""A real SGLang 0.5.23 ``UnifiedRadixCache`` (FULL + MAMBA components, Python tree core) on CPU,
built with SGLang's own unit-test kit (``sglang/test/kits/unified_radix_cache/fixtures.py``,
``build_fixture``), behind a small driver with the operations the differential suite uses.

Import only after ``fakes.install()`` (tests/real/conftest.py does it)."""

from __future__ import annotations

from array import array
from typing import Any

from sglang.srt.mem_cache.base_prefix_cache import EvictParams, InsertParams, MatchPrefixParams
from sglang.srt.mem_cache.radix_cache import RadixKey
from sglang.srt.mem_cache.unified_cache.components.base import ComponentType
from sglang.test.kits.unified_radix_cache import fixtures as sglang_fixtures
from sglang.test.kits.unified_radix_cache.config import CacheConfig

# The kit asks sglang.srt.utils.get_device(), which probes CUDA/XPU/NPU; CPU is the answer here.
sglang_fixtures.get_device = lambda: "cpu"


class RealSGLangCache:
    """``UnifiedRadixCache`` + its token allocator + its mamba slot pool."""

    def __init__(
        self,
        kv_size: int = 4096,
        mamba_slots: int = 512,
        max_reqs: int = 512,
        max_states_per_path: int = -1,
    ) -> None:
        cfg = CacheConfig(
            components=(ComponentType.FULL, ComponentType.MAMBA),
            page_size=1,
            kv_size=kv_size,
            mamba_cache_size=mamba_slots,
            max_num_reqs=max_reqs,
            max_context_len=2048,
        )
        self.cache, self.allocator, self.pool = sglang_fixtures.build_fixture(
            cfg, tree_core_backend="python"
        )
        # --mamba-max-states-per-path (-1: no cap), which MambaComponent reads at construction
        self.cache.components[ComponentType.MAMBA].mamba_max_states_per_path = max_states_per_path

    def insert(self, tokens: list[int]) -> Any:
        """Insert ``tokens`` with their KV and one state at the end (SGLang ``cache_finished_req``
        inserts one mamba value per request, at the tracked length)."""
        value = self.allocator.alloc(len(tokens))
        assert value is not None, "KV pool exhausted: raise kv_size"
        slot = self.pool.mamba_allocator.alloc(1)
        assert slot is not None, "mamba pool exhausted: raise mamba_slots"
        result = self.cache.insert(
            InsertParams(key=RadixKey(array("q", tokens)), value=value, mamba_value=slot.view(1))
        )
        # The tree keeps what it did not have; the duplicates are the caller's to free, as in
        # SGLang's cache_finished_req (value[:prefix_len], and the slot when mamba_exist).
        if result.prefix_len:
            self.allocator.free(value[: result.prefix_len])
        if result.mamba_exist:
            self.pool.mamba_allocator.free(slot.view(1))
        return result

    def match(self, tokens: list[int]) -> Any:
        return self.cache.match_prefix(MatchPrefixParams(key=RadixKey(array("q", tokens))))

    def evict(self, num_tokens: int = 0, mamba_num: int = 0) -> Any:
        return self.cache.evict(EvictParams(num_tokens=num_tokens, mamba_num=mamba_num))

    def lock(self, node_id: int) -> Any:
        return self.cache.lock(node_id)

    def unlock(self, lock: Any) -> Any:
        return self.cache.unlock(lock)

    def sizes(self) -> dict[str, int]:
        return {
            "kv_evictable": self.cache.full_evictable_size(),
            "kv_protected": self.cache.full_protected_size(),
            "states_evictable": self.cache.mamba_evictable_size(),
            "states_protected": self.cache.mamba_protected_size(),
        }
