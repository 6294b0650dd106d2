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
_WRAP = 4  # lines a wrapped known line may span

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
    "sglang.args": re.compile(r"server_args=(?:\w*\((?P<args>.*)|(?P<dict>\{.*))"),
    "sglang.capped": re.compile(
        r"max_running_requests is capped to (?P<cap>\d+) by the mamba state cache "
        r"\(max_mamba_cache_size=(?P<size>\d+), (?P<spr>\d+) state slots per request\)"
    ),
    # a per-batch line ("Decode batch, #running-req: N, ..." / "Prefill batch, ..."): the
    # fields are searched one by one (_USAGE_FIELDS), the two lines order them differently
    "sglang.usage": re.compile(r"mamba usage: (?P<mamba_usage>[\d.]+)"),
    "sglang.reduced": re.compile(
        r"max_running_requests was reduced from the requested (?P<requested>\d+) to "
        r"(?P<running>\d+)"
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
_USAGE_FIELDS: dict[str, re.Pattern[str]] = {
    "running": re.compile(r"#running-req: (\d+)"),
    "full": re.compile(r"#full token: (\d+)"),
    "full_usage": re.compile(r"full token usage: ([\d.]+)"),
    "mamba": re.compile(r"mamba num: (\d+)"),
    "queue": re.compile(r"#queue-req: (\d+)"),
}
_CUT: dict[str, str] = {
    "sglang.mamba": "Mamba Cache is allocated",
    "sglang.ring": "ReplaySSM ring buffers allocated",
    "sglang.kv": "KV Cache is allocated",
    "sglang.capped": "max_running_requests is capped to",
    "sglang.reduced": "max_running_requests was reduced",
    "sglang.pool": "max_total_num_tokens=",
    "vllm.available": "Available KV cache memory",
    "vllm.kv_size": "KV cache size:",
    "vllm.max_num_seqs": "exceeds available Mamba cache blocks",
}
"""A line that starts one of these and does not match its pattern was cut (``kind="cut"``,
``fields["of"]`` the kind it would have been)."""
_TAILS: dict[str, str] = {
    "sglang.capped": "To raise it: increase --mamba-full-memory-ratio or --max-mamba-cache-size, "
    "or halve the state size with --mamba-ssm-dtype bfloat16.",
}
"""The fixed ends of known lines: a wrapped paste's following lines that are part of it are
joined back."""
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
    "model_path",
    "served_model_name",
)
"""The ``server_args=ServerArgs(...)`` fields the SGLang reader uses (others are skipped)."""
_ARG_PAIR = re.compile(r"\b(\w+)=('[^']*'|\"[^\"]*\"|[^,()\[\]{}]+)")
_DICT_PAIR = re.compile(r"'(\w+)': ('[^']*'|\"[^\"]*\"|[^,()\[\]{}]+)")


def _parse_sglang_args(text: str, form: str = "args") -> dict[str, object]:
    """The known ``SGLANG_ARGS`` of a ``server_args=`` line, as Python values: SGLang 0.5.23
    echoes a dict (``engine.py`` ``_server_args_for_logging``), older ones ``ServerArgs(...)``."""
    out: dict[str, object] = {}
    pairs = _DICT_PAIR if form == "dict" else _ARG_PAIR
    for key, raw in pairs.findall(text):
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
    if kind == "sglang.usage":
        for k, pattern in _USAGE_FIELDS.items():
            found = pattern.search(m.string)
            if found:
                out[k] = _number(found.group(1))
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
            out["args"] = _parse_sglang_args(v, k)
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
    for kind, start in _CUT.items():
        if start in text:
            return LogLine(line_no, text, "cut", {"of": kind})
    return LogLine(line_no, text, "unknown")


def _parsed(raw: list[str]) -> list[LogLine]:
    """The non-empty lines parsed, a pasted line that was wrapped joined back into one: a line
    ending in a comma with the next one indented, or a known line cut by the wrap (up to
    ``_WRAP`` more lines are joined while that makes it match)."""
    rows = [(i, t.strip(), t[:1].isspace()) for i, t in enumerate(raw, 1) if t.strip()]
    out: list[LogLine] = []
    k = 0
    while k < len(rows):
        line_no, text, _ = rows[k]
        k += 1
        while k < len(rows) and text.endswith(",") and rows[k][2]:
            text, k = f"{text} {rows[k][1]}", k + 1
        x = _parse_line(line_no, text)
        for extra in range(1, _WRAP + 1):
            if x.kind != "cut" or k + extra > len(rows):
                break
            joined = " ".join([text, *(r[1] for r in rows[k : k + extra])])
            y = _parse_line(line_no, joined)
            if y.kind == x.fields["of"]:
                x, k = y, k + extra
                break
        while k < len(rows) and x.kind in _TAILS and rows[k][1] in _TAILS[x.kind]:
            x = LogLine(x.line_no, f"{x.text} {rows[k][1]}", x.kind, x.fields)
            k += 1
        out.append(x)
    return out


def parse_log(text: object) -> list[LogLine]:
    """Every non-empty line of a server log (or a fragment of one), parsed; unknown lines come
    back with ``kind="unknown"``, known lines cut short with ``kind="cut"``. ValueError for a
    non-string or an over-long log only."""
    if not isinstance(text, str):
        raise ValueError(f"log must be a string, got {type(text).__name__}")
    if len(text) > _MAX_LOG_CHARS:
        raise ValueError(f"log must be at most {_MAX_LOG_CHARS:,} characters, got {len(text):,}")
    raw = text.splitlines()
    if len(raw) > _MAX_LOG_LINES:
        raise ValueError(f"log must be at most {_MAX_LOG_LINES:,} lines, got {len(raw):,}")
    return _parsed(raw)


def engine_of_line(x: LogLine) -> str:
    """The engine a parsed line belongs to ("" for an unknown line)."""
    kind = str(x.fields["of"]) if x.kind == "cut" else x.kind
    return _ENGINE_OF_KIND.get(kind, "")


def engine_of(lines: list[LogLine]) -> str:
    """ "sglang" or "vllm": the engine most of the known lines belong to ("" when none is
    known; a paste mixing both is read as the engine with more lines, the others skipped)."""
    counts = {"sglang": 0, "vllm": 0, "": 0}
    for x in lines:
        counts[engine_of_line(x)] += 1
    if not counts["sglang"] and not counts["vllm"]:
        return ""
    return "sglang" if counts["sglang"] >= counts["vllm"] else "vllm"
