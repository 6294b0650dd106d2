"""Cross-check against flash-linear-attention's own torch reference (fla-core 0.6.0).

`fla/ops/kda/naive.py` is loaded by file path: importing `fla.ops` needs Triton, which a CPU
machine does not have. fla computes in float32, so the tolerance is 1e-5, not 1e-12.
Skipped when torch or fla-core is not installed; CI installs both.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest
from kda_testdata import kda_inputs

from kda_core import kda

torch = pytest.importorskip("torch", reason="torch not installed (CI installs torch==2.13.0)")


def _load_naive():
    spec = importlib.util.find_spec("fla")
    if spec is None or spec.origin is None:
        if os.environ.get("CI"):
            pytest.fail("fla-core must be installed in CI (pip install --no-deps fla-core==0.6.0)")
        pytest.skip("fla-core not installed (pip install --no-deps fla-core==0.6.0 einops)")
    path = Path(spec.origin).parent / "ops" / "kda" / "naive.py"
    mod_spec = importlib.util.spec_from_file_location("fla_kda_naive", path)
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    return mod


naive = _load_naive()


def rel(a, b) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def _fla(fn, q, k, v, g, beta, S0, scale, **kw):
    t = [torch.from_numpy(np.ascontiguousarray(x))[None] for x in (q, k, v, g, beta)]
    o, S = fn(
        *t, scale=scale, initial_state=torch.from_numpy(S0)[None], output_final_state=True, **kw
    )
    return o[0].double().numpy(), S[0].double().numpy()


def _lowerbound_inputs(rng, T, H=4, K=16, V=16):
    q, k, v, _, beta, S0 = kda_inputs(rng, T, H, K, V)
    f = rng.standard_normal((T, H, K))
    A_log = np.log(rng.uniform(1, 16, H))
    dt = np.exp(rng.uniform(np.log(1e-3), np.log(1e-1), H * K))
    g = kda.lowerbound_gate(f, dt + np.log(-np.expm1(-dt)), -5.0, A_log=A_log)
    return q, k, v, g, beta, S0


@pytest.mark.parametrize("gate", ["logsigmoid", "lowerbound"])
@pytest.mark.parametrize("scale", [None, 0.1])
def test_recurrent_and_chunked_match_fla_naive_recurrent(rng, gate, scale):
    T = 128
    if gate == "logsigmoid":
        q, k, v, g, beta, S0 = kda_inputs(rng, T, 4, 16, 16)
    else:
        q, k, v, g, beta, S0 = _lowerbound_inputs(rng, T)
    o_ref, S_ref = _fla(naive.naive_recurrent_kda, q, k, v, g, beta, S0, scale)
    for fn in (kda.recurrent, kda.chunked):
        o, S = fn(q, k, v, g, beta, initial_state=S0, scale=scale)
        assert rel(o, o_ref) <= 1e-5, fn.__name__
        assert rel(S, S_ref) <= 1e-5, fn.__name__


def test_chunked_matches_fla_naive_chunk(rng):
    q, k, v, g, beta, S0 = _lowerbound_inputs(rng, 192)
    o_ref, S_ref = _fla(naive.naive_chunk_kda, q, k, v, g, beta, S0, None, chunk_size=64)
    o, S = kda.chunked(q, k, v, g, beta, initial_state=S0, chunk_size=64)
    assert rel(o, o_ref) <= 1e-5
    assert rel(S, S_ref) <= 1e-5
