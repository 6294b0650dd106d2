"""Beyond one instance: model-state objects, tiers, stores, prefill/decode disaggregation.

- ``objects``: one safetensors object per boundary (MLA KV + KDA state + conv window +
  metadata), validated field by field on load.
- ``_identity``: model / tokenizer fingerprints, TP layout (``Identity``, ``Layout``: exported),
  prefix hashes.
- ``store``: the embedded store (in-process, or a directory shared by processes);
  ``_store_rules``: the key rule, object cap and counters both stores share.
- ``mooncake``: Mooncake Store over TCP on 127.0.0.1 (master + standalone storage node).
- ``instance``: an engine plus a store: publish at boundaries, find the longest jointly
  restorable prefix, restore.
- ``_tiers``: a host tier under the device checkpoint pool (HiCache-style).
- ``pd``: the two-process prefill -> decode selftest (``python -m kda_core.transfer``).
"""

from kda_core.transfer._identity import Identity, Layout

__all__ = ["Identity", "Layout"]
