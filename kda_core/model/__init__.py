"""The tiny Kimi K3 ("k3-mini"): TinyHybrid, its state, tokenizer, weights, corpus and training.

Modules: ``tiny`` (TinyHybrid, bits_per_byte, export_hf), ``state`` (ModelState), ``params``
(ModelConfig; the weight records and their init are the package's own ``_arrays``), ``_hf``
(Kimi-Linear checkpoints as transformers writes them, behind ``TinyHybrid.from_hf`` /
``export_hf``), ``_functional`` (the forward's rmsnorm and sigmoid), ``tokenizer`` (UTF-8
bytes and how they are shown), ``_weights`` (the shipped file), ``corpus`` (the training
text), ``train`` (torch; ``python -m kda_core.model.train``, not imported here). This file
only re-exports the names other code uses; see docs/model.md.
"""

from kda_core.model.params import VARIANTS, ModelConfig
from kda_core.model.state import KDALayerState, ModelState
from kda_core.model.tiny import (
    TinyHybrid,
    bits_per_byte,
    export_hf,
    named_weights,
    next_byte_bits,
)
from kda_core.model.tokenizer import (
    MAX_TOKENS,
    TOKENIZER_FINGERPRINT,
    VOCAB,
    check_tokens,
    decode,
    encode,
)

__all__ = [
    "MAX_TOKENS",
    "TOKENIZER_FINGERPRINT",
    "VARIANTS",
    "VOCAB",
    "KDALayerState",
    "ModelConfig",
    "ModelState",
    "TinyHybrid",
    "bits_per_byte",
    "check_tokens",
    "decode",
    "encode",
    "export_hf",
    "named_weights",
    "next_byte_bits",
]
