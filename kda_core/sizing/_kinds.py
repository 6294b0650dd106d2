"""One entry per linear (recurrent) layer kind: how its ModelSpec fields make a state per GPU.

SGLang 0.5.23 sizes every kind with one of three shape classes (``srt/configs/mamba_utils.py``):
``Mamba2StateShape.create(intermediate, n_groups, num_heads, head_dim, state_size, conv_kernel)``,
``Mamba2StateShape.create_full_rank`` (Mamba1) and ``KimiLinearStateShape.create`` (KDA); each
family's config class picks the arguments (``mamba2_cache_params``). vLLM 0.33 has one
``MambaStateShapeCalculator`` method per kind (``model_executor/layers/mamba/mamba_utils.py``).
A kind's entry names the rule and the arguments each engine passes, so a new kind is one entry
here. H = ``linear_heads``, G = ``k_heads``, K = ``linear_k_dim``, V = ``linear_v_dim``,
W = ``conv_kernel``. Sources per entry; docs/sizing.md has the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from kda_core.sizing.presets import ModelSpec


class StateShape(NamedTuple):
    """One linear layer's state on one GPU: conv window elements and the recurrent state."""

    conv_elems: int  # (W - 1 + spec tokens) x conv channels per GPU (+ unsplit channels)
    temporal: tuple[int, int, int]  # (heads per GPU, V, K); K = 0 without a recurrent state
    k_heads: int  # key heads (groups) per GPU, as the ReplaySSM ring counts them

    @property
    def temporal_elems(self) -> int:
        h, a, b = self.temporal
        return h * a * b


@dataclass(frozen=True, slots=True)
class LinearKind:
    """How one kind is sized. ``sglang`` / ``vllm``: the shape rule each engine uses ("" = the
    engine serves no family of this kind); ``ring``: the ReplaySSM ring layout SGLang keeps
    ("kda", "gdn" or "" = no ring); ``vllm_checkpoint_blocks``: the prefill-checkpoint blocks
    vLLM's layer adds per request in align mode (``MambaMixer2.get_kv_cache_spec``: 1);
    ``vllm_state_dtype``: what vLLM's ``auto`` state dtype is ("float32" for KDA's
    ``kda_state_dtype``, "model" = the conv (model) dtype, "conv" = the state follows
    ``--mamba-cache-dtype``, not the SSM flag: ``linear_attention_state_dtype``)."""

    label: str
    sglang: str
    vllm: str
    ring: str = ""
    vllm_checkpoint_blocks: int = 0
    vllm_state_dtype: str = "model"


LINEAR_KINDS: dict[str, LinearKind] = {
    # KimiLinearStateShape.create; vLLM kda_state_shape / kda_state_dtype
    "kda": LinearKind("Kimi Delta Attention", "kda", "kda", "kda", 0, "float32"),
    # Qwen3NextConfig.mamba2_cache_params: create(H V, G, H, V, K); gated_delta_net_state_shape
    "gdn": LinearKind("Gated DeltaNet", "mamba2", "gdn", "gdn"),
    # NemotronHConfig / FalconH1Config / GraniteMoeHybridConfig: create(H V, G, H, V, K);
    # mamba2_state_shape (Zamba2, Falcon-H1, Granite, Nemotron-H); MambaMixer2 adds a block
    "mamba2": LinearKind("Mamba2", "mamba2", "mamba2", "", 1),
    # create_full_rank(I = H, state K); mamba1_state_shape (Jamba): V = 1
    "mamba1": LinearKind("Mamba1", "full_rank", "mamba1"),
    # Lfm2Config: create(C, 1, tp, C, 0): conv only; short_conv_state_shape: H = C channels
    "short_conv": LinearKind("short conv only", "mamba2", "short_conv"),
    # BailingHybridConfig / MiniCPMHybridConfig: create(0, 0, H, D, D, 1): state only;
    # linear_attention_state_shape (H // tp, D, D) in the cache dtype
    "lightning": LinearKind("lightning (linear) attention", "mamba2", "linear", "", 0, "conv"),
    # JetNemotronConfig: create(H V, H, H, V, K) (a GDN-shaped state; SGLang's GDN ring)
    "jet": LinearKind("JetBlock", "mamba2", "", "gdn"),
    # ZayaConfig: conv [((Hq + Hkv) D / tp, t0 + t1 - 2), (hidden, 1)], no recurrent state
    "cca": LinearKind("ZAYA compressed convolutional attention", "cca", ""),
}


def _check_divides(n: int, tp: int, what: str) -> int:
    """``divide(n, tp)`` as both engines assert it (``distributed.utils.divide``)."""
    if n % tp:
        raise ValueError(f"tp must divide the {what} {n}, got tp={tp}")
    return n // tp


