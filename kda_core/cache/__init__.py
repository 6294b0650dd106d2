"""The cache layer: the prefix-cache protocol, the KDA radix tree, vLLM's block table,
checkpoint policies and state compression (the state pools are ``kda_core.serve``'s). Import
the subpackages directly: this file re-exports nothing, so one part never loads the others.
"""
