"""SGLang 0.5.23's track-interval rule with speculative decoding (``SGLangPolicy`` checks it);
the rest of the lab's SGLang speculative rules, used by tests only, are tests/sglang_spec_rules.py
(tests/real/test_spec_vs_sglang.py runs SGLang's own code against both).
"""

from __future__ import annotations

from kda_core._checks import check_int
from kda_core.cache.policy._context import MAX_LEN


def check_track_interval(
    mamba_track_interval: int,
    speculative_num_draft_tokens: int | None,
    page_size: int = 1,
    name: str = "mamba_track_interval",
) -> None:
    """``arg_groups/mamba_hook.validate_mamba_extra_buffer``'s spec rules (SGLang asserts
    them at startup): the interval at least the draft tokens, and a multiple of the page.
    ``name``: how the caller spells the interval in its messages."""
    interval = check_int(name, mamba_track_interval, 1, MAX_LEN)
    page = check_int("page_size", page_size, 1, MAX_LEN)
    if speculative_num_draft_tokens is not None:
        d = check_int("speculative_num_draft_tokens", speculative_num_draft_tokens, 1, 1 << 10)
        if interval < d:
            raise ValueError(
                f"{name} must be >= speculative_num_draft_tokens={d} "
                f"(SGLang asserts it), got {interval}"
            )
    if interval % page:
        raise ValueError(f"{name} must be a multiple of page_size={page}, got {interval}")
