"""The prefix_replay study's inputs: built-in scenarios, size caps, policies and their checks.

Three scenarios (shared system prompt with branches, a multi-turn chat, a long document with
several questions), the checkpoint policies the app offers (``make_policy``), the argument
checks every entry point of the study shares, and the model the study serves on (TinyHybrid,
loaded once). Left out: scenario texts beyond the three built-ins (``prompts=`` takes any).
"""

from __future__ import annotations

from dataclasses import dataclass

from kda_core._checks import check_int
from kda_core.cache import policy as pol
from kda_core.model import TinyHybrid, encode

MAX_PROMPTS = 12
MAX_PROMPT_TOKENS = 1024
MAX_NEW = 64
POLICIES: tuple[str, ...] = ("interval", "sglang", "vllm", "marconi")
# the three restores of ``restore_drift`` in a fixed order (series colours follow it)
ARMS: tuple[str, ...] = ("exact", "int8", "inconsistent")

_SYS = (
    "System: You are Kimi, a concise assistant. Answer in one line.\n"
    "Tools: weather(city) -> forecast; calc(expr) -> number; search(q) -> links.\n"
)
_DOC = (
    "Document: The Delta rule updates a memory matrix S by writing v along k after erasing "
    "what S already stored along k. Kimi Delta Attention adds a per-channel decay, so each key "
    "channel forgets at its own rate. Its state has a fixed size, unlike a KV cache, which "
    "grows with every token.\n"
)


@dataclass(slots=True, frozen=True)
class Scenario:
    """A built-in scenario: its prompts and what it shows. Its title is the front ends' (the
    catalog's message ``scen_<name>`` in ``words.prefix_replay``): the core keeps the code."""

    prompts: tuple[str, ...]
    note: str


SCENARIOS: dict[str, Scenario] = {
    "system_tools_branches": Scenario(
        (
            _SYS + "User: What's the weather in Paris?\nAssistant:",
            _SYS + "User: Compute 17*23.\nAssistant:",
            _SYS + "User: What's the weather in Berlin?\nAssistant:",
        ),
        "Both branches share the system prompt; each later request matches text past the "
        "last checkpoint on its path, so it restores earlier and replays up to the match.",
    ),
    "multi_turn": Scenario(
        (
            _SYS + "User: Hi, I'm Ana.\nAssistant:",
            _SYS + "User: Hi, I'm Ana.\nAssistant: Hello Ana!\nUser: 你好吗？\nAssistant:",
            _SYS + "User: Hi, I'm Ana.\nAssistant: Hello Ana!\nUser: 你好吗？\nAssistant: 很好。"
            "\nUser: What's my name?\nAssistant:",
        ),
        "Every turn extends the previous one: the hit grows with the conversation.",
    ),
    "long_document": Scenario(
        (
            _DOC + "Q: What does the decay act on?\nA:",
            _DOC + "Q: Why is the state fixed-size?\nA:",
            _DOC + "Q: What does the decay do?\nA:",
        ),
        "The document is computed once; each question restores at the document's last "
        "checkpoint and replays the shared question prefix.",
    ),
}

_MODEL: list[TinyHybrid] = []


def shared_model() -> TinyHybrid:
    if not _MODEL:
        _MODEL.append(TinyHybrid())
    return _MODEL[0]


def make_policy(name: str, spacing: int) -> pol.Policy:
    """The scenario policy: ``spacing`` is the interval (interval, plus a checkpoint at the
    request end so later requests match deep and replay), grid (sglang) or block (vllm, mode
    "all"); marconi places by branch points and ignores it."""
    if name not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {name!r}")
    spacing = check_int("spacing", spacing, 1, 1024)
    if name == "interval":
        return pol.make("interval", every=spacing, request_end=True)
    if name == "sglang":
        return pol.make("sglang", grid=spacing, track_interval=spacing)
    if name == "vllm":
        return pol.make("vllm", mode="all", block_size=spacing)
    return pol.make("marconi")


def check_prompts(name: str | None, prompts: tuple[str, ...] | None) -> tuple[str, ...]:
    if prompts is None:
        if name not in SCENARIOS:
            raise ValueError(f"name must be one of {tuple(SCENARIOS)}, got {name!r}")
        return SCENARIOS[name].prompts
    if isinstance(prompts, str) or not isinstance(prompts, (tuple, list)):
        raise ValueError("prompts must be a tuple of texts")
    out = tuple(prompts)
    if not 1 <= len(out) <= MAX_PROMPTS:
        raise ValueError(f"prompts must hold 1 to {MAX_PROMPTS} texts, got {len(out)}")
    for p in out:
        if not isinstance(p, str) or not p:
            raise ValueError("prompts must be non-empty texts")
        if len(encode(p)) > MAX_PROMPT_TOKENS:
            raise ValueError(f"prompts: at most {MAX_PROMPT_TOKENS} tokens (UTF-8 bytes) each")
    return out


def check_settings(
    policy: str,
    spacing: int,
    int8: bool,
    checkpoint_slots: int | None,
    max_new_tokens: int,
) -> tuple[str, int, bool, int | None, int]:
    make_policy(policy, spacing)  # validates policy and spacing
    if not isinstance(int8, bool):
        raise ValueError(f"int8 must be a bool, got {int8!r}")
    if checkpoint_slots is not None:
        checkpoint_slots = check_int("checkpoint_slots", checkpoint_slots, 1, 4096)
    n = check_int("max_new_tokens", max_new_tokens, 1, MAX_NEW)
    return policy, int(spacing), int8, checkpoint_slots, n


def check_prompt(prompt: object) -> str:
    if not isinstance(prompt, str) or not prompt:
        raise ValueError("prompt must be a non-empty text")
    if len(encode(prompt)) > MAX_PROMPT_TOKENS:
        raise ValueError(f"prompt: at most {MAX_PROMPT_TOKENS} tokens (UTF-8 bytes) each")
    return prompt
