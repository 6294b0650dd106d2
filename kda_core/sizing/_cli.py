"""``python -m kda_core.sizing CONFIG [...]``: a config sized as SGLang 0.5.23 and vLLM 0.33 do.

CONFIG is a ``config.json`` (or its folder), a shipped config's name or a preset. Flags are the
engines' own spellings; ``--gpu-mem`` is the cache budget per GPU in GiB (SGLang's profiled
rest, vLLM's "Available KV cache memory"). For each engine: the state slots (vLLM: blocks),
max running requests, KV tokens, vLLM's block size, the shortest prompt that can hit the prefix
cache and the lines the engine would print; an engine that does not serve the model says so.
``--log FILE`` reads a server log (or a fragment) back against the config, with the fixes that
reach ``--target`` running requests (SGLang; vLLM's fixes give the new block size and
concurrency); with ``--log`` the engines are sized at the flags only when ``--engine`` asks.
``--speculative-algorithm NEXTN`` (or vLLM's ``--speculative-config '{"method": "mtp"}'``) sizes
the model's own MTP modules as each engine does and names the draft's share (``draft_*`` keys,
the KV tokens without it); an EAGLE / EAGLE3 drafter with its own config is named as each
engine names it (``--speculative-algorithm EAGLE3 --speculative-draft-model-path DRAFT``, or
``--speculative-config '{"method": "eagle3", "model": DRAFT, "num_speculative_tokens": k}'``;
DRAFT a ``config.json``, its folder or a shipped draft's name). ``--json`` prints one JSON
object.
Bad input exits with status 2 and one line naming the argument. The first word may name a
subcommand (``SUBCOMMANDS``): ``plan CONFIG --trace FILE ...`` sweeps the engine's flags on a
trace (``kda_core.plan.cli``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from kda_core.sizing._draft_rows import drafter_rows
from kda_core.sizing._drafts import mtp_refusal
from kda_core.sizing._eagle import EAGLE_METHODS, eagle_refusal, read_eagle_draft, shipped_drafts
from kda_core.sizing._kinds import LINEAR_KINDS
from kda_core.sizing.deployment import Deployment, gib_bytes
from kda_core.sizing.families import FAMILIES, engine_refusal
from kda_core.sizing.hf import from_hf_config, shipped_configs, shipped_spec
from kda_core.sizing.logread import read_log
from kda_core.sizing.presets import PRESETS, ModelSpec, preset
from kda_core.sizing.sglang import sglang_log_lines, sglang_min_hit, size_sglang
from kda_core.sizing.slots import max_running_requests, request_pool_estimate, slots_per_request
from kda_core.sizing.vllm import size_vllm, vllm_log_lines

MAX_LOG_BYTES = 4 << 20


def _plan(argv: list[str]) -> int:
    """``plan CONFIG --trace FILE ...`` (imported here only: sizing itself never needs it)."""
    from kda_core.plan.cli import main as plan_main

    return plan_main(argv)


SUBCOMMANDS: dict[str, Callable[[list[str]], int]] = {"plan": _plan}
"""Further subcommands by their first word (``python -m kda_core.sizing WORD ...``)."""
_SHOWN = (
    "state_slots",
    "slots_per_request",
    "block_size",
    "num_blocks",
    "max_running_requests",
    "kv_tokens",
    "shortest_hitting_prompt",
    "draft_attn_layers",
    "draft_kv_bytes_per_token",
    "draft_kv_bytes_per_request",
    "draft_kv_unpriced_bytes",
    "draft_kv_pool_bytes",
    "draft_block_size",
    "kv_tokens_without_draft",
    "recoverssm_records_bytes",
)
_KV = {"auto": "bfloat16", "bfloat16": "bfloat16", "fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3"}


class _ArgError(Exception):
    """A bad argument: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage dump
        raise _ArgError(message)


