"""The KV an MTP drafter's own attention layers take, as SGLang 0.5.23 and vLLM 0.33 price it.

An MTP module is one decoder layer of the target's full-attention shape (same KV heads and head
size, or the same MLA latent), so its KV per token is one more target attention layer; what
differs between the engines is how many modules each counts and where the bytes come from.

vLLM 0.33 (``speculative_config={"method": "mtp"}``): the drafter's attention layers register
KV cache specs like the target's (``GPUModelRunner.get_kv_cache_spec`` marks them
``is_draft``, a flag ``KVCacheSpec`` leaves out of equality "so it never affects grouping"), so
they join the target's attention layers in ``_get_kv_cache_groups_uniform_page_size`` and every
request holds ``cdiv(max_model_len, block)`` blocks for them. The module count is what the MTP
class builds (``num_mtp_layers``), whatever ``num_speculative_tokens`` is (more tokens than
modules reuse them, ``spec_step_idx % num_mtp_layers``): ``Qwen3NextMultiTokenPredictor``
reads ``num_nextn_predict_layers`` (default 1: Qwen3-Next configs name ``mtp_num_hidden_layers``,
which it does not read), ``Qwen3_5MultiTokenPredictor`` ``mtp_num_hidden_layers`` (default 1),
``KimiK3MultiTokenPredictor`` the text config's ``num_nextn_predict_layers`` (a K3 config's text
config is a ``kimi_linear`` one; a Kimi-Linear checkpoint names no module and is refused).

SGLang 0.5.23 (``--speculative-algorithm NEXTN``/``EAGLE`` with no draft path): the draft
worker's KV pool has the target's token count (``KVCacheConfigurator.configure`` hands it the
target's ``memory_pool_config``) and the target prices it into its per-token cell:
``cell += int(cell * draft_layers / attention_layers)`` (``DefaultPoolConfigurator.__init__``)
with ``draft_layers = eagle_draft_num_layers``, the TARGET config's ``num_nextn_predict_layers``
for a path-less draft (``_resolve_eagle_aux_hidden_state``); a config without that field (the
Qwen3-Next and Qwen3.5 configs name ``mtp_num_hidden_layers``) prices none, while the draft
model (rewritten to one module, ``ModelConfig._config_draft_model``) still gets its pool: that
pool is allocated outside the budget the split sized (``sglang_unpriced_draft_layers``).
SGLang serves no MTP draft for Kimi K3 (``mtp_refusal``).
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
    "mtp_hidden_layers": ("mtp_num_hidden_layers"),
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
    return (
        f"mtp: the lab models the MTP drafter of {sorted(set(families))} only, not "
        f"{spec.family or spec.name!r} ({engine})"
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


def sglang_mtp_layers(spec: ModelSpec) -> int:
    """The draft layers SGLang 0.5.23 prices into the target's KV cell for a path-less MTP
    draft: the target config's ``num_nextn_predict_layers`` (0 when it has none)."""
    _check_family(spec, "sglang")
    return spec.nextn_predict_layers


def sglang_unpriced_draft_layers(spec: ModelSpec) -> int:
    """Draft attention layers SGLang 0.5.23 allocates a KV pool for (at the target's token
    count) beyond what it priced: the one module the draft is rewritten to, minus the priced."""
    return max(1 - sglang_mtp_layers(spec), 0)
