"""kda_core.quant: INT8 / fp8-e4m3 / bf16 state compression against naive per-element twins."""

from __future__ import annotations

import math
import struct
from typing import NamedTuple

import numpy as np
import pytest

from kda_core.kda import quant
from kda_core.kda.quant import (
    QuantizedState,
    _bf16_encode,
    _fp8_e4m3_encode,
    quantize,
    quantize_int8,
    round_bf16,
    roundtrip,
)
from kda_core.kda.quant import (
    _bf16_decode as bf16_decode,
)
from kda_core.kda.quant import (
    _fp8_e4m3_decode as fp8_e4m3_decode,
)
from kda_core.kda.quant import (
    _round_fp8_e4m3 as round_fp8_e4m3,
)
from kda_core.quant import Int8State  # the public API name (docs/architecture.md)

# ---------------------------------------------------------------------------------------------
# naive twins: one element at a time, plain Python floats


class QuantError(NamedTuple):
    """Errors of a restored state x' against the original x.

    max_abs = max |x - x'|; mean_abs; rel_fro = ||x - x'||_F / ||x||_F (0 if x == 0);
    bound_rel_fro = ||bound||_F / ||x||_F, the theoretical ceiling of rel_fro;
    max_bound_ratio = max |x - x'| / bound (<= 1 when the per-element bound holds);
    bound_holds = every |x - x'| <= bound (1 + 1e-12) + eps(dtype) |x| (slack for the final
    cast to the state's dtype; eps = 2.2e-16 for float64).
    """

    max_abs: float
    mean_abs: float
    rel_fro: float
    bound_rel_fro: float
    max_bound_ratio: float
    bound_holds: bool


def quant_error(state: object, q: QuantizedState) -> QuantError:
    """Measure how far `q.dequantize()` is from `state`, and against its theoretical bound."""
    x = np.asarray(state, dtype=np.float64)
    if x.shape != q.shape:
        raise ValueError(f"state must have shape {q.shape}, got {x.shape}")
    err = np.abs(x - q.dequantize().astype(np.float64))
    bound = q.bound(x)
    norm = float(np.linalg.norm(x))
    ratio = np.where(bound > 0, err / np.where(bound > 0, bound, 1.0), np.where(err > 0, np.inf, 0))
    return QuantError(
        max_abs=float(err.max()),
        mean_abs=float(err.mean()),
        rel_fro=float(np.linalg.norm(err) / norm) if norm > 0 else 0.0,
        bound_rel_fro=float(np.linalg.norm(bound) / norm) if norm > 0 else 0.0,
        max_bound_ratio=float(ratio.max()),
        bound_holds=bool(np.all(err <= bound * (1.0 + 1e-12) + np.finfo(q.dtype).eps * np.abs(x))),
    )


def naive_int8(x: np.ndarray, granularity: str) -> tuple[np.ndarray, np.ndarray]:
    H, K, V = x.shape
    codes = np.zeros((H, K, V), np.int64)
    scale = np.zeros((H, K, V))
    for h in range(H):
        for c in range(K):
            if granularity == "channel":
                group = [abs(float(x[h, c, j])) for j in range(V)]
            elif granularity == "head":
                group = [abs(float(x[h, i, j])) for i in range(K) for j in range(V)]
            else:
                group = [abs(float(a)) for a in x.ravel()]
            s = max(max(group), 1e-8) / 127.0
            for j in range(V):
                q = round(float(x[h, c, j]) / s)  # Python round: half to even
                codes[h, c, j] = min(127, max(-127, q))
                scale[h, c, j] = s
    return codes, scale


def naive_round_grid(x: float, mant_bits: int, min_exp: int, max_val: float) -> float:
    """Nearest value of a binary float grid (ties to even mantissa), saturating at max_val."""
    if x == 0:
        return 0.0
    a = abs(x)
    e = max(math.floor(math.log2(a)), min_exp)
    while 2.0**e > a and e > min_exp:  # guard log2 rounding
        e -= 1
    while 2.0 ** (e + 1) <= a:
        e += 1
    e = max(e, min_exp)
    quantum = 2.0 ** (e - mant_bits)
    n = a / quantum
    lo = math.floor(n)
    frac = n - lo
    if frac > 0.5 or (frac == 0.5 and lo % 2 == 1):
        lo += 1
    return math.copysign(min(lo * quantum, max_val), x)