def _parser() -> _Parser:
    p = _Parser(prog="python -m kda_core.sizing", description=__doc__.split("\n\n")[0])
    p.add_argument("config", help="config.json, its folder, a shipped config or a preset")
    # default: both engines, or none with --log (the log's own numbers are the answer there)
    p.add_argument("--engine", choices=("sglang", "vllm", "both"), default=None)
    p.add_argument("--gpu-mem", type=float, default=40.0, help="cache budget per GPU, GiB")
    p.add_argument("--tp", "--tp-size", "--tensor-parallel-size", type=int, default=1, dest="tp")
    p.add_argument("--mamba-ssm-dtype", "--mamba-ssm-cache-dtype", dest="ssm", default=None)
    p.add_argument("--kv-cache-dtype", default="auto", choices=sorted(_KV))
    p.add_argument("--mamba-full-memory-ratio", type=float, default=0.9, dest="ratio")
    p.add_argument("--max-mamba-cache-size", type=int, default=None)
    p.add_argument("--max-running-requests", type=int, default=None)
    p.add_argument("--page-size", type=int, default=1)
    p.add_argument("--mamba-radix-cache-strategy", dest="strategy", default="auto")
    p.add_argument("--disable-radix-cache", action="store_true")
    p.add_argument("--disable-overlap-schedule", action="store_true")
    p.add_argument("--skip-decode-lock", action="store_true", help="SGLANG_OPT_MAMBA_SKIP_...")
    p.add_argument("--speculative-num-draft-tokens", type=int, default=0, dest="draft_tokens")
    p.add_argument("--enable-linear-replayssm-spec", action="store_true", dest="replayssm")
    p.add_argument("--chunked-prefill-size", type=int, default=8192)
    p.add_argument("--context-length", "--max-model-len", type=int, default=None, dest="length")
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--num-speculative-tokens", type=int, default=0)
    p.add_argument("--no-enable-prefix-caching", action="store_true")
    p.add_argument("--use-replayssm", action="store_true", help="vLLM: RecoverSSM on KDA")
    # the model's own MTP modules draft (both engines): SGLang's spelling, or vLLM's JSON
    p.add_argument("--speculative-algorithm", choices=("NEXTN", "EAGLE", "EAGLE3"), default=None)
    p.add_argument("--speculative-config", default=None, help='vLLM: {"method": "mtp", ...}')
    # an EAGLE drafter with its own config (SGLang's spelling; vLLM's is the JSON's "model")
    p.add_argument("--speculative-draft-model-path", default=None, dest="draft_path")
    p.add_argument("--log", type=Path, default=None, help="a server log to read back")
    p.add_argument(
        "--target", type=int, default=None, help="--log: running requests to reach (SGLang logs)"
    )
    p.add_argument("--json", action="store_true")
    return p


def _model(arg: str) -> ModelSpec:
    if arg in shipped_configs():
        return shipped_spec(arg)
    if arg in PRESETS:
        return preset(arg)
    if not Path(arg).exists():
        raise _ArgError(f"config: no file, folder, shipped config or preset named {arg!r}")
    return from_hf_config(arg)


def _spec_config(a: argparse.Namespace) -> tuple[bool, int, str | None]:
    """(MTP on, vLLM's num_speculative_tokens, an EAGLE draft's config) from
    ``--speculative-algorithm`` / ``--speculative-draft-model-path`` / ``--speculative-config``:
    a draft path (either spelling) is an EAGLE drafter, an algorithm without one the model's
    own MTP modules."""
    k, path = a.num_speculative_tokens, a.draft_path
    if path is not None and a.speculative_algorithm is None:
        raise _ArgError("--speculative-draft-model-path: give --speculative-algorithm EAGLE3")
    if a.speculative_config is None:
        return a.speculative_algorithm is not None and path is None, k, path
    try:
        cfg = json.loads(a.speculative_config)
    except json.JSONDecodeError:
        cfg = None
    method = cfg.get("method") if isinstance(cfg, dict) else None
    if method not in ("mtp", *EAGLE_METHODS):
        raise _ArgError(
            '--speculative-config: a JSON object with "method" "mtp", "eagle" or "eagle3"'
        )
    n = cfg.get("num_speculative_tokens", k)
    if isinstance(n, bool) or not isinstance(n, int):
        raise _ArgError("--speculative-config: num_speculative_tokens must be an integer")
    k = n if k == 0 else k
    if method == "mtp":
        if cfg.get("model") is not None or path is not None:  # vLLM reads it as the MTP draft's
            raise _ArgError('--speculative-config: "model" goes with method "eagle" / "eagle3"')
        return True, k, path
    model = cfg.get("model")
    if not isinstance(model, str) or (path is not None and model != path):
        raise _ArgError('--speculative-config: "model" must name the draft (as the draft path)')
    return False, k, model


