"""KDA State Lab apps: one Gradio app per concept, plus the hub (``python -m apps``).

Importing this package first sets offline / quiet defaults (only where the caller has not set
them): no Gradio analytics, Hugging Face Hub offline and without telemetry, single-threaded
OpenBLAS. This runs before anything below imports numpy or gradio.
"""

from __future__ import annotations

import os

for _key, _value in (
    ("GRADIO_ANALYTICS_ENABLED", "False"),
    ("HF_HUB_OFFLINE", "1"),
    ("HF_HUB_DISABLE_TELEMETRY", "1"),
    ("OPENBLAS_NUM_THREADS", "1"),
):
    os.environ.setdefault(_key, _value)
