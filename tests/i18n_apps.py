"""How tests/test_i18n.py renders each app: its public callbacks with ``language`` set (the
figures, markdown and updates they return) and its refusals of bad input (the messages).
``RENDER[name] = (outputs, errors)``; a shared panel is rendered in each app that lays it out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gradio as gr
import pytest
from i18n_check import USER

# six ~500-token lines: in a 4000 KiB byte buffer the fourth waits for memory
LONG_BATCH = "\n".join(
    f"Req {i}: " + ("The quick brown fox jumps over the lazy dog. " * 12)[:500] for i in range(6)
)


def noop(*_args: object, **_kwargs: object) -> None:
    """A progress callback that draws nothing."""


def _chunk_scan(lang: str) -> list[Any]:
    from apps import chunk_scan as app

    out = [app.run(language=lang), app.run(app.SOURCES[1], USER, lengths="8, 8", language=lang)]
    out.append(app.measure(32, 1, None, language=lang, progress=noop))
    return out


def _chunk_scan_errors(lang: str) -> list[str]:
    from apps import chunk_scan as app

    return _errors(
        lambda: app.run(chunk_size=0, language=lang),
        lambda: app.run(lengths="1", language=lang),
        lambda: app.run(app.SOURCES[1], "ab", language=lang),
        # fmt: skip
    )


def _errors(*calls: Callable[[], Any]) -> list[str]:
    out = []
    for call in calls:
        with pytest.raises(gr.Error) as e:
            call()
        out.append(e.value.message)
    return out


def _context_parallel(lang: str) -> list[Any]:
    from apps import context_parallel as app

    return [app.run(language=lang), app.run(T=300, P=3, scan="allgather", docs="50, 200, 50",
                                            language=lang)]  # fmt: skip


def _context_parallel_errors(lang: str) -> list[str]:
    from apps import context_parallel as app

    return _errors(lambda: app.run(T=8, language=lang),
                    lambda: app.run(docs="100, 100", language=lang),
                    lambda: app.run(scan="tree", language=lang))  # fmt: skip


def _unified_memory(lang: str) -> list[Any]:
    from apps import unified_memory as app

    out = app.run(language=lang, progress=noop)
    from apps.unified_memory import calculator as calc

    return [
        out[:-1],
        app.show_step(2, out[-1], language=lang),
        app.tick(5, out[-1], language=lang),
        calc.compare(language=lang),
        calc.compare(max_states_per_path=3, strategy="no_buffer", language=lang),
    ]


def _unified_memory_errors(lang: str) -> list[str]:
    from apps import unified_memory as app
    from apps.unified_memory import calculator as calc

    return _errors(
        lambda: app.run(ratios="0.5, x", language=lang, progress=noop),
        lambda: app.run(n_chat=0, n_long=0, language=lang, progress=noop),
        lambda: app.show_step(0, None, language=lang),
        lambda: calc.compare(input_lens="x", language=lang),
        lambda: calc.compare(max_states_per_path=99, language=lang),
    )


def _speculative_replay(lang: str) -> list[Any]:
    from apps import speculative_replay as app

    return [app.verify(language=lang), app.verify(n_accept=0, language=lang),
            app.generate(max_new_tokens=8, language=lang, progress=None),
            app.acceptance(max_new_tokens=4, language=lang, progress=None)]  # fmt: skip


def _speculative_replay_errors(lang: str) -> list[str]:
    from apps import speculative_replay as app

    return _errors(lambda: app.verify(prompt="", language=lang),
                    lambda: app.verify(ring_len=12, language=lang),
                    lambda: app.verify(n_accept=9, language=lang))  # fmt: skip


def _state_transfer(lang: str) -> list[Any]:
    from apps import state_transfer as app

    return [
        app.run_pd(USER + " and more", language=lang),
        app.run_mismatch(language=lang),
        app.run_splice(language=lang),
        app.run_tiers(300, 8, 2.0, language=lang),
        *_trace_hits(lang),
    ]


def _trace_hits(lang: str) -> list[Any]:
    """The trace panel both apps carry: the bundled trace, a row explained, a lengths-only
    upload, a file with a skipped row, and its refusals."""
    import tempfile
    from pathlib import Path

    from apps.panels import trace_hits as panel

    first = panel.analyse(language=lang)
    study = first[-1]
    out = [first, *(panel.explain_request(study, i, language=lang) for i in study["worst"][:5])]
    with tempfile.TemporaryDirectory() as d:
        csv = Path(d) / "lengths.csv"
        csv.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,100,5\n")
        rows = Path(d) / "rows.jsonl"
        rows.write_text('{"input_length": 600, "hash_ids": [1, 2]}\n{"input_length": 0}\n')
        out += [panel.analyse(str(csv), language=lang), panel.analyse(str(rows), language=lang)]
        big = Path(d) / "big.jsonl"
        with big.open("wb") as f:
            f.truncate(panel.MAX_UPLOAD_BYTES + 1)
        checks = panel.validator()(str(big), "x", True, 1, -1, lang)
        out += [c["message"] for c in checks if not c["is_valid"]]
        out += _errors(lambda: panel.analyse(str(rows), "mooncake", False, language=lang))
    return out


def _state_transfer_errors(lang: str) -> list[str]:
    from apps import state_transfer as app

    text = app.st.DEFAULT_TEXT
    return _errors(lambda: app.run_pd("", language=lang),
                    lambda: app.run_pd(tp=7, language=lang),
                    lambda: app.run_splice(text, text, language=lang)) + [
        r["message"] for r in app.PD_CHECKS("abc", 0, 7, lang) if not r["is_valid"]
    ]  # fmt: skip


def _checkpoint_density(lang: str) -> list[Any]:
    from apps import checkpoint_density as app

    first = app.run(language=lang, progress=noop)
    again = app.run(intervals="2048, 8192", budgets="16, unlimited", history=first[-2],
                    language=lang, progress=noop)  # fmt: skip
    from apps.checkpoint_density import swa

    panel = [
        swa.compare(language=lang),
        swa.compare("agentic", "512, 2048", 2048, 8, language=lang),
    ]
    return [
        first,
        again,
        app.stale_note("multi-turn chat (synthetic)", lang),
        *panel,
        *_trace_hits(lang),
    ]


def _checkpoint_density_errors(lang: str) -> list[str]:
    from apps import checkpoint_density as app
    from apps.checkpoint_density import swa

    return _errors(
        lambda: app.run(intervals="1000", language=lang, progress=noop),
        lambda: app.run(budgets="8, x", language=lang, progress=noop),
        lambda: app.run(policies=[], language=lang, progress=noop),
        lambda: swa.compare(intervals="100", language=lang),
        lambda: swa.compare(window=10, language=lang),
        lambda: swa.compare(kv_heads=0, language=lang),
    )


def _memory_planner(lang: str) -> list[Any]:
    from apps import memory_planner as app

    first = app.run_plan(language=lang)
    return [first, app.run_plan(max_slots=40, ssm_dtype="float32", history=first[9],
                                language=lang),
            app.run_plan(max_slots=4, language=lang), app.run_plan(budget_gib=1,
            input_len=1_000_000, language=lang), app.run_plan(strategy="radix_off",
            overlap=False, draft=4, language=lang),
            app.run_plan("kimi-k3", tp=1, budget_gib=20, ssm_dtype="float32", language=lang),
            *[app.read_log(e.model, "", log=e.text, log_ratio=e.ratio or 0,
                           log_page=e.page_size or 0, language=lang)
              for e in app.pe.EXAMPLE_LOGS]]  # fmt: skip


def _memory_planner_errors(lang: str) -> list[str]:
    from apps import memory_planner as app

    return _errors(lambda: app.run_plan(tp=5, language=lang),
                    lambda: app.run_plan(model="gpt", language=lang),
                    lambda: app.run_plan(model="custom", n_kda=0, language=lang),
                    lambda: app.run_plan(strategy="extra_buffer_lazy", overlap=False,
                                         language=lang),
                    lambda: app.run_plan("config.json", '{"model_type": "x"}', language=lang),
                    lambda: app.read_log(log="", language=lang))  # fmt: skip


def _int8_checkpoint(lang: str) -> list[Any]:
    from apps import int8_checkpoint as app

    first = app.run(language=lang)
    return [first, app.run(USER, 40, "fp8-e4m3 / key channel", history=first[-2],
                           language=lang)]  # fmt: skip


def _int8_checkpoint_errors(lang: str) -> list[str]:
    from apps import int8_checkpoint as app

    return _errors(lambda: app.run("", language=lang), lambda: app.run(tp=5, language=lang),
                    lambda: app.run(n_tokens=None, language=lang),
                    lambda: app.run(variant="int4", language=lang))  # fmt: skip


def _prefix_replay(lang: str) -> list[Any]:
    from apps import prefix_replay as app
    from apps.prefix_replay import blocks as panel

    first = app.load_scenario(language=lang, progress=None)
    sent = app.send_request(USER, session=first[-1], language=lang, progress=None)
    s = sent[-1]
    return [
        first,
        sent,
        app.inspect(1, inconsistent=True, session=s, language=lang, progress=None),
        app.inspect(0, inconsistent=True, session=s, language=lang, progress=None),
        app.go_to_step(2, session=first[-1], language=lang),
        app.serve_batch(session=s, language=lang, progress=None),
        app.serve_batch(kv_pool=100, session=s, language=lang, progress=None),
        app.serve_batch(max_new_tokens=16, kv_pool=200, session=s, language=lang, progress=None),
        app.serve_batch(
            prompts=LONG_BATCH,
            strategy="extra_buffer_lazy",
            buffer_kib=4000,
            graph_sizes="1, 2, 4",
            session=s,
            language=lang,
            progress=None,
        ),
        app.reset_session(language=lang),
        panel.serve_two(language=lang),
        panel.serve_two(4096, 64, 4481, 2, 4480, language=lang),
        panel.serve_two(64, 64, 50, 0, 30, language=lang),
    ]


def _prefix_replay_errors(lang: str) -> list[str]:
    from apps import prefix_replay as app
    from apps.prefix_replay import blocks

    s = app.load_scenario(progress=None)[-1]
    return (
        _errors(
            lambda: app.send_request("", language=lang, progress=None),
            lambda: app.apply_settings(spacing=0, session=s, language=lang, progress=None),
            lambda: app.go_to_step(99, session=s, language=lang),
            lambda: app.serve_batch(arrivals="0, 1", session=s, language=lang, progress=None),
            lambda: app.serve_batch(buffer_kib=100, session=s, language=lang, progress=None),
            lambda: app.serve_batch(graph_sizes="0, 99", session=s, language=lang, progress=None),
        )
        + [
            r["message"]
            for r in app.pb.batch_validator()("", "x", 0, "radix", 4, 1, -1, 0, "0", s, lang)
            if not r["is_valid"]
        ]
        + _errors(
            lambda: blocks.serve_two(unit=48, language=lang),
            lambda: blocks.serve_two(shared=500, language=lang),
            lambda: blocks.serve_two(block_size=8, language=lang),
        )
    )


def _fleet_routing(lang: str) -> list[Any]:
    from apps import fleet_routing as app

    chat = app.run("chat", router="kv_events", engine="vllm", budget_gib=0, language=lang)
    return [app.run(language=lang), chat]


def _fleet_routing_errors(lang: str) -> list[str]:
    from apps import fleet_routing as app

    return _errors(
        lambda: app.run(replicas=0, language=lang),
        lambda: app.run("upload", language=lang),
        lambda: app.run(router="random", language=lang),
    )


RENDER: dict[str, tuple[Callable[[str], list[Any]], Callable[[str], list[str]]]] = {
    "chunk_scan": (_chunk_scan, _chunk_scan_errors),
    "context_parallel": (_context_parallel, _context_parallel_errors),
    "unified_memory": (_unified_memory, _unified_memory_errors),
    "speculative_replay": (_speculative_replay, _speculative_replay_errors),
    "state_transfer": (_state_transfer, _state_transfer_errors),
    "checkpoint_density": (_checkpoint_density, _checkpoint_density_errors),
    "memory_planner": (_memory_planner, _memory_planner_errors),
    "int8_checkpoint": (_int8_checkpoint, _int8_checkpoint_errors),
    "prefix_replay": (_prefix_replay, _prefix_replay_errors),
    "fleet_routing": (_fleet_routing, _fleet_routing_errors),
}
