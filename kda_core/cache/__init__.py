"""The cache layer: the prefix-cache protocol, the KDA radix tree, vLLM's block table,
checkpoint policies and state compression (``protocol``, ``radix``, ``vllm_blocks``,
``policy``, ``quant``). The state pools are the engine's (``kda_core.serve``).

Import the subpackages directly (``from kda_core.cache.radix import RadixStateCache``); this
file re-exports nothing, so importing one part never loads the others.
"""
