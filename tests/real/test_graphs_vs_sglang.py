"""The fixed-shape decode against SGLang 0.5.23's own code (tests/test_serve_graphs.py has the
engine side): the padded size is ``BaseCudaGraphRunner._pad_to_bucket``
(``model_executor/runner/base_cuda_graph_runner.py``) for every batch and capture list, and the
sink index 0 is the slot SGLang's ``MambaSlotAllocator`` (``mem_cache/allocator/mamba.py``)
never hands out, so a request's index is never the sink's."""

from __future__ import annotations

import itertools

import pytest

from kda_core.serve import _graphs

runner = pytest.importorskip("sglang.srt.model_executor.runner.base_cuda_graph_runner")
mamba = pytest.importorskip("sglang.srt.mem_cache.allocator.mamba")

CAPTURES = [(1,), (1, 2, 4, 8), (2, 3, 5, 16), (1, 2, 3, 4, 8, 12, 16, 24, 32)]


@pytest.mark.parametrize("sizes", CAPTURES)
def test_padded_size_is_sglangs_bucket(sizes):
    for n in range(1, sizes[-1] + 1):
        assert _graphs.padded_size(n, sizes) == runner.BaseCudaGraphRunner._pad_to_bucket(n, sizes)
    with pytest.raises(AssertionError, match="exceeds max captured bucket"):
        runner.BaseCudaGraphRunner._pad_to_bucket(sizes[-1] + 1, sizes)
    with pytest.raises(ValueError, match="exceeds the largest captured size"):
        _graphs.padded_size(sizes[-1] + 1, sizes)


@pytest.mark.parametrize("size", [1, 5, 64])
def test_the_sink_is_the_slot_sglang_never_allocates(size):
    alloc = mamba.MambaSlotAllocator(size, "cpu")
    given = [int(s) for s in alloc.alloc(size)]
    assert sorted(given) == list(range(1, size + 1))  # size slots, numbered from 1
    assert _graphs.SINK not in given and alloc.alloc(1) is None
    # the lab's index table numbers a pool slot s as s + 1: the same range
    table = _graphs.graph_step(list(range(size)), size + 2).state_index
    assert sorted(table[:size]) == sorted(given) and table[size:] == (_graphs.SINK,) * 2


def test_capture_lists_are_sorted_and_deduplicated_as_sglang_does():
    for sizes in itertools.permutations((8, 1, 4, 4)):
        assert _graphs.check_graph_bs(list(sizes)) == tuple(sorted(set(sizes)))


def _app_default_graph_bs() -> tuple[int, ...]:
    """The batch view's default captured sizes, read from the app's source (this venv has no
    Gradio to import it with)."""
    import ast
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "apps" / "prefix_replay" / "batch.py"
    for node in ast.parse(src.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "DEFAULT_GRAPH_BS":
            return tuple(ast.literal_eval(node.value))
    raise AssertionError("DEFAULT_GRAPH_BS not found in apps/prefix_replay/batch.py")


def test_the_batch_views_default_is_sglangs_capture_list():
    """SGLang's decode capture list (``arg_groups/cuda_graph_hook.py``
    ``generate_decode_cuda_graph_batch_sizes``, no speculative decoding, padding on) for the
    most requests the batch view serves (12) is the view's default."""
    from types import SimpleNamespace

    hook = pytest.importorskip("sglang.srt.arg_groups.cuda_graph_hook")
    args = SimpleNamespace(disable_cuda_graph_padding=False, speculative_algorithm=None)
    assert tuple(hook.generate_decode_cuda_graph_batch_sizes(args, 12)) == _app_default_graph_bs()