def bf16_by_bits(x: float) -> float:
    """Textbook float32 -> bf16 RNE on the bit pattern (valid for float32-representable x)."""
    (b,) = struct.unpack("<I", struct.pack("<f", x))
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    (y,) = struct.unpack("<f", struct.pack("<I", b))
    return y


def state(rng: np.random.Generator, H: int = 3, K: int = 5, V: int = 7) -> np.ndarray:
    # rows on different magnitudes, like a decayed KDA state
    return rng.standard_normal((H, K, V)) * np.exp(rng.uniform(-4, 1, (H, K, 1)))


# ---------------------------------------------------------------------------------------------
# INT8


@pytest.mark.parametrize("granularity", ["channel", "head", "tensor"])
def test_int8_matches_naive_twin(rng, granularity):
    x = state(rng)
    q = quantize_int8(x, granularity=granularity)
    codes, scale = naive_int8(x, granularity)
    assert q.qdata.dtype == np.int8
    np.testing.assert_array_equal(q.qdata.astype(np.int64), codes)
    np.testing.assert_array_equal(np.broadcast_to(q.scale, x.shape), scale)
    np.testing.assert_array_equal(q.dequantize(), codes * scale)


def test_int8_contract_layout(rng):
    x = state(rng, H=2, K=4, V=6)
    q = quantize_int8(x)
    assert isinstance(q, Int8State) and isinstance(q, QuantizedState)
    assert q.scale.shape == (2, 4, 1)
    np.testing.assert_array_equal(q.scale[..., 0], np.abs(x).max(axis=2) / 127)
    # the largest |x| of every (head, channel) maps to ±127 exactly
    np.testing.assert_array_equal(np.abs(q.qdata).max(axis=2), np.full((2, 4), 127))
    assert q.nbytes == 2 * 4 * 6 * 1 + 2 * 4 * 8
    assert quantize_int8(x, "head").nbytes == 48 + 2 * 8
    assert quantize_int8(x, "tensor").nbytes == 48 + 8


def test_int8_exact_hand_made():
    x = np.array([[[1.0, -0.5, 0.25, 0.0], [0.0, 0.0, 0.0, 0.0], [2.54, 0.01, -0.03, 0.015]]])
    q = quantize_int8(x)
    np.testing.assert_array_equal(q.qdata[0, 0], [127, -64, 32, 0])  # -63.5 -> -64, 31.75 -> 32
    np.testing.assert_array_equal(q.qdata[0, 1], [0, 0, 0, 0])  # amax floored at 1e-8
    assert q.scale[0, 1, 0] == 1e-8 / 127
    np.testing.assert_array_equal(q.qdata[0, 2], [127, 0, -2, 1])  # 0.01/0.02 = 0.5 -> 0 (even)
    assert q.scale[0, 2, 0] == 2.54 / 127
    np.testing.assert_array_equal(q.dequantize()[0, 0], np.array([127, -64, 32, 0]) / 127)
    # half to even at exact ties: x / scale = 0.5, 1.5, 2.5 -> 0, 2, 2
    y = np.array([[[127.0, 0.5, 1.5, 2.5, -2.5]]])
    np.testing.assert_array_equal(quantize_int8(y).qdata[0, 0], [127, 0, 2, 2, -2])


@pytest.mark.parametrize(
    "fmt,gran",
    [
        ("int8", "channel"),
        ("int8", "head"),
        ("int8", "tensor"),
        ("fp8_e4m3", "channel"),
        ("fp8_e4m3", "tensor"),
        ("bf16", None),
    ],
)
def test_per_element_bound_holds(rng, fmt, gran):
    for _ in range(5):
        x = state(rng, H=4, K=16, V=16)
        q = quantize(x, fmt, gran)
        err = np.abs(x - q.dequantize())
        b = q.bound(x)
        assert np.all(err <= b * (1 + 1e-12))
        m = quant_error(x, q)
        assert m.bound_holds and m.max_bound_ratio <= 1 + 1e-12
        assert 0 < m.rel_fro <= m.bound_rel_fro
        # the bound is tight: uniformly spread values get within 10 % of it somewhere
        assert m.max_bound_ratio > 0.9
        assert m.max_abs == pytest.approx(err.max(), rel=0, abs=0)


