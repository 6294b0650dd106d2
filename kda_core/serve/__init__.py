"""Serving TinyHybrid: ``engine`` (``Engine``; contract entry ``kda_core.engine``), ``request``,
``report`` and ``spec`` (speculative decoding). The rest is the engine's own, one loop top
down: ``_loop`` (schedule -> run -> post-process), ``_scheduler``, ``_runner``, ``_lifecycle``
(the radix cache's) / ``_blocks`` (vLLM's block table's), ``_trace``, ``_state``, ``_pools`` /
``_slots`` / ``_checkpoints`` / ``_unified`` (the state pools), ``_graphs``, ``_heap``,
``_args``. docs/serving.md.
"""
