"""Serving TinyHybrid: ``engine`` (``Engine``; contract entry ``kda_core.engine``), ``request``,
``report`` and ``spec``; the private modules are the one loop (``_loop``). docs/serving.md."""
