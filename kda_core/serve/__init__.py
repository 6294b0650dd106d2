"""Serving many requests at once on TinyHybrid (``Engine.serve``), in small parts:

* ``request``   - ``Request`` (the caller's) and ``RequestState`` (tokens, phase, slots, lock,
  last tracked position, counters);
* ``pools``     - one state pool shared by running and cached states (SGLang's ``MambaPool``),
  the INT8 checkpoint pool's size;
* ``lifecycle`` - admit / advance / park (in-flight checkpoints) / finish / retract on the
  engine's tree and pools;
* ``scheduler`` - FCFS continuous batching: decodes, chunked prefill under a token budget,
  admission by state slots and KV tokens, retraction;
* ``batch``     - the model over a batch in one pass (varlen packed prefill, batched decode);
* ``runner``    - one step's forward with the states bound to their slots as views;
* ``loop``      - ``serve`` itself, ``ServeReport`` and ``StepRow``.
"""