def _sglang_create(s: ModelSpec, tp: int) -> StateShape:
    """``Mamba2StateShape.create`` with the arguments the spec's family passes: groups raised
    to ``tp`` when TP does not divide them (``extra_groups_for_head_shards``)."""
    h, g, k, v, w = s.linear_heads, s.k_heads, s.linear_k_dim, s.linear_v_dim, s.conv_kernel
    if s.linear_kind == "short_conv":  # Lfm2Config: n_groups 1, num_heads = tp, state 0
        h, g = tp, 1
    if s.linear_kind == "lightning":  # intermediate 0, n_groups 0, state_size = head_dim
        g, inter = 0, 0
    else:
        inter = s.linear_heads * v
    k_per_tp = g // tp if g % tp == 0 else -(-g // tp)
    groups = g if g % tp == 0 else g + (tp - g)
    conv = _check_divides(inter + 2 * groups * k, tp, "linear conv width") * (w - 1)
    return StateShape(conv, (_check_divides(h, tp, "linear-layer heads"), v, k), k_per_tp)


def _sglang(s: ModelSpec, tp: int) -> StateShape:
    rule = LINEAR_KINDS[s.linear_kind].sglang
    h, g, k, v, w = s.linear_heads, s.k_heads, s.linear_k_dim, s.linear_v_dim, s.conv_kernel
    if rule == "kda":  # each of the q / k / v blocks split by TP; state (H/tp, V, V)
        h_tp = _check_divides(h, tp, "KDA heads")
        width = _check_divides(h * v, tp, "KDA value projection")
        width += 2 * _check_divides(g * k, tp, "KDA key projection")
        kt = g // tp if g % tp == 0 else -(-g // tp)
        return StateShape((w - 1) * width, (h_tp, v, v), kt)
    if rule == "full_rank":
        h_tp = _check_divides(h, tp, "Mamba1 intermediate size")
        return StateShape(h_tp * (w - 1), (h_tp, 1, k), 1)
    if rule == "cca":  # ZayaConfig.mamba2_cache_params: global TP, (hidden, 1) unsplit
        width = _check_divides(h * v, tp, "CCA channels")
        return StateShape(width * (w - 1) + s.conv_unsplit, (1, 1, 0), 1)
    return _sglang_create(s, tp)


def _vllm(s: ModelSpec, tp: int, num_spec: int) -> StateShape:
    rule = LINEAR_KINDS[s.linear_kind].vllm
    h, g, k, v = s.linear_heads, s.k_heads, s.linear_k_dim, s.linear_v_dim
    win = s.conv_kernel - 1 + num_spec
    if rule == "kda":
        h_tp = _check_divides(h, tp, "KDA heads")
        conv = _check_divides(h * v + 2 * g * k, tp, "KDA conv width") * win
        return StateShape(conv, (h_tp, v, v), -(-g // tp))
    if rule == "gdn":
        conv = _check_divides(2 * g * k + h * v, tp, "GDN conv width") * win
        return StateShape(conv, (_check_divides(h, tp, "GDN value heads"), v, k), -(-g // tp))
    if rule == "mamba2":
        groups = g if g % tp == 0 else g + (tp - g)
        conv = _check_divides(h * v + 2 * groups * k, tp, "Mamba2 conv width") * win
        return StateShape(conv, (_check_divides(h, tp, "Mamba2 heads"), v, k), groups // tp)
    if rule == "mamba1":  # no speculative widening (mamba1_state_shape)
        h_tp = _check_divides(h, tp, "Mamba1 intermediate size")
        return StateShape(h_tp * (s.conv_kernel - 1), (h_tp, 1, k), 1)
    if rule == "short_conv":
        return StateShape(_check_divides(h, tp, "short-conv channels") * win, (1, 1, 0), 1)
    return StateShape(0, (h // tp, v, v), 0)  # linear attention: floor division, no conv


def engine_state_shape(s: ModelSpec, tp: int, engine: str, num_spec: int = 0) -> StateShape:
    """One linear layer's state on one GPU as ``engine`` computes it (checked arguments: the
    public ``sizing.sizes.state_shape`` checks them). ValueError when the engine serves no
    family of the spec's kind or TP does not divide what it splits."""
    kind = LINEAR_KINDS[s.linear_kind]
    if engine == "vllm":
        if not kind.vllm:
            raise ValueError(f"engine: vLLM 0.33 serves no {kind.label} model ({s.name})")
        return _vllm(s, tp, num_spec)
    if not kind.sglang:
        raise ValueError(f"engine: SGLang 0.5.23 serves no {kind.label} model ({s.name})")
    return _sglang(s, tp)
