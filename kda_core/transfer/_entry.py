"""The cache-entry fields a model-state object carries beyond its tensors and identity, and
their checks (seed 000 §4.1 lists ``physical_location`` and ``parent_checkpoint`` among a cache
entry's fields).

``physical_location`` says where the producer held the state: ``"<tier>"`` or
``"<tier>:<index>"`` with tier device, host or store (``"device:7"``: checkpoint slot 7 of
the device pool; ``"host"``: the host tier). ``parent_checkpoint`` is the boundary and prefix
hash of the deepest state saved before this one on the same path (the state a replay to this
boundary would start from; None when none is saved before it): a parent must stand strictly
before the object's boundary and hash to the object's own tokens up to it, so a chain of
checkpoints can be walked back and checked link by link.
"""

from __future__ import annotations

from kda_core.transfer._identity import prefix_hash

_LOCATION_TIERS = ("device", "host", "store")


class StateObjectError(ValueError):
    """A state object was refused; ``field`` names what did not match."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name


def check_location(loc: object) -> str:
    """``<tier>`` or ``<tier>:<index>`` (index a non-negative integer)."""
    tier, colon, index = loc.partition(":") if isinstance(loc, str) else ("", "", "")
    if tier not in _LOCATION_TIERS or (colon and not index.isdigit()):
        raise StateObjectError(
            "physical_location",
            f"{loc!r:.40} is not <tier> or <tier>:<index> with tier in {_LOCATION_TIERS}",
        )
    return loc  # type: ignore[return-value]


def check_parent(parent: object, tokens: tuple[int, ...]) -> tuple[int, str]:
    """A parent checkpoint (boundary, prefix hash) stands at a boundary in [0, len(tokens))
    and hashes to the object's own tokens up to it."""
    try:
        boundary, key = parent  # type: ignore[misc]
        boundary = int(boundary)
    except (TypeError, ValueError):
        raise StateObjectError(
            "parent_checkpoint", f"{parent!r:.40} is not (boundary, prefix hash)"
        ) from None
    if not 0 <= boundary < len(tokens):
        raise StateObjectError(
            "parent_checkpoint",
            f"boundary {boundary} is not in [0, {len(tokens)}): a parent stands before its child",
        )
    if key != prefix_hash(tokens[:boundary]):
        raise StateObjectError(
            "parent_checkpoint",
            f"hash {str(key)[:12]!r} is not the hash of this object's first {boundary} tokens",
        )
    return boundary, key
