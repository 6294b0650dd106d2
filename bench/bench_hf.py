"""The lab against transformers' Kimi-Linear: serving, and the KDA chunk kernel.

1. Serving, k3-mini's weights and the same prompts on both sides: 32 requests of 16 random
   prompt tokens, 64 new tokens each, greedy. The lab: batched = one ``Engine.serve`` of all
   32 (a shared pool of 32 x 5 slots, as bench_serve.py), one at a time = ``Engine.generate``
   per request. transformers 5.23: ``KimiLinearForCausalLM.generate`` on the 32 prompts as one
   batch (equal lengths: no padding) and one prompt at a time. transformers has no K3 gate, so
   its model is built from k3-mini with two module swaps (`k3_in_transformers`): the forget
   gate computes K3's lower-bound gate, and the full-rank output gate of KDA and the MLA output
   gate are put back; everything else - the KDA and conv fallbacks, MLA, the cache, the
   decoding loop - is transformers' own code. The bench checks first that both sides generate
   the same tokens. The kimi-linear variant (a random checkpoint of the same sizes, exported
   by ``export_hf``, no swaps) is timed one at a time too: the engine's batched passes run the
   k3 variant only (docs/model.md).
2. The KDA chunk forward, float32, T = 2048 (``--T``), H = 8, K = V = 128: ``kda.chunked``
   against transformers' ``chunk_kimi_delta_attention`` (its pure-torch fallback) and fla's
   ``naive_chunk_kda``, at one and at two threads (``KDA_THREADS`` / ``torch.set_num_threads``).

Both sides run one BLAS / torch thread in part 1. Times are CPU seconds (``time.process_time``:
a shared machine's load moves wall time more than CPU time) in part 1, wall seconds in part 2
(two threads: CPU seconds would count both). Every ratio is the median over rounds of pairs
timed next to each other, the pair's order alternating from round to round; the range is
printed beside it. Tokens/s = (prompt + generated tokens) / seconds.

Run: ``OPENBLAS_NUM_THREADS=1 python bench/bench_hf.py [--rounds 3] [--quick]``; needs torch
and transformers (``pip install .[hf]``), fla-core for its row.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from kda_core import kda  # noqa: E402
from kda_core import model as M  # noqa: E402
from kda_core.engine import Engine, Request  # noqa: E402

N_REQUESTS, PROMPT, NEW = 32, 16, 64


def cpu_time(fn) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


def wall_time(fn) -> float:
    fn()  # warm-up
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def paired(a, b, rounds: int, clock=cpu_time) -> tuple[float, float, list[float]]:
    """Median seconds of a and of b, and each round's a / b, over rounds of a and b timed one
    right after the other (b first in odd rounds)."""
    ta, tb = [], []
    for r in range(rounds):
        if r % 2:
            tb.append(clock(b))
            ta.append(clock(a))
        else:
            ta.append(clock(a))
            tb.append(clock(b))
    return statistics.median(ta), statistics.median(tb), [x / y for x, y in zip(ta, tb)]


# --------------------------------------------------------------------------------------------
# transformers' model with k3-mini's weights


def k3_in_transformers(model: M.TinyHybrid):
    """transformers' KimiLinearForCausalLM holding ``model``'s (k3 variant) weights, with K3's
    lower-bound forget gate, its full-rank KDA output gate and its MLA output gate swapped in."""
    import torch
    import transformers
    from safetensors.torch import load_file
    from transformers.models.kimi_linear import modeling_kimi_linear as kl

    c = model.config
    arrays = M.named_weights(model)
    low_rank = {k: v for k, v in arrays.items() if not k.endswith("w_gate")}
    for layer, kind in enumerate(model.layer_kinds):  # placeholders for the swapped modules
        if kind == "kda":
            low_rank[f"blocks.{layer}.mixer.g_a"] = np.zeros((c.d_model, c.head_dim))
            low_rank[f"blocks.{layer}.mixer.g_b"] = np.zeros((c.head_dim, c.n_heads * c.head_dim))
    kimi_linear = M.ModelConfig(
        **{**_fields(c), "variant": "kimi-linear", "gate_lower_bound": None}
    )
    with tempfile.TemporaryDirectory() as tmp:  # the lab's own export, as transformers reads it
        folder = M.export_hf(M.TinyHybrid(kimi_linear, weights=low_rank), tmp)
        cfg = json.loads((folder / "config.json").read_text())
        sd = load_file(str(folder / "model.safetensors"))
    hf_model = transformers.KimiLinearForCausalLM(transformers.KimiLinearConfig(**cfg)).eval()
    hf_model.load_state_dict(sd, strict=True)
    lb = c.gate_lower_bound

    class K3ForgetGate(kl.KimiLinearForgetGate):
        def forward(self, hidden_states):
            f = self.f_b_proj(self.f_a_proj(hidden_states)).float() + self.dt_bias.float()
            z = self.A_log.float().exp().view(-1, 1) * f.view(*f.shape[:2], -1, self.head_dim)
            return lb * torch.sigmoid(z)

    def linear(w: np.ndarray) -> torch.nn.Linear:
        lin = torch.nn.Linear(w.shape[0], w.shape[1], bias=False)
        lin.weight.data = torch.from_numpy(np.ascontiguousarray(w.T, dtype=np.float32))
        return lin

    class GatedOut(torch.nn.Module):  # o_proj(o * sigmoid(h W_gate)), h stashed by a hook
        def __init__(self, o_proj, gate):
            super().__init__()
            self.o_proj, self.gate, self.h = o_proj, gate, None

        def forward(self, o):
            return self.o_proj(o * torch.sigmoid(self.gate(self.h)))

    for layer, (kind, mod) in enumerate(zip(model.layer_kinds, hf_model.model.layers)):
        w_gate = arrays[f"blocks.{layer}.mixer.w_gate"]
        attn = mod.self_attn
        if kind == "kda":
            attn.forget_gate.__class__ = K3ForgetGate
            attn.g_a_proj, attn.g_b_proj = linear(w_gate), torch.nn.Identity()
        else:
            attn.o_proj = GatedOut(attn.o_proj, linear(w_gate))
            attn.register_forward_pre_hook(
                lambda m, args, kw: setattr(m.o_proj, "h", kw["hidden_states"]), with_kwargs=True
            )
    return hf_model


def _fields(c: M.ModelConfig) -> dict:
    return {f: getattr(c, f) for f in c.__dataclass_fields__}


# --------------------------------------------------------------------------------------------
# 1. serving


def hf_generate(hf_model, prompts: list[list[int]], batched: bool) -> list[list[int]]:
    import torch

    out = []
    groups = [prompts] if batched else [[p] for p in prompts]
    with torch.no_grad():
        for group in groups:
            ids = torch.tensor(group)
            gen = hf_model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                do_sample=False,
                max_new_tokens=NEW,
                min_new_tokens=NEW,
                pad_token_id=0,
            )
            out += gen[:, PROMPT:].tolist()
    return out


def lab_generate(model: M.TinyHybrid, prompts: list[list[int]], batched: bool) -> list[list[int]]:
    if batched:
        eng = Engine(model=model, state_slots=5 * len(prompts))
        rep = eng.serve([Request(p, NEW) for p in prompts], max_batch_tokens=1024)
        return [r.tokens for r in rep.reports]
    eng = Engine(model=model)
    return [eng.generate(p, NEW).tokens for p in prompts]


def serving(lab: M.TinyHybrid, hf_model, prompts, rounds: int, batched_too: bool) -> None:
    tokens = len(prompts) * (PROMPT + NEW)
    modes = (True, False) if batched_too else (False,)
    for batched in modes:
        name = "batched" if batched else "one at a time"
        same = lab_generate(lab, prompts, batched) == hf_generate(hf_model, prompts, batched)
        t_lab, t_hf, ratios = paired(
            lambda b=batched: lab_generate(lab, prompts, b),
            lambda b=batched: hf_generate(hf_model, prompts, b),
            rounds,
        )
        r = 1 / np.array(ratios)
        print(
            f"  {name:14} lab {tokens / t_lab:8.0f} tok/s ({t_lab:6.2f} s)  transformers "
            f"{tokens / t_hf:7.0f} tok/s ({t_hf:6.2f} s)  lab is {np.median(r):5.1f}x "
            f"(rounds {r.min():.1f}..{r.max():.1f}); same tokens: {same}"
        )


def kimi_linear_pair() -> tuple[M.TinyHybrid, object]:
    """A random kimi-linear model of k3-mini's sizes (transformers' init scale), exported and
    loaded back on both sides: the same weights, no swaps."""
    import transformers

    c = M.TinyHybrid(weights="random").config
    cfg = M.ModelConfig(**{**_fields(c), "variant": "kimi-linear", "gate_lower_bound": None})
    rnd = M.named_weights(M.TinyHybrid(cfg, weights="random"))
    lab = M.TinyHybrid(cfg, weights={k: v.astype(np.float32) for k, v in rnd.items()})
    folder = M.export_hf(lab, tempfile.mkdtemp(prefix="kimi-linear-"))
    hf_model = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    return M.TinyHybrid.from_hf(folder), hf_model


# --------------------------------------------------------------------------------------------
# 2. the KDA chunk kernel


def load_fla_naive():
    """fla's torch reference module, loaded by path (fla's package import wants triton)."""
    spec = importlib.util.find_spec("fla")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "ops" / "kda" / "naive.py"
    mod_spec = importlib.util.spec_from_file_location("fla_kda_naive", path)
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    return mod


def kernels(T: int, H: int, K: int, rounds: int) -> None:
    import torch
    from transformers.models.kimi_linear import modeling_kimi_linear as kl

    rng = np.random.default_rng(0)
    q, k = (kda.l2norm(rng.standard_normal((T, H, K))).astype(np.float32) for _ in range(2))
    v = rng.standard_normal((T, H, K)).astype(np.float32)
    g = kda.softplus_gate(rng.standard_normal((T, H, K)) * 0.1, np.zeros(H), np.full(H * K, -3.0))
    g = g.astype(np.float32)
    beta = (1 / (1 + np.exp(-rng.standard_normal((T, H))))).astype(np.float32)
    tq, tk, tv, tg, tb = (torch.from_numpy(x)[None] for x in (q, k, v, g, beta))
    fla = load_fla_naive()
    peers = {
        "transformers chunk_kimi_delta_attention": lambda: kl.chunk_kimi_delta_attention(
            tq, tk, tv, tg, tb, initial_state=None, output_final_state=True
        )
    }
    if fla is not None:
        peers["fla naive_chunk_kda"] = lambda: fla.naive_chunk_kda(tq, tk, tv, tg, tb)
    with torch.no_grad():
        o_hf = peers["transformers chunk_kimi_delta_attention"]()[0][0].numpy()
    o_lab = kda.chunked(q, k, v, g, beta)[0]
    print(f"  max |o_lab - o_transformers| = {np.abs(o_lab - o_hf).max():.1e} (float32)")
    for threads in (1, 2):
        os.environ["KDA_THREADS"] = str(threads)
        torch.set_num_threads(threads)
        for name, fn in peers.items():
            with torch.no_grad():
                t_lab, t_peer, ratios = paired(
                    lambda: kda.chunked(q, k, v, g, beta), fn, rounds, clock=wall_time
                )
            r = 1 / np.array(ratios)
            print(
                f"  {threads} thread(s): kda.chunked {T / t_lab:9.0f} tok/s, {name} "
                f"{T / t_peer:8.0f} tok/s: lab is {np.median(r):5.1f}x "
                f"(rounds {r.min():.1f}..{r.max():.1f})"
            )
    torch.set_num_threads(1)
    os.environ.pop("KDA_THREADS")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--T", type=int, default=2048)
    ap.add_argument("--quick", action="store_true", help="4 requests, T = 512, 2 rounds")
    args = ap.parse_args()
    try:
        import torch
        import transformers
    except ImportError:
        print("bench_hf: needs torch and transformers (pip install .[hf]); skipped")
        return
    torch.set_num_threads(1)
    n, T, rounds = (4, 512, 2) if args.quick else (N_REQUESTS, args.T, args.rounds)
    rng = np.random.default_rng(0)
    prompts = [[int(t) for t in rng.integers(0, 256, PROMPT)] for _ in range(n)]
    print(
        f"transformers {transformers.__version__}, torch {torch.__version__}; "
        f"load average {os.getloadavg()[0]:.1f}; {rounds} rounds"
    )
    lab = M.TinyHybrid()
    print(f"1. serving {n} requests x {PROMPT} prompt tokens, {NEW} new (CPU seconds, 1 thread)")
    print("  k3-mini (trained; transformers with K3's gates swapped in):")
    serving(lab, k3_in_transformers(lab), prompts, rounds, batched_too=True)
    print("  kimi-linear variant, same sizes (random, exported; transformers unchanged):")
    serving(*kimi_linear_pair(), prompts, rounds, batched_too=False)
    print(f"2. KDA chunk forward, float32, T={T} H=8 K=V=128 (wall seconds)")
    kernels(T, 8, 128, rounds)


if __name__ == "__main__":
    main()