def test_int8_bound_is_half_scale(rng):
    x = state(rng)
    q = quantize_int8(x)
    np.testing.assert_array_equal(q.bound(), np.broadcast_to(q.scale / 2, x.shape))


def test_granularity_ordering(rng):
    # coarser scales: larger bound (always) and, on row-scaled data, larger error
    x = state(rng, H=4, K=32, V=32)
    errs = {g: quant_error(x, quantize_int8(x, g)) for g in ("channel", "head", "tensor")}
    assert errs["channel"].bound_rel_fro <= errs["head"].bound_rel_fro
    assert errs["head"].bound_rel_fro <= errs["tensor"].bound_rel_fro
    assert errs["channel"].rel_fro < errs["head"].rel_fro <= errs["tensor"].rel_fro
    assert errs["tensor"].rel_fro > 3 * errs["channel"].rel_fro


def test_float32_state_keeps_dtype(rng):
    x = state(rng).astype(np.float32)
    q = quantize_int8(x)
    assert q.scale.dtype == np.float32 and q.dequantize().dtype == np.float32
    assert quant_error(x, q).bound_holds
    y = roundtrip(x, "bf16")
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, np.vectorize(bf16_by_bits)(x.astype(np.float64)))


def test_leading_axes_are_kept(rng):
    x = rng.standard_normal((2, 3, 4, 5))  # [L, H, K, V]
    q = quantize_int8(x)
    assert q.scale.shape == (2, 3, 4, 1)
    for i in range(2):
        np.testing.assert_array_equal(q.qdata[i], quantize_int8(x[i]).qdata)


def test_zero_state():
    q = quantize_int8(np.zeros((2, 3, 4)))
    assert np.all(q.qdata == 0) and np.all(q.dequantize() == 0)
    assert quant_error(np.zeros((2, 3, 4)), q) == (0.0, 0.0, 0.0, 0.0, 0.0, True)


# ---------------------------------------------------------------------------------------------
# fp8-e4m3 and bf16 grids


def test_fp8_known_values():
    assert quant._FP8_E4M3_MAX == 448.0
    assert round_fp8_e4m3(448.0) == 448.0
    assert round_fp8_e4m3(2.0**-9) == 2.0**-9  # smallest subnormal
    assert round_fp8_e4m3(2.0**-10) == 0.0  # tie between 0 and 2^-9 -> even (0)
    assert round_fp8_e4m3(1.5 * 2.0**-10) == 2.0**-9
    assert round_fp8_e4m3(3 * 2.0**-10) == 2.0**-8  # tie 1 vs 2 (x 2^-9) -> 2
    assert round_fp8_e4m3(2.0**-6) == 2.0**-6  # smallest normal
    assert round_fp8_e4m3(7 * 2.0**-9) == 7 * 2.0**-9  # largest subnormal
    assert round_fp8_e4m3(1.0625) == 1.0  # tie 1.0 / 1.125 -> even mantissa
    assert round_fp8_e4m3(1.1875) == 1.25  # tie 1.125 / 1.25 -> even
    assert round_fp8_e4m3(1.09) == 1.125
    assert round_fp8_e4m3(-17.0) == -16.0  # quantum 2 at [16, 32): tie 16/18 -> 16
    assert round_fp8_e4m3(19.0) == 20.0
    for big in (449.0, 464.0, 480.0, 1e6, np.inf):  # saturation
        assert round_fp8_e4m3(big) == 448.0 and round_fp8_e4m3(-big) == -448.0
    assert np.signbit(round_fp8_e4m3(-0.0))


