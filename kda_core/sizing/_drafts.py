"""The KV an MTP drafter's own attention layers take, as SGLang 0.5.23 and vLLM 0.33 count it.

An MTP module is one decoder layer of the target's full-attention shape, so its KV per token is
one more target attention layer (docs/sizing.md, "Speculative decoding", has the table).

vLLM 0.33 (``speculative_config={"method": "mtp"}``): the drafter's attention layers register
specs like the target's (``GPUModelRunner.get_kv_cache_spec`` marks them ``is_draft``, which
``KVCacheSpec`` leaves out of equality) and join the target's attention layers in
``_get_kv_cache_groups_uniform_page_size``. The count is what the MTP class builds
(``num_mtp_layers``): ``Qwen3NextMultiTokenPredictor`` reads ``num_nextn_predict_layers``
(default 1), ``Qwen3_5MultiTokenPredictor`` ``mtp_num_hidden_layers`` (default 1),
``KimiK3MultiTokenPredictor`` the text config's ``num_nextn_predict_layers`` (a K3 text config
is a ``kimi_linear`` one). ``num_speculative_tokens`` left out defaults to the field without the
default (``SpeculativeConfig``'s ``n_predict``, ``vllm_mtp_tokens``).

SGLang 0.5.23 (``--speculative-algorithm NEXTN`` with no draft path): the draft worker's pool
has the target's token count and the target prices it into its cell, ``cell += int(cell *
draft / attention_layers)`` (``DefaultPoolConfigurator.__init__``), draft = the TARGET
config's ``num_nextn_predict_layers`` (``_resolve_eagle_aux_hidden_state``; none when absent),
while the draft is rewritten to one module (``ModelConfig._config_draft_model``): a layer
allocated beyond the budget (``sglang_unpriced_draft_layers``). No MTP draft for Kimi.
"""

from __future__ import annotations

from kda_core.sizing.presets import ModelSpec

_VLLM_FIELD = {
    "qwen3_next": ("nextn_predict_layers", 1),
    "qwen3_5": ("mtp_hidden_layers", 1),
    "qwen3_5_text": ("mtp_hidden_layers", 1),
    "qwen3_5_moe": ("mtp_hidden_layers", 1),
    "qwen3_5_moe_text": ("mtp_hidden_layers", 1),
    "kimi_k3": ("nextn_predict_layers", 0),
    "kimi_linear": ("nextn_predict_layers", 0),
}
"""family -> (the ModelSpec field vLLM's MTP class reads, its default when the config lacks it)."""
_SGLANG_ONE_MODULE = frozenset(("qwen3_next", *(k for k in _VLLM_FIELD if "qwen3_5" in k)))
"""The families whose MTP draft SGLang serves (``Qwen3NextForCausalLMMTP``,
``Qwen3_5ForCausalLMMTP``); ``_config_draft_model`` rewrites them to one module
(``num_nextn_predict_layers = 1``)."""
_CONFIG_FIELD = {
    "nextn_predict_layers": "num_nextn_predict_layers",
    "mtp_hidden_layers": "mtp_num_hidden_layers",
}


def mtp_refusal(spec: ModelSpec, engine: str) -> str:
    """ "" when the lab sizes ``engine``'s MTP draft for ``spec``, else the sentence why not.
    SGLang 0.5.23 has no MTP / NextN draft class for Kimi (``models/kimi_k3.py`` registers the
    target classes only; the ``*_mtp.py`` / ``*_nextn.py`` modules name none)."""
    families = _VLLM_FIELD if engine == "vllm" else _SGLANG_ONE_MODULE
    if spec.family in families:
        return ""
    if engine == "sglang" and spec.family in _VLLM_FIELD:
        return "mtp: SGLang 0.5.23 has no MTP draft model for Kimi K3 / Kimi Linear"
    name = spec.name if spec.family is None else f"{spec.name} ({spec.family})"
    return (
        f"mtp: the lab models the MTP drafter of {', '.join(sorted(set(families)))} only, not "
        f"{name} in {engine}"
    )


def _check_family(spec: ModelSpec, engine: str) -> None:
    why = mtp_refusal(spec, engine)
    if why:
        raise ValueError(why)


def vllm_mtp_layers(spec: ModelSpec) -> int:
    """The attention layers vLLM 0.33's MTP drafter adds to the KV cache groups (one per
    module the model's MTP class builds); ValueError for a family the lab does not model or a
    Kimi K3 config naming no module."""
    _check_family(spec, "vllm")
    field, default = _VLLM_FIELD[spec.family]
    n = getattr(spec, field) or default
    if not n:
        raise ValueError(f"mtp: the config names no MTP module ({_CONFIG_FIELD[field]})")
    return n


def vllm_mtp_tokens(spec: ModelSpec, k: int) -> int:
    """vLLM 0.33's ``num_speculative_tokens`` for an MTP draft: ``k``, or when 0 the config's
    ``n_predict`` (``SpeculativeConfig.hf_config_override``: the field the MTP class reads, with
    no default); ValueError where vLLM refuses: no ``n_predict`` to default to, or ``k`` above
    it and not a multiple ("must be divisible", modules are reused in turn)."""
    _check_family(spec, "vllm")
    field, _ = _VLLM_FIELD[spec.family]
    n = getattr(spec, field)
    if not k:
        if not n:
            raise ValueError(
                f"mtp: num_speculative_tokens must be given: the config names no "
                f"{_CONFIG_FIELD[field]} for vLLM to default to"
            )
        return n
    if n and k > n and k % n:
        raise ValueError(f"mtp: num_speculative_tokens ({k}) must be divisible by n_predict ({n})")
    return k


def sglang_mtp_layers(spec: ModelSpec) -> int:
    """The draft layers SGLang 0.5.23 prices into the target's KV cell for a path-less MTP
    draft: the target config's ``num_nextn_predict_layers`` (0 when it has none)."""
    _check_family(spec, "sglang")
    return spec.nextn_predict_layers


def sglang_unpriced_draft_layers(spec: ModelSpec) -> int:
    """Draft attention layers SGLang 0.5.23 allocates a KV pool for (at the target's token
    count) beyond what it priced: the one module the draft is rewritten to, minus the priced."""
    return max(1 - sglang_mtp_layers(spec), 0)
