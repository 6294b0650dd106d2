"""tests/real runs in its own venv (.venv-real, built by tests/real/install.sh) with the real
SGLang 0.5.23 and vLLM 0.33.0 packages. Before anything imports them, ``fakes.install()`` puts
import-time stand-ins for ``triton`` and ``torchvision`` on ``sys.meta_path`` (their GPU kernels
and vision ops cannot load against CPU torch; the cache code under test never calls them), and
SGLang's unit-test kit is told that the device is "cpu".

The main venv's pytest never collects this folder (``collect_ignore`` in tests/conftest.py)."""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
for p in (HERE, ROOT):
    if p not in sys.path:
        sys.path.insert(0, p)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import fakes  # noqa: E402

fakes.install()
