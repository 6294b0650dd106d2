"""Test-wide settings: offline Gradio, single-threaded BLAS (the tiny model's matmuls are small;
on a busy 2-core machine a multi-threaded BLAS spends more time waking threads than computing)."""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"

import importlib.util  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

# tests/real needs the real SGLang/vLLM packages and runs in its own venv (make test-real);
# this venv does not have them, so it does not collect that folder.
if importlib.util.find_spec("sglang") is None:
    collect_ignore = ["real"]


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)
