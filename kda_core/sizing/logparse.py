"""The startup and per-batch lines of a SGLang or vLLM server log, parsed into numbers.

``parse_log(text)`` returns one ``LogLine`` per non-empty line: its ``kind`` (a key of
``PATTERNS``, or ``"unknown"``) and its fields. Log prefixes (timestamps, ``[TP0]``,
``(EngineCore pid=..)``, ``INFO ... [file.py:N]``) are skipped because each pattern is searched
anywhere in the line. Sizes are capped: at most ``MAX_LOG_CHARS`` characters and
``MAX_LOG_LINES`` lines. The line formats are SGLang 0.5.23's and vLLM 0.33's (and the older
two-line vLLM KV report); docs/sizing.md lists them.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

MAX_LOG_CHARS: int = 2_000_000
MAX_LOG_LINES: int = 20_000

PATTERNS: dict[str, re.Pattern[str]] = {
    "sglang.mamba": re.compile(
        r"Mamba Cache is allocated\. max_mamba_cache_size: (?P<size>\d+), "
        r"conv_state size: (?P<conv>[\d.]+)GB, ssm_state size: (?P<ssm>[\d.]+)GB"
        r"(?:,? intermediate_ssm_state_cache size: (?P<issm>[\d.]+)GB,? "
        r"intermediate_conv_window_cache size: (?P<iconv>[\d.]+)GB)?"
    ),
    "sglang.ring": re.compile(
        r"ReplaySSM ring buffers allocated \((?:L=|record_len=)(?P<ring_len>\d+)[^)]*\): "
        r"d=(?P<d>[\d.]+)GB, k=(?P<k>[\d.]+)GB, g=(?P<g>[\d.]+)GB,? "
        r"(?:rawv=(?P<rawv>[\d.]+)GB, rawk=(?P<rawk>[\d.]+)GB, (?:beta=(?P<beta>[\d.]+)GB)?)?"
    ),
    "sglang.kv": re.compile(
        r"KV Cache is allocated\. dtype: (?P<dtype>[\w.]+), #tokens: (?P<tokens>\d+), "
        r"(?:KV size: (?P<kv>[\d.]+) GB|K size: (?P<k>[\d.]+) GB, V size: (?P<v>[\d.]+) GB)"
    ),
    "sglang.capped": re.compile(
        r"max_running_requests is capped to (?P<cap>\d+) by the mamba state cache "
        r"\(max_mamba_cache_size=(?P<size>\d+), (?P<spr>\d+) state slots per request\)"
    ),
    "sglang.usage": re.compile(
        r"(?:#running-req: (?P<running>\d+), )?#full token: (?P<full>\d+), full token usage: "
        r"(?P<full_usage>[\d.]+), mamba num: (?P<mamba>\d+), mamba usage: (?P<mamba_usage>[\d.]+)"
    ),
    "sglang.pool": re.compile(
        r"max_total_num_tokens=(?P<tokens>\d+),.*?max_running_requests=(?P<running>\d+)"
        r"(?:.*?context_len=(?P<context_len>\d+))?"
    ),
    "vllm.block_size": re.compile(
        r"Setting attention block size to (?P<block>\d+) tokens to ensure that attention page "
        r"size is >= mamba page size"
    ),
    "vllm.padding": re.compile(r"Padding mamba page size by (?P<pct>[\d.]+)% to ensure"),
    "vllm.padding_layers": re.compile(
        r"Add (?P<layers>\d+) padding layers, may waste at most (?P<pct>[\d.]+)% KV cache memory"
    ),
    "vllm.available": re.compile(r"Available KV cache memory: (?P<gib>[\d.]+) GiB"),
    "vllm.kv_size": re.compile(
        r"KV cache size: (?P<tokens>[\d,]+) tokens(?:, Maximum concurrency for "
        r"(?P<len>[\d,]+) tokens per request: (?P<conc>[\d.]+)x)?"
    ),
    "vllm.concurrency": re.compile(
        r"^(?!.*KV cache size).*Maximum concurrency for (?P<len>[\d,]+) tokens per request: "
        r"(?P<conc>[\d.]+)x"
    ),
    "vllm.max_num_seqs": re.compile(
        r"max_num_seqs \((?P<seqs>\d+)\) exceeds available Mamba cache blocks \((?P<blocks>\d+)\)"
    ),
    "vllm.args": re.compile(r"non-default args: (?P<args>\{.*\})"),
    "vllm.version": re.compile(r"Initializing a V1 LLM engine \(v(?P<version>[\w.+-]+)\)"),
}
ENGINE_OF_KIND = {k: k.split(".")[0] for k in PATTERNS}


@dataclass(frozen=True, slots=True)
class LogLine:
    """One parsed line: 1-based ``line_no``, the text, its ``kind`` and its fields."""

    line_no: int
    text: str
    kind: str
    fields: dict[str, object] = field(default_factory=dict)


def _number(s: str) -> int | float:
    s = s.replace(",", "")
    return float(s) if "." in s else int(s)


def _fields(kind: str, m: re.Match[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in m.groupdict().items():
        if v is None:
            continue
        if kind == "vllm.args" and k == "args":
            try:
                parsed = ast.literal_eval(v)
            except (ValueError, SyntaxError):
                parsed = None
            out[k] = parsed if isinstance(parsed, dict) else {}
        elif k in ("dtype", "version"):
            out[k] = v
        else:
            out[k] = _number(v)
    return out


def parse_line(line_no: int, text: str) -> LogLine:
    """The ``LogLine`` of one line (``kind="unknown"`` when no pattern matches)."""
    for kind, pattern in PATTERNS.items():
        m = pattern.search(text)
        if m:
            return LogLine(line_no, text, kind, _fields(kind, m))
    return LogLine(line_no, text, "unknown")


def parse_log(text: object) -> list[LogLine]:
    """Every non-empty line of a server log, parsed. ValueError for a non-string, an over-long
    log, or one in which no line is a known SGLang or vLLM line."""
    if not isinstance(text, str):
        raise ValueError(f"log must be a string, got {type(text).__name__}")
    if len(text) > MAX_LOG_CHARS:
        raise ValueError(f"log must be at most {MAX_LOG_CHARS} characters, got {len(text)}")
    raw = text.splitlines()
    if len(raw) > MAX_LOG_LINES:
        raise ValueError(f"log must be at most {MAX_LOG_LINES} lines, got {len(raw)}")
    lines = [parse_line(i, t.strip()) for i, t in enumerate(raw, 1) if t.strip()]
    if not any(x.kind != "unknown" for x in lines):
        raise ValueError(
            "log has no line this reader knows (SGLang 'Mamba Cache is allocated' / 'KV Cache is "
            "allocated' lines, or vLLM 'GPU KV cache size' / 'Available KV cache memory' lines)"
        )
    return lines


def engine_of(lines: list[LogLine]) -> str:
    """ "sglang" or "vllm": the engine whose lines the log has (ValueError if it has both)."""
    engines = {ENGINE_OF_KIND[x.kind] for x in lines if x.kind != "unknown"}
    if len(engines) != 1:
        raise ValueError(f"log mixes lines of {sorted(engines)}: read one server's log at a time")
    return engines.pop()