def test_fp8_table_and_codec():
    vals = quant._FP8_E4M3_VALUES
    assert np.isnan(vals[0x7F]) and np.isnan(vals[0xFF])
    assert vals[0x7E] == 448.0 and vals[0x01] == 2.0**-9 and vals[0x08] == 2.0**-6
    assert vals[0x38] == 1.0  # exponent 7 = bias
    finite = vals[~np.isnan(vals)]
    assert len(finite) == 254 and len(np.unique(finite)) == 253  # +0 and -0
    bits = np.arange(256, dtype=np.uint8)
    ok = ~np.isnan(vals)
    np.testing.assert_array_equal(_fp8_e4m3_encode(fp8_e4m3_decode(bits[ok])), bits[ok])
    # every grid value rounds to itself; the rounding agrees with the naive twin
    np.testing.assert_array_equal(round_fp8_e4m3(finite), finite)
    rng = np.random.default_rng(7)
    xs = np.concatenate(
        [
            rng.standard_normal(3000) * 10.0 ** rng.uniform(-4, 3, 3000),
            (finite[:-1] + finite[1:]) / 2,
        ]
    )  # midpoints: every tie
    twin = np.array([naive_round_grid(float(x), 3, -6, 448.0) for x in xs])
    np.testing.assert_array_equal(round_fp8_e4m3(xs), twin)


def test_bf16_known_values():
    assert round_bf16(1.0 + 2.0**-8) == 1.0  # tie -> even
    assert round_bf16(1.0 + 3 * 2.0**-8) == 1.0 + 2.0**-6  # tie -> even (up)
    assert round_bf16(1.0 + 2.0**-8 + 2.0**-30) == 1.0 + 2.0**-7
    assert round_bf16(3.140625) == 3.140625
    assert round_bf16(np.pi) == 3.140625
    assert round_bf16(quant._BF16_MAX) == quant._BF16_MAX
    assert round_bf16(2.0**-133) == 2.0**-133  # smallest subnormal
    assert round_bf16(2.0**-134) == 0.0  # tie -> 0
    assert round_bf16(1.5 * 2.0**-134) == 2.0**-133
    assert round_bf16(quant._BF16_MAX * 1.01) == np.inf
    assert _bf16_encode(1.0) == 0x3F80 and _bf16_encode(-2.0) == 0xC000
    assert bf16_decode(np.array([0x3F80, 0x0001], np.uint16)).tolist() == [1.0, 2.0**-133]


def test_bf16_matches_bit_twin():
    rng = np.random.default_rng(3)
    xs = (rng.standard_normal(4000) * 10.0 ** rng.uniform(-40, 38, 4000)).astype(np.float32)
    xs = xs.astype(np.float64)
    twin = np.array([bf16_by_bits(float(x)) for x in xs])
    np.testing.assert_array_equal(round_bf16(xs), twin)
    twin2 = np.array([naive_round_grid(float(x), 7, -126, np.inf) for x in xs])
    np.testing.assert_array_equal(round_bf16(xs), twin2)
    np.testing.assert_array_equal(bf16_decode(_bf16_encode(xs)), twin)


def test_fp8_state_matches_naive(rng):
    x = state(rng)
    q = quantize(x, "fp8_e4m3")
    assert q.qdata.dtype == np.uint8 and q.scale.shape == (3, 5, 1)
    s = np.abs(x).max(axis=2, keepdims=True) / 448
    twin = np.vectorize(lambda y: naive_round_grid(float(y), 3, -6, 448.0))(x / s) * s
    np.testing.assert_array_equal(q.dequantize(), twin)
    assert q.nbytes == x.size + 3 * 5 * 8
    assert quantize(x, "bf16").nbytes == 2 * x.size


# ---------------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize(
    "kwargs,name",
    [
        (dict(state=np.zeros(5)), "state"),
        (dict(state=np.array([[1.0, np.nan]])), "state"),
        (dict(state=np.array([["a"]])), "state"),
        (dict(state=np.zeros((2, 2)), fmt="int4"), "fmt"),
        (dict(state=np.zeros((2, 2)), granularity="row"), "granularity"),
        (dict(state=np.zeros((2, 2)), fmt="bf16", granularity="channel"), "granularity"),
    ],
)
def test_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        quantize(**kwargs)


def test_bad_input_other_functions(rng):
    with pytest.raises(ValueError, match="granularity"):
        quantize_int8(np.zeros((2, 2)), granularity="block")
    with pytest.raises(ValueError, match="x"):
        round_fp8_e4m3([np.nan])
    x = state(rng)
    with pytest.raises(ValueError, match="state"):
        quant_error(x[:1], quantize_int8(x))
    with pytest.raises(ValueError, match="state"):
        quantize(x, "fp8_e4m3").bound()
