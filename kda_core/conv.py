"""Public API entry: ``kda_core.conv.short_conv(x, w, window=None, activation="silu")
-> (y, new_window)``, the short causal depthwise conv with a carried window. It lives in
`kda_core.kda.conv`; code inside the project imports it from there.
"""

from kda_core.kda.conv import ACTIVATIONS, short_conv, silu

__all__ = ["ACTIVATIONS", "short_conv", "silu"]