def _draft(path: str | None):
    if path is None:
        return None
    if path not in shipped_drafts() and not Path(path).exists():
        raise _ArgError(f"draft: no config.json, folder or shipped draft named {path!r}")
    return read_eagle_draft(path)


def _deployment(a: argparse.Namespace) -> Deployment:
    strategy = "radix_off" if a.disable_radix_cache else a.strategy
    mtp, k, path = _spec_config(a)
    return Deployment(
        rest_bytes=gib_bytes("--gpu-mem", a.gpu_mem),
        tp=a.tp,
        ssm_dtype=a.ssm if a.ssm not in (None, "auto") else None,
        kv_dtype=_KV[a.kv_cache_dtype],
        ratio=a.ratio,
        max_mamba_cache_size=a.max_mamba_cache_size,
        max_running_requests=a.max_running_requests,
        page_size=a.page_size,
        strategy=strategy,
        overlap=not a.disable_overlap_schedule,
        skip_decode_lock=a.skip_decode_lock,
        draft_tokens=a.draft_tokens,
        replayssm=a.replayssm,
        chunked_prefill_size=a.chunked_prefill_size,
        block_size=a.block_size,
        max_model_len=a.length,
        max_num_seqs=a.max_num_seqs,
        num_speculative_tokens=k,
        mtp=mtp,
        eagle=_draft(path),
        use_replayssm=a.use_replayssm,
        mamba_cache_mode="none" if a.no_enable_prefix_caching else "align",
    )


