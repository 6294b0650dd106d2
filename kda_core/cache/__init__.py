"""The cache layer: the prefix-cache protocol, the KDA radix tree, vLLM's block table and the
checkpoint policies (the state pools are ``kda_core.serve``'s, the state formats
``kda_core.kda.quant``). Import the subpackages directly: this file re-exports nothing, so one
part never loads the others.
"""
