"""Public API entry (docs/architecture.md): ``kda_core.quant.quantize_int8(state) -> Int8State``.

The implementation is ``kda_core.kda.quant``; internal code imports it from there.
``Int8State`` is the public API's name for the result: an alias of ``QuantizedState``, the one
class that holds INT8, fp8-e4m3 and bf16 states (kept as an alias, not a class rename,
because the class also serves formats that are not INT8).
"""

from kda_core.kda.quant import QuantizedState, quantize_int8

Int8State = QuantizedState

__all__ = ["Int8State", "quantize_int8"]
