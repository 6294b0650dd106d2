"""Serving TinyHybrid (``Engine``; the contract facade is ``kda_core.engine``), in small parts:

* ``engine`` / ``engine_args`` - ``Engine`` and its argument checks; ``report`` the reports;
* ``generate``  - one request (``Engine.generate``): ``OneRequest``;
* ``cache_ops`` - every call into the radix cache (one adapter);
* ``request``   - ``Request`` (the caller's) and ``RequestState`` (one request in ``serve``);
* ``pools``     - one state pool for running and cached states, the ping-pong ring by mode;
* ``lifecycle`` - admit / advance / park / finish / retract, overlap post-processing;
* ``scheduler`` - FCFS continuous batching: decodes, chunked prefill, admission, retraction;
* ``batch`` / ``fused`` / ``decode`` - the model over a batch (packed prefill, fused decode);
* ``runner``    - one step's forward with the states bound to their slots as views; ``heap``
  keeps freed memory paged in while serving (glibc malloc thresholds);
* ``loop``      - ``serve`` itself, ``ServeReport`` and ``StepRow``;
* ``spec``      - speculative decoding with ReplaySSM.

See docs/serving.md and docs/speculative.md.
"""
