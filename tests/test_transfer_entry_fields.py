"""The two cache-entry fields of seed 000 §4.1 on model-state objects: the physical location
and the parent checkpoint, carried through the bytes and checked on decode."""

from __future__ import annotations

import json
import struct

import pytest
from safetensors.numpy import load as st_load
from safetensors.numpy import save as st_save

from kda_core.model import encode
from kda_core.transfer._identity import prefix_hash
from kda_core.transfer.instance import Instance
from kda_core.transfer.objects import (
    _FORMAT_VERSION as FORMAT_VERSION,
)
from kda_core.transfer.objects import (
    StateObject,
    StateObjectError,
    decode_object,
)

PROMPT = "A token hit is not a state hit; the state lives where it was saved. " * 3


@pytest.fixture(scope="module")
def served():
    """An instance that served PROMPT, its checkpoints and the token ids."""
    inst = Instance("src")
    rep = inst.engine.generate(PROMPT, 1)
    ids = encode(PROMPT)
    marks = sorted(p for p in set(rep.checkpoints) if 0 < p < len(ids))
    assert len(marks) >= 2, marks
    return inst, marks, ids


def _meta(data: bytes) -> dict:
    return json.loads(data[8 : 8 + struct.unpack("<Q", data[:8])[0]])["__metadata__"]


def _with_meta(data: bytes, **changes: str) -> bytes:
    """The same tensors under a header with some metadata fields replaced."""
    return st_save(st_load(data), metadata={**_meta(data), **changes})


def test_export_locates_the_slot_and_links_the_previous_checkpoint(served):
    inst, marks, ids = served
    first, second = (inst.export(ids[:p]) for p in marks[:2])
    assert first is not None and second is not None
    slot = inst.engine.cache.match_prefix(ids[: marks[1]], touch=False).state
    assert second.physical_location == f"device:{slot}"
    assert first.parent_checkpoint is None  # no state before the first checkpoint
    assert second.parent_checkpoint == (marks[0], prefix_hash(tuple(ids[: marks[0]])))
    meta = _meta(second.to_bytes())
    assert meta["format_version"] == FORMAT_VERSION == "2"
    assert json.loads(meta["parent_checkpoint"]) == [marks[0], prefix_hash(ids[: marks[0]])]
    back = decode_object(second.to_bytes(), inst.identity)
    assert back.physical_location == f"device:{slot}"
    assert back.parent_checkpoint == second.parent_checkpoint
    # the chain walks back: the parent's own object sits exactly at the parent's boundary
    assert first.key == back.parent_checkpoint[1] and first.boundary == marks[0]


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"physical_location": "gpu:3"}, "physical_location"),
        ({"physical_location": "device:x"}, "physical_location"),
        ({"physical_location": "device:-1"}, "physical_location"),
        ({"parent_checkpoint": "not json"}, "format"),
        ({"parent_checkpoint": "[1]"}, "parent_checkpoint"),
        ({"parent_checkpoint": '"abc"'}, "parent_checkpoint"),
    ],
)
def test_bad_entry_fields_are_refused_naming_the_field(served, changes, field):
    inst, marks, ids = served
    data = inst.export(ids[: marks[1]]).to_bytes()
    with pytest.raises(StateObjectError) as e:
        decode_object(_with_meta(data, **changes), inst.identity)
    assert e.value.field == field


def test_a_parent_must_stand_before_the_child_on_its_own_tokens(served):
    inst, marks, ids = served
    obj = inst.export(ids[: marks[1]])
    data = obj.to_bytes()
    p = marks[0]
    after = json.dumps([marks[1], obj.key])  # the object itself is not its parent
    other = json.dumps([p, prefix_hash(tuple(ids[: p - 1]) + (ids[p - 1] + 1,))])  # other text
    for bad in (after, other, json.dumps([-1, obj.key])):
        with pytest.raises(StateObjectError) as e:
            decode_object(_with_meta(data, parent_checkpoint=bad), inst.identity)
        assert e.value.field == "parent_checkpoint", bad
    with pytest.raises(StateObjectError, match="parent_checkpoint"):
        StateObject(*_fields(obj), parent_checkpoint=(marks[1] + 5, obj.key))
    with pytest.raises(StateObjectError, match="physical_location"):
        StateObject(*_fields(obj), physical_location="disk")


def _fields(obj: StateObject) -> tuple:
    return (
        obj.tokens,
        obj.mla_kv,
        obj.kda_state,
        obj.conv_window,
        obj.model_fingerprint,
        obj.tokenizer_fingerprint,
        obj.layout,
        obj.source,
    )


def test_an_object_of_the_previous_format_is_refused(served):
    inst, marks, ids = served
    data = inst.export(ids[: marks[0]]).to_bytes()
    with pytest.raises(StateObjectError) as e:
        decode_object(_with_meta(data, format_version="1"), inst.identity)
    assert e.value.field == "format" and "format_version '1'" in str(e.value)
