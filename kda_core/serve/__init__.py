"""Serving TinyHybrid: ``engine`` (``Engine``, ``Request``; contract entry ``kda_core.engine``),
``report`` and ``spec``; the private modules are the one loop (``_loop``). docs/serving.md."""
