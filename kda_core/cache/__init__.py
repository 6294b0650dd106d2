"""The cache layer: the prefix-cache protocol, the KDA radix tree, state pools, checkpoint
policies and state compression (``protocol``, ``radix``, ``pool``, ``policy``, ``quant``).

Import the subpackages directly (``from kda_core.cache.radix import RadixStateCache``); this
file re-exports nothing, so importing one part never loads the others.
"""
