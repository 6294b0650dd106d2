"""Prefill / decode disaggregation in two processes, and its selftest.

The parent starts worker processes (``python -m kda_core.transfer worker``) that talk JSON
lines on stdin/stdout; it sends each request to the prefill worker, waits for its reply, then
to the decode worker, so nothing depends on which process finishes first.

* prefill: ``Engine(policy=_HandoffPolicy())`` runs the prompt (one new token) and publishes a
  model-state object at every boundary it parked, including the handoff boundary
  ``len(prompt) - 1`` (our decode recomputes the last prompt token, whose logits are the first
  output; a real PD handoff ships the state at ``len(prompt)`` plus that first token);
* decode: ``Instance.serve`` finds the longest jointly restorable prefix across its own tree
  and the store, restores it and decodes ``n`` tokens;
* mismatch: three decode instances that differ from prefill in weights (seed 1), tokenizer
  (a byte tokenizer with another fingerprint that happens to map this text to the same ids, so
  the prefix hashes collide - exactly the case the fingerprint guards) and layout (TP=2): they
  must refuse every object they find, name the field, and still serve their own correct output.

The parent checks the decode's tokens and logits against one instance (``TinyHybrid.generate``
from scratch, atol 1e-9) and prints the contract line.

Store media: ``embedded`` is a directory of safetensors files shared by the processes
(``EmbeddedStore(path)``); ``mooncake`` is Mooncake Store with its services started here.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kda_core.cache.policy import SGLangPolicy
from kda_core.model import TinyHybrid, encode
from kda_core.serve.engine import DEFAULT_POLICY, Engine
from kda_core.transfer._identity import Layout
from kda_core.transfer.instance import Instance

_ROOT = Path(__file__).resolve().parents[2]
_ATOL = 1e-9
_N_NEW = 8
_MISMATCH_KINDS = {
    "weights": "model_fingerprint",
    "tokenizer": "tokenizer_fingerprint",
    "layout": "layout",
}

__all__ = ["run_selftest"]


@dataclass(slots=True)
class _HandoffPolicy(SGLangPolicy):
    """SGLang placement plus the PD handoff boundary ``prompt_len - 1``."""

    name = "sglang+handoff"

    def _positions(self, ctx: Any) -> list[int]:
        out = list(SGLangPolicy._positions(self, ctx))
        if ctx.prompt_len - 1 > ctx.restore_at:
            out.append(ctx.prompt_len - 1)
        return out


def handoff_policy() -> _HandoffPolicy:
    p = dict(DEFAULT_POLICY)
    p.pop("name")
    return _HandoffPolicy(**p)


_SYSTEM = "System: you are a terse assistant for a KDA serving lab.\n"
_CONVERSATIONS = (
    ("User: what is a state hit?\nAssistant:", "User: and a token hit?\nAssistant:"),
    ("User: why replay tokens?\nAssistant:", "User: how far back?\nAssistant:"),
    ("User: 状态检查点是什么？\nAssistant:", "User: 为什么不能拼接？\nAssistant:"),
)


def _multi_turn_workload() -> tuple[tuple[str, ...], ...]:
    """Three conversations of two turns sharing a system prompt (turn 2 = history + reply)."""
    return _CONVERSATIONS


def _b64(a: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(a, dtype="<f8").tobytes()).decode()


def _unb64(s: str, n: int) -> np.ndarray:
    return np.frombuffer(base64.b64decode(s), dtype="<f8").reshape(n, -1)


def _parse_store(spec: str) -> Any:
    """``embedded:DIR`` or ``mooncake:HOST:PORT``."""
    kind, _, arg = spec.partition(":")
    if kind == "embedded":
        from kda_core.transfer.store import EmbeddedStore

        return EmbeddedStore(arg or None)
    if kind == "mooncake":
        from kda_core.transfer.mooncake import MooncakeStore

        return MooncakeStore(arg)
    raise ValueError(f"store spec must be embedded:DIR or mooncake:HOST:PORT, got {spec!r}")


def _mismatch_instances(store: Any) -> dict[str, Instance]:
    other = Engine(model=TinyHybrid(weights="random", seed=1))
    return {
        "weights": Instance("decode-other-weights", engine=other, store=store),
        "tokenizer": Instance(
            "decode-other-tokenizer", store=store, tokenizer_fingerprint="utf8-bytes-v2"
        ),
        "layout": Instance("decode-tp2", store=store, layout=Layout(2, 0)),
    }


def _handle(role: str, inst: Any, msg: dict) -> dict:
    ids = msg["prompt"]
    if role == "prefill":
        r = inst.engine.generate(ids, 1)
        return {"published": inst.publish(r)}
    if role == "decode":
        rep, lk = inst.serve(ids, msg["n"])
        return {
            "tokens": rep.tokens,
            "logits": _b64(rep.logits),
            "source": lk.source,
            "boundary": lk.boundary,
            "restore_at": rep.restore_at,
            "replayed": rep.replayed,
            "prefilled": rep.prefilled,
        }
    out = {}
    for kind, mi in inst.items():
        rep, lk = mi.serve(ids, msg["n"])
        ref_tokens, ref_logits = mi.engine.model.generate(ids, msg["n"])
        out[kind] = {
            "fields": [r.field for r in lk.refusals],
            "restored_from_store": lk.source == "store",
            "self_ok": rep.tokens == ref_tokens
            and float(np.max(np.abs(rep.logits - ref_logits))) <= _ATOL,
        }
    return out


def worker_main(role: str, store_spec: str) -> int:
    """Serve JSON-line requests on stdin until ``{"op": "quit"}``."""
    store = _parse_store(store_spec)
    if role == "prefill":
        inst: Any = Instance("prefill", engine=Engine(policy=handoff_policy()), store=store)
    elif role == "decode":
        inst = Instance("decode", store=store)
    elif role == "mismatch":
        inst = _mismatch_instances(store)
    else:
        raise ValueError(f"role must be prefill, decode or mismatch, got {role!r}")
    for line in sys.stdin:
        msg = json.loads(line)
        if msg.get("op") == "quit":
            break
        try:
            reply = {"ok": True, **_handle(role, inst, msg)}
        except Exception as e:  # reported to the parent, which fails the selftest
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    if hasattr(store, "close"):
        store.close()
    return 0


class _Worker:
    def __init__(self, role: str, store_spec: str, log: Path, wrap: Any = None) -> None:
        env = dict(os.environ, PYTHONPATH=str(_ROOT), OPENBLAS_NUM_THREADS="1")
        env["MC_TCP_BIND_ADDRESS"] = "127.0.0.1"
        self._err = open(log, "wb")  # noqa: SIM115 - closed in close()
        argv = [sys.executable, "-m", "kda_core.transfer", "worker", "--role", role]
        argv += ["--store", store_spec]
        self.p = subprocess.Popen(
            wrap(argv) if wrap is not None else argv,
            cwd=_ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            text=True,
        )
        self.role = role

    def ask(self, msg: dict) -> dict:
        assert self.p.stdin is not None and self.p.stdout is not None
        self.p.stdin.write(json.dumps(msg) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.role} worker died (exit {self.p.poll()})")
        reply = json.loads(line)
        if not reply.pop("ok"):
            raise RuntimeError(f"{self.role} worker: {reply['error']}")
        return reply

    def close(self) -> None:
        try:
            if self.p.poll() is None:
                self.ask_quit()
                self.p.wait(timeout=60)
        finally:
            if self.p.poll() is None:
                self.p.kill()
                self.p.wait()
            self._err.close()

    def ask_quit(self) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(json.dumps({"op": "quit"}) + "\n")
        self.p.stdin.flush()
        self.p.stdin.close()


@dataclass(slots=True)
class _PDResult:
    requests: int
    identical: int
    max_dlogit: float
    mismatches: int
    refused: int
    sources: list[str]
    restored: list[int]
    prompt_lens: list[int]

    def line(self) -> str:
        return (
            f"pd selftest: {self.identical}/{self.requests} requests identical to one instance, "
            f"max |dlogit| {self.max_dlogit:.1e}, "
            f"mismatches refused {self.refused}/{self.mismatches}"
        )


def _run(store_spec: str, logdir: Path, wrap: Any = None) -> _PDResult:
    roles = ("prefill", "decode", "mismatch")
    workers = [_Worker(r, store_spec, logdir / f"{r}.log", wrap) for r in roles]
    pre, dec, mis = workers
    model = TinyHybrid()
    res = _PDResult(0, 0, 0.0, 0, 0, [], [], [])
    try:
        for conv in _multi_turn_workload():
            history = encode(_SYSTEM)
            for turn in conv:
                ids = history + encode(turn)
                pre.ask({"prompt": ids})
                d = dec.ask({"prompt": ids, "n": _N_NEW})
                ref_tokens, ref_logits = model.generate(ids, _N_NEW)
                diff = float(np.max(np.abs(_unb64(d["logits"], _N_NEW) - ref_logits)))
                res.requests += 1
                res.identical += d["tokens"] == ref_tokens and diff <= _ATOL
                res.max_dlogit = max(res.max_dlogit, diff)
                res.sources.append(d["source"])
                res.restored.append(d["restore_at"])
                res.prompt_lens.append(len(ids))
                for kind, m in mis.ask({"prompt": ids, "n": _N_NEW}).items():
                    res.mismatches += 1
                    want = _MISMATCH_KINDS[kind]
                    named = bool(m["fields"]) and all(f == want for f in m["fields"])
                    res.refused += named and not m["restored_from_store"] and m["self_ok"]
                history = ids + d["tokens"]
    finally:
        for w in workers:
            w.close()
    return res


def run_selftest(store: str = "embedded") -> _PDResult:
    """Prefill and decode in two processes over ``store`` ("embedded" or "mooncake")."""
    if store not in ("embedded", "mooncake"):
        raise ValueError(f"store must be 'embedded' or 'mooncake', got {store!r}")
    with tempfile.TemporaryDirectory(prefix="pd-selftest-") as tmp:
        logdir = Path(tmp)
        if store == "embedded":
            return _run(f"embedded:{logdir / 'objects'}", logdir)
        from kda_core.transfer.mooncake import MooncakeServices

        with MooncakeServices(segment_bytes=256 << 20, log_dir=str(logdir)) as svc:
            return _run(f"mooncake:{svc.master_address}", logdir, svc.client_argv)
