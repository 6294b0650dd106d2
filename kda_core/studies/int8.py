"""Data for the int8_checkpoint app and figure: park a real state compressed, restore, decode on.

For the state `park` keeps (TinyHybrid after ``n_tokens`` bytes of the
user's text): `_variant_table` measures every format of ``VARIANTS`` on all KDA layers at once
(max abs error, relative Frobenius error and its theoretical ceiling, `kda_core.quant`);
`_error_map` shows one (layer, head); `_divergence` decodes on three ways, exact, restored once
from the compressed checkpoint ("park once", SGLang's design) and re-compressed after every step
("every step"), teacher-forced on the exact run's greedy tokens so the curves measure how the
state error propagates; `capacity` counts how many checkpoints fit a byte budget per format, for
the tiny config and for Kimi K3 (`kda_core.sizing`; scales in the native state dtype, conv
windows native).

Measured (defaults: the bilingual DEFAULT_TEXT, 64 tokens, all 6 KDA layers, trained weights;
tests assert these relations): relative Frobenius error int8 per key channel 7.4e-3 (ceiling
1.30e-2), per head 1.79e-2, per tensor 2.21e-2, fp8-e4m3 per channel 2.13e-2, bf16 1.6e-3. Over
16 decoded tokens the park-once state distance goes 7.4e-3 -> 5.8e-3 (max logit change 0.032,
same greedy tokens) while re-quantizing every step grows it to 2.5e-2 (logits 0.080).
Kimi K3 at TP8, bf16 pool, 8 GiB: 295 native checkpoints vs 547 INT8 (x1.85; x3.28 against a
float32 pool); bf16 parking of a bf16 pool gains nothing; tiny config x1.63 (the native conv
window is a larger share).

The parking names (``DEFAULT_TEXT``, ``VARIANTS``, ``park``, the limits) are imported here for
the app's controls. Left out: compressing MLA KV, compressed *active* states.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kda_core import sizing
from kda_core._checks import check_int as _check_int
from kda_core.kda import quant
from kda_core.sizing import GIB, ModelSpec
from kda_core.studies._parking import (  # noqa: F401 (MAX_* are the app's limits)
    DEFAULT_TEXT,
    MAX_PARK_TOKENS,
    MAX_STEPS,
    MAX_TEXT_CHARS,
    VARIANTS,
    Parked,
    check_variant,
    compress_states,
    kda_shape,
    park,
    tiny_model,
    variant_label,
)

_HIST_BINS = 41
NATIVE_DTYPES: tuple[str, ...] = ("bfloat16", "float32")
# the two divergence runs in a fixed order (series colours follow it)
RUNS: tuple[str, ...] = ("park_once", "every_step")


def _ratio(err: np.ndarray, bound: np.ndarray) -> float:
    """max(err / bound) over the elements with a positive bound (0 where both are 0)."""
    return float(np.divide(err, bound, out=np.zeros_like(err), where=bound > 0).max())


# ---------------------------------------------------------------------------------------------
# per-variant error on the real state


@dataclass(slots=True)
class VariantTable:
    """One row per variant (``labels [n]``), measured over all KDA layers of the parked state.

    ``rel_fro`` = ||x - x'||_F / ||x||_F, ``bound_rel_fro`` its theoretical ceiling,
    ``max_abs`` = max |x - x'|, ``max_bound_ratio`` = max |x - x'| / per-element bound (<= 1),
    ``state_bytes`` = bytes of the compressed KDA states of the tiny model (codes + scales in
    the lab's float64; the memory tables give deployment sizes).
    """

    labels: tuple[str, ...]
    fmts: tuple[str, ...]
    granularities: tuple[str | None, ...]
    max_abs: np.ndarray
    mean_abs: np.ndarray
    rel_fro: np.ndarray
    bound_rel_fro: np.ndarray
    max_bound_ratio: np.ndarray
    bound_holds: np.ndarray
    state_bytes: np.ndarray


def _variant_table(parked: Parked) -> VariantTable:
    """Measure every variant of VARIANTS on the parked state (all KDA layers, per-layer scales)."""
    x = parked.kda_states  # [L, H, K, V]: per-layer scales, since quant keeps leading axes
    rows = []
    for _, fmt, gran in VARIANTS:
        if gran == "tensor":  # one scale per layer's [H, K, V], not one for all layers
            qs = [quant.quantize(s, fmt, gran) for s in x]
            deq = np.stack([q.dequantize() for q in qs])
            nbytes = sum(q.nbytes for q in qs)
            bound = np.stack([q.bound(s) for q, s in zip(qs, x)])
        else:
            q = quant.quantize(x, fmt, gran)
            deq, nbytes, bound = q.dequantize(), q.nbytes, q.bound(x)
        err = np.abs(x - deq)
        norm = float(np.linalg.norm(x))
        rows.append(
            (
                float(err.max()),
                float(err.mean()),
                float(np.linalg.norm(err)) / norm,
                float(np.linalg.norm(bound)) / norm,
                float((err / bound).max()),
                bool(np.all(err <= bound * (1 + 1e-12))),
                nbytes,
            )
        )
    cols = list(zip(*rows))
    return VariantTable(
        labels=tuple(v[0] for v in VARIANTS),
        fmts=tuple(v[1] for v in VARIANTS),
        granularities=tuple(v[2] for v in VARIANTS),
        max_abs=np.array(cols[0]),
        mean_abs=np.array(cols[1]),
        rel_fro=np.array(cols[2]),
        bound_rel_fro=np.array(cols[3]),
        max_bound_ratio=np.array(cols[4]),
        bound_holds=np.array(cols[5]),
        state_bytes=np.array(cols[6], dtype=np.int64),
    )


@dataclass(slots=True)
class ErrorMap:
    """One variant on one (layer, head): ``state``, ``restored``, ``error`` = restored - state and
    ``bound`` (per-element worst case), all ``[K, V]``; ``amax [K]`` = max over V of |state| per
    key channel (what sets the channel's scale). Histograms over all KDA layers: signed errors
    (``err_edges [B+1]``, ``err_counts [B]``, symmetric around 0) and state values."""

    label: str
    layer: int
    head: int
    state: np.ndarray
    restored: np.ndarray
    error: np.ndarray
    bound: np.ndarray
    amax: np.ndarray
    err_edges: np.ndarray
    err_counts: np.ndarray
    value_edges: np.ndarray
    value_counts: np.ndarray
    max_abs_error: float = 0.0  # max |error| over this (layer, head)
    max_bound_ratio: float = 0.0  # max |error| / bound over this (layer, head); <= 1


def _error_map(
    parked: Parked,
    fmt: str = "int8",
    granularity: str | None = "channel",
    layer: int = 0,
    head: int = 0,
    bins: int = _HIST_BINS,
) -> ErrorMap:
    """Signed error of one variant; ``layer`` indexes the KDA layers (0 = the first KDA layer)."""
    fmt, granularity = check_variant(fmt, granularity)
    x = parked.kda_states
    L, H = x.shape[:2]
    layer = _check_int("layer", layer, 0, L - 1)
    head = _check_int("head", head, 0, H - 1)
    bins = _check_int("bins", bins, 2, 1000)
    restored = np.empty_like(x)
    bound = np.empty_like(x)
    for i in range(L):  # per-layer quantization (tensor granularity = one scale per layer)
        q = quant.quantize(x[i], fmt, granularity)
        restored[i], bound[i] = q.dequantize(), q.bound(x[i])
    err = restored - x
    m = float(np.abs(err).max()) or 1.0
    err_counts, err_edges = np.histogram(err, bins=bins, range=(-m, m))
    v = float(np.abs(x).max()) or 1.0
    value_counts, value_edges = np.histogram(x, bins=bins, range=(-v, v))
    return ErrorMap(
        label=variant_label(fmt, granularity),
        layer=layer,
        head=head,
        state=x[layer, head].copy(),
        restored=restored[layer, head],
        error=err[layer, head],
        bound=bound[layer, head],
        amax=np.abs(x[layer, head]).max(axis=1),
        err_edges=err_edges,
        err_counts=err_counts,
        value_edges=value_edges,
        value_counts=value_counts,
        max_abs_error=float(np.abs(err[layer, head]).max()),
        max_bound_ratio=_ratio(np.abs(err[layer, head]), bound[layer, head]),
    )


# ---------------------------------------------------------------------------------------------
# divergence over the next tokens


@dataclass(slots=True)
class Divergence:
    """Decode after parking: exact vs park-once vs every-step compression, arrays ``[steps+1]``.

    Index 0 is the parking point (state distance = the one rounding; logit difference 0 because
    the logits predicting the first continued token were computed before parking); index i >= 1
    is after feeding the i-th continued token. ``*_logit_diff`` = max |logits - exact logits|,
    ``*_state_dist`` = relative Frobenius distance of all KDA states to the exact run's,
    ``*_agree`` = the run's argmax equals the exact run's. ``tokens [steps]`` are the exact
    greedy tokens fed to all three runs.
    """

    label: str
    steps: np.ndarray
    tokens: np.ndarray
    park_once_logit_diff: np.ndarray
    every_step_logit_diff: np.ndarray
    park_once_state_dist: np.ndarray
    every_step_state_dist: np.ndarray
    park_once_agree: np.ndarray
    every_step_agree: np.ndarray

    @property
    def decoded(self) -> int:
        """Tokens decoded after parking (``steps.size - 1``)."""
        return int(self.steps.size - 1)

    @property
    def park_once_same(self) -> int:
        """Decoded tokens whose greedy choice equals the exact run's (index 0 excluded)."""
        return int(self.park_once_agree[1:].sum())

    @property
    def every_step_same(self) -> int:
        """As ``park_once_same`` for the run re-quantized at every step."""
        return int(self.every_step_agree[1:].sum())


def _divergence(
    parked: Parked, fmt: str = "int8", granularity: str | None = "channel", steps: int = 16
) -> Divergence:
    """Teacher-forced greedy continuation for ``steps`` tokens (see `Divergence`)."""
    fmt, granularity = check_variant(fmt, granularity)
    steps = _check_int("steps", steps, 1, MAX_STEPS)
    model = tiny_model()
    exact = parked.state.copy()
    once = parked.state.copy()
    compress_states(once, fmt, granularity)
    every = once.copy()
    n = steps + 1
    out = {k: np.zeros(n) for k in ("ol", "el", "os", "es")}
    agree = {k: np.ones(n, bool) for k in ("o", "e")}
    out["os"][0] = out["es"][0] = once.kda_distance(exact)
    tokens = np.zeros(steps, np.int64)
    tok = int(np.argmax(parked.logits_last))
    for i in range(1, n):
        tokens[i - 1] = tok
        le = model.decode_step(tok, exact)
        lo = model.decode_step(tok, once)
        lv = model.decode_step(tok, every)
        compress_states(every, fmt, granularity)
        out["ol"][i] = float(np.abs(lo - le).max())
        out["el"][i] = float(np.abs(lv - le).max())
        out["os"][i] = once.kda_distance(exact)
        out["es"][i] = every.kda_distance(exact)
        tok = int(np.argmax(le))
        agree["o"][i] = int(np.argmax(lo)) == tok
        agree["e"][i] = int(np.argmax(lv)) == tok
    return Divergence(
        label=variant_label(fmt, granularity),
        steps=np.arange(n),
        tokens=tokens,
        park_once_logit_diff=out["ol"],
        every_step_logit_diff=out["el"],
        park_once_state_dist=out["os"],
        every_step_state_dist=out["es"],
        park_once_agree=agree["o"],
        every_step_agree=agree["e"],
    )


# ---------------------------------------------------------------------------------------------
# memory and capacity


@dataclass(slots=True)
class Capacity:
    """Bytes of one checkpoint per format on one GPU and how many fit ``budget_bytes``.

    Rows ``labels [n]``: "native" (state + conv in ``native_dtype``), then VARIANTS.
    ``state_bytes`` = compressed recurrent states incl. scales, ``conv_bytes`` = conv windows
    (always native), ``total_bytes`` = their sum, ``capacity`` = budget // total,
    ``gain`` = capacity / native capacity.
    """

    model: str
    tp: int
    native_dtype: str
    budget_bytes: int
    labels: tuple[str, ...]
    state_bytes: np.ndarray
    conv_bytes: np.ndarray
    total_bytes: np.ndarray
    capacity: np.ndarray
    gain: np.ndarray


def capacity(
    spec: ModelSpec | str = "kimi-k3",
    tp: int = 8,
    native_dtype: str = "bfloat16",
    budget_bytes: int = 8 * GIB,
) -> Capacity:
    """Checkpoint sizes and capacity per format (scales in ``native_dtype``, as SGLang stores)."""
    if native_dtype not in NATIVE_DTYPES:
        raise ValueError(f"native_dtype must be one of {NATIVE_DTYPES}, got {native_dtype!r}")
    budget_bytes = _check_int("budget_bytes", budget_bytes, 1, 1 << 50)
    spec = sizing.as_spec(spec)
    name = spec.name
    h = sizing.local_heads(spec, tp)
    sb = sizing.dtype_bytes(native_dtype)
    conv = sizing.conv_state_bytes(spec, tp, native_dtype)
    one_byte = sizing.kda_state_bytes(spec, tp, "int8")
    n_scales = {
        "channel": sizing.int8_scale_bytes(spec, tp, native_dtype) // sb,
        "head": spec.n_kda_layers * h,
        "tensor": spec.n_kda_layers,
    }
    labels = ["native"]
    state = [sizing.kda_state_bytes(spec, tp, native_dtype)]
    for label, fmt, gran in VARIANTS:
        labels.append(label)
        if fmt == "bf16":
            state.append(sizing.kda_state_bytes(spec, tp, "bfloat16"))
        else:
            state.append(one_byte + n_scales[gran] * sb)
    state_a = np.array(state, dtype=np.int64)
    total = state_a + conv
    cap = budget_bytes // total
    return Capacity(
        model=name,
        tp=int(tp),
        native_dtype=native_dtype,
        budget_bytes=budget_bytes,
        labels=tuple(labels),
        state_bytes=state_a,
        conv_bytes=np.full(len(labels), conv, dtype=np.int64),
        total_bytes=total,
        capacity=cap,
        gain=cap / cap[0] if cap[0] > 0 else np.full(len(labels), np.nan),
    )


# ---------------------------------------------------------------------------------------------
# the whole study


@dataclass(slots=True)
class Int8Study:
    """Everything the int8_checkpoint app and the INT8 figure draw for one set of controls."""

    text: str
    n_tokens: int
    parked_text: str
    table: VariantTable
    errors: ErrorMap
    divergence: Divergence
    memory_tiny: Capacity
    memory_k3: Capacity


def int8_study(
    text: str = DEFAULT_TEXT,
    n_tokens: int = 64,
    fmt: str = "int8",
    granularity: str | None = "channel",
    layer: int = 0,
    head: int = 0,
    steps: int = 16,
    native_dtype: str = "bfloat16",
    tp: int = 8,
    budget_gib: float = 8.0,
    tiny_budget_bytes: int = 1 << 20,
) -> Int8Study:
    """Park ``n_tokens`` of ``text`` and measure the chosen variant (plus the table of all)."""
    fmt, granularity = check_variant(fmt, granularity)
    tiny_budget_bytes = _check_int("tiny_budget_bytes", tiny_budget_bytes, 1, 1 << 50)
    if isinstance(budget_gib, bool) or not isinstance(budget_gib, (int, float, np.number)):
        raise ValueError(f"budget_gib must be a number in (0, 4096], got {budget_gib!r}")
    if not 0 < float(budget_gib) <= 4096:
        raise ValueError(f"budget_gib must be in (0, 4096], got {budget_gib}")
    parked = park(text, n_tokens)
    return Int8Study(
        text=text,
        n_tokens=parked.n_tokens,
        parked_text=bytes(parked.tokens[: parked.n_tokens]).decode("utf-8", errors="replace"),
        table=_variant_table(parked),
        errors=_error_map(parked, fmt, granularity, layer, head),
        divergence=_divergence(parked, fmt, granularity, steps),
        memory_tiny=capacity(sizing.tiny_spec(), 1, native_dtype, tiny_budget_bytes),
        memory_k3=capacity("kimi-k3", tp, native_dtype, int(float(budget_gib) * GIB)),
    )
