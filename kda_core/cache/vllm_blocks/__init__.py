"""vLLM 0.33's block-level prefix cache for a KDA hybrid: chained hashes every
``prefix_match_unit`` tokens, decoupled from physical blocks (MLA KV pages and KDA state
blocks from one pool), fine-grained partial hits in align mode. docs/policies.md ("vLLM's block
table"); checked against vLLM's ``KVCacheManager`` by tests/real/test_vllm_blocks.py."""

from kda_core.cache.vllm_blocks._pool import PoolSnapshot
from kda_core.cache.vllm_blocks.cache import BlockHit, Step, VLLMBlockCache

__all__ = ["BlockHit", "PoolSnapshot", "Step", "VLLMBlockCache"]
