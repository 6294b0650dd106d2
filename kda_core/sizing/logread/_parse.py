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

_MAX_LOG_CHARS: int = 2_000_000
_MAX_LOG_LINES: int = 20_000

_PATTERNS: dict[str, re.Pattern[str]] = {
    "sglang.mamba": re.compile(
        r"Mamba Cache is allocated\. max_mamba_cache_size: (?P<size>\d+), "
        r"conv_state size: (?P<conv>[\d.]+)GB, ssm_state size: (?P<ssm>[\d.]+)GB"
        r"(?:,? intermediate_ssm_state_cache size: (?P<issm>[\d.]+)GB,? "
        r"intermediate_conv_window_cache size: (?P<iconv>[\d.]+)GB)?"
    ),
    "sglang.ring": re.compile(
        r"ReplaySSM ring buffers allocated \((?:L=|record_len=)(?P<ring_len>\d+)"
        r"(?:, fold=(?P<fold>True|False))?[^)]*\): "
        r"d=(?P<d>[\d.]+)GB, k=(?P<k>[\d.]+)GB, g=(?P<g>[\d.]+)GB,?"
        r"(?: rawv=(?P<rawv>[\d.]+)GB, rawk=(?P<rawk>[\d.]+)GB,?(?: beta=(?P<beta>[\d.]+)GB)?)?"
    ),
    "sglang.kv": re.compile(
        r"KV Cache is allocated\. (?:dtype: (?P<dtype>[\w.]+), )?#tokens: (?P<tokens>\d+), "
        r"(?:KV size: (?P<kv>[\d.]+) GB|K size: (?P<k>[\d.]+) GB, V size: (?P<v>[\d.]+) GB)"
    ),
    "sglang.kv_dtype": re.compile(r"Using KV cache dtype: (?P<dtype>[\w.]+)"),
    "sglang.weights": re.compile(
        r"Load weight end\..*?avail mem=(?P<avail>[\d.]+) GB, mem usage=(?P<usage>[\d.]+) GB"
    ),
    "sglang.args": re.compile(r"server_args=\w*\((?P<args>.*)\)"),
    "sglang.capped": re.compile(
        r"max_running_requests is capped to (?P<cap>\d+) by the mamba state cache "
        r"\(max_mamba_cache_size=(?P<size>\d+), (?P<spr>\d+) state slots per request\)"
    ),
    "sglang.usage": re.compile(
        r"(?:#running-req: (?P<running>\d+), )?#full token: (?P<full>\d+), full token usage: "
        r"(?P<full_usage>[\d.]+), mamba num: (?P<mamba>\d+), mamba usage: (?P<mamba_usage>[\d.]+)"
        r"(?:.*?#queue-req: (?P<queue>\d+))?"
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
    "vllm.stats": re.compile(
        r"Running: (?P<running>\d+) reqs, Waiting: (?P<waiting>\d+) reqs,.*? KV cache usage: "
        r"(?P<kv_usage>[\d.]+)%(?:.*?Prefix cache hit rate: (?P<hit>[\d.]+)%)?"
    ),
    "vllm.version": re.compile(r"Initializing a V1 LLM engine \(v(?P<version>[\w.+-]+)\)"),
    # a Prometheus /metrics sample: name{labels} value
    "sglang.metric": re.compile(
        r"^(?P<metric>sglang:\w+)(?:\{[^}]*\})? (?P<value>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?))$"
    ),
    "vllm.metric": re.compile(
        r"^(?P<metric>vllm:\w+)(?:\{[^}]*\})? (?P<value>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?))$"
    ),
}
_ENGINE_OF_KIND = {k: k.split(".")[0] for k in _PATTERNS}


@dataclass(frozen=True, slots=True)
class LogLine:
    """One parsed line: 1-based ``line_no``, the text, its ``kind`` and its fields."""

    line_no: int
    text: str
    kind: str
    fields: dict[str, object] = field(default_factory=dict)


_SGLANG_ARGS: tuple[str, ...] = (
    "tp_size",
    "page_size",
    "mamba_full_memory_ratio",
    "max_running_requests",
    "max_mamba_cache_size",
    "mamba_ssm_dtype",
    "kv_cache_dtype",
    "disable_radix_cache",
    "mamba_radix_cache_strategy",
    "disable_overlap_schedule",
    "enable_linear_replayssm_spec",
    "linear_replayssm_cache_len",
)
"""The ``server_args=ServerArgs(...)`` fields the SGLang reader uses (others are skipped)."""
_ARG_PAIR = re.compile(r"\b(\w+)=('[^']*'|\"[^\"]*\"|[^,()\[\]{}]+)")


def _parse_sglang_args(text: str) -> dict[str, object]:
    """The known ``SGLANG_ARGS`` of a ``server_args=`` line, as Python values."""
    out: dict[str, object] = {}
    for key, raw in _ARG_PAIR.findall(text):
        if key not in _SGLANG_ARGS or key in out:
            continue
        try:
            out[key] = ast.literal_eval(raw.strip())
        except (ValueError, SyntaxError):
            out[key] = raw.strip()
    return out


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
        elif kind == "sglang.args":
            out[k] = _parse_sglang_args(v)
        elif k in ("dtype", "version", "fold", "metric"):
            out[k] = v
        elif k == "value":
            out[k] = float(v)
        else:
            out[k] = _number(v)
    return out


def _parse_line(line_no: int, text: str) -> LogLine:
    """The ``LogLine`` of one line (``kind="unknown"`` when no pattern matches)."""
    for kind, pattern in _PATTERNS.items():
        m = pattern.search(text)
        if m:
            return LogLine(line_no, text, kind, _fields(kind, m))
    return LogLine(line_no, text, "unknown")


def parse_log(text: object) -> list[LogLine]:
    """Every non-empty line of a server log, parsed. ValueError for a non-string, an over-long
    log, or one in which no line is a known SGLang or vLLM line."""
    if not isinstance(text, str):
        raise ValueError(f"log must be a string, got {type(text).__name__}")
    if len(text) > _MAX_LOG_CHARS:
        raise ValueError(f"log must be at most {_MAX_LOG_CHARS} characters, got {len(text)}")
    raw = text.splitlines()
    if len(raw) > _MAX_LOG_LINES:
        raise ValueError(f"log must be at most {_MAX_LOG_LINES} lines, got {len(raw)}")
    lines = [_parse_line(i, t.strip()) for i, t in enumerate(raw, 1) if t.strip()]
    if not any(x.kind != "unknown" for x in lines):
        raise ValueError(
            "log has no line this reader knows (SGLang 'Mamba Cache is allocated' / 'KV Cache is "
            "allocated' lines, or vLLM 'GPU KV cache size' / 'Available KV cache memory' lines)"
        )
    return lines


def engine_of(lines: list[LogLine]) -> str:
    """ "sglang" or "vllm": the engine whose lines the log has (ValueError if it has both)."""
    engines = {_ENGINE_OF_KIND[x.kind] for x in lines if x.kind != "unknown"}
    if len(engines) != 1:
        raise ValueError(f"log mixes lines of {sorted(engines)}: read one server's log at a time")
    return engines.pop()