def _sglang(spec: ModelSpec, d: Deployment) -> dict:
    refusal = engine_refusal(spec, "sglang") or (d.mtp and mtp_refusal(spec, "sglang"))
    refusal = refusal or (d.eagle is not None and eagle_refusal(spec, "sglang"))
    if refusal:
        return {"served": False, "why": refusal}
    s = size_sglang(spec, d)
    spr = slots_per_request(d.strategy, d.overlap, d.skip_decode_lock, d.page_size)
    cap = max_running_requests(s.max_mamba_cache_size, d.strategy, d.overlap, d.skip_decode_lock)
    length = d.max_model_len or spec.context_len
    bound = d.max_running_requests
    if bound is None and length:
        bound = request_pool_estimate(s.kv_tokens, length)
    running = min(cap, s.kv_tokens // 2, bound if bound is not None else cap)
    hit, why = sglang_min_hit(spec, d)
    return {
        "served": True,
        "ssm_dtype": s.ssm_dtype,
        "state_slots": s.max_mamba_cache_size,
        "slots_per_request": spr,
        "max_running_requests": running,
        "kv_tokens": s.kv_tokens,
        "shortest_hitting_prompt": hit,
        "why_that_prompt": why,
        **drafter_rows(spec, d, s),
        "log_lines": sglang_log_lines(spec, d, s),
    }


def _vllm(spec: ModelSpec, d: Deployment) -> dict:
    refusal = engine_refusal(spec, "vllm") or (d.mtp and mtp_refusal(spec, "vllm"))
    refusal = refusal or (d.eagle is not None and eagle_refusal(spec, "vllm"))
    if refusal:
        return {"served": False, "why": refusal}
    if d.max_model_len is None and not spec.context_len:
        raise _ArgError("--max-model-len: the config names no context length; give one")
    p = size_vllm(spec, d)
    running = 0 if p.max_num_seqs_error else min(p.max_num_seqs, int(p.max_concurrency))
    return {
        "served": True,
        "ssm_dtype": p.ssm_dtype,
        "block_size": p.block_size,
        "num_blocks": p.num_blocks,
        "max_running_requests": running,
        "max_concurrency": round(p.max_concurrency, 2),
        "kv_tokens": p.kv_cache_tokens,
        "max_model_len": p.max_model_len,
        "shortest_hitting_prompt": p.min_prefix_hit_tokens,
        **drafter_rows(spec, d, p),
        "log_lines": vllm_log_lines(p),
    }


def _describe(spec: ModelSpec) -> str:
    fam = FAMILIES.get(spec.family)
    kind = LINEAR_KINDS[spec.linear_kind].label
    label = f"{spec.name} ({fam.label})" if fam else spec.name
    attn = spec.attn_kind.upper()
    text = f"{label}: {spec.n_linear_layers} {kind} + {spec.n_attn_layers} {attn}"
    tail = spec.vllm_tail_attn_layers  # a trailing partial layer group: vLLM makes it attention
    if tail:
        n_lin, n_attn = spec.n_linear_layers - tail, spec.n_attn_layers + tail
        text += f" (vLLM: {n_lin} {kind} + {n_attn} {attn})"
    return text


def _text(out: dict) -> str:
    lines = [out["model"]]
    if "sglang" in out or "vllm" in out:  # the flags' deployment, when it is sized
        lines.append(f"  TP {out['tp']}, {out['gpu_mem_gib']:g} GiB of cache per GPU")
    for engine, name in (("sglang", "SGLang 0.5.23"), ("vllm", "vLLM 0.33")):
        e = out.get(engine)
        if e is None:
            continue
        if not e["served"]:
            lines.append(e["why"])
            continue
        lines.append(f"{name} (state dtype {e['ssm_dtype']}):")
        for key in _SHOWN:
            if key in e:
                lines.append(f"  {key.replace('_', ' ')}: {e[key]}")
        lines.append("  would print:")
        lines += [f"    {x}" for x in e["log_lines"]]
    if "log" in out:
        r = out["log"]
        lines.append(f"log ({r['engine']}): {r['verdict']}: {r['explanation']}")
        lines += [f"  {x}" for x in r["bounds"] + r["held"]]
        lines += [f"  not in the log: {x}" for x in r["missing"]]
        if r["engine"] == "vllm" and r["target"] is not None:
            lines.append("  --target: checked on SGLang logs; vLLM's fixes give the new figures")
        for f in r["fixes"]:
            mark = {True: " (reaches the target)", False: " (falls short)", None: ""}[f["reaches"]]
            costs = f" (costs: {'; '.join(f['costs'])})" if f["costs"] else ""
            lines.append(f"  {f['flag']}: {f['effect']}{mark}{costs}")
    return "\n".join(lines)


def _read_log(a: argparse.Namespace, spec: ModelSpec) -> dict:
    path: Path = a.log
    if not path.is_file() or path.stat().st_size > MAX_LOG_BYTES:
        raise _ArgError(f"--log: no readable file of at most {MAX_LOG_BYTES} bytes at {path}")
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        r = read_log(text, spec, requested=a.max_running_requests, target=a.target)
    except ValueError as e:
        raise _ArgError(f"--log {path}: {e}" if "log" in str(e) else f"--{e}") from None
    fixes = [
        {
            "flag": f.flag,
            "effect": f.effect.text(),
            "reaches": f.reaches,
            "costs": [c.text() for c in f.costs],
            "log_lines": list(f.lines),
        }
        for f in r.fixes
    ]
    return {
        "engine": r.engine,
        "verdict": r.verdict,
        "explanation": r.explanation,
        "lines": r.counts(),
        "running": {k: v for k, v in r.running.items() if k != "bounds"},
        "bounds": [b.text() for b in r.bounds],
        "held": [h.text() for h in r.held],
        "missing": [m.text() for m in r.missing],
        "fixes": fixes,
        "target": a.target,
    }


def run(argv: Sequence[str]) -> dict:
    """The sizing of ``argv``'s config (the ``--json`` object); ``_ArgError`` / ValueError for
    bad input."""
    a = _parser().parse_args(list(argv))
    spec = _model(a.config)
    d = _deployment(a)
    out: dict = {"model": _describe(spec), "tp": d.tp, "gpu_mem_gib": a.gpu_mem}
    engine = a.engine or ("both" if a.log is None else None)
    if engine in ("sglang", "both"):
        out["sglang"] = _sglang(spec, d)
    if engine in ("vllm", "both"):
        out["vllm"] = _vllm(spec, d)
    if a.log is not None:
        out["log"] = _read_log(a, spec)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:
        return SUBCOMMANDS[argv[0]](argv[1:])
    try:
        out = run(argv)
    except (_ArgError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(out, indent=1) if "--json" in argv else _text(out))
    return 0
