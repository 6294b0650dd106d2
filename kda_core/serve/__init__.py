"""Serving TinyHybrid. The public face: ``engine`` (``Engine``; the contract entry is
``kda_core.engine``), ``request`` (``Request``), ``report`` (the reports), ``batch`` (the model
over a batch of sequences) and ``spec`` (speculative decoding with ReplaySSM). The rest is the
engine's own, one request path, top down:

* ``_loop``      - ``serve``: each step schedule -> run -> post-process;
* ``_scheduler`` - FCFS continuous batching: decodes, chunked prefill, admission, retraction;
* ``_runner``    - one step's forward, the states bound to their slots as views (``_decode``,
  ``_window``, ``_rows``, ``_fused``: the fused decode pass; ``_heap``: malloc thresholds);
* ``_lifecycle`` - a request's life on cache and pools: admit, advance, park, finish, retract;
* ``_trace``     - what ``generate`` observes of its request;
* ``_state``, ``_pools``, ``_args`` - the request inside a serve, the state pools and
  ping-pong ring (and the cache's free hook), the argument checks.

See docs/serving.md and docs/speculative.md.
"""
