"""Static, byte-reproducible blog figures: one ``plot_<topic>.py`` per concept.

Each script draws what ``kda_core.studies`` returns (no computation here) with matplotlib,
under the shared look of ``plots.style``. ``python -m plots`` renders every figure.

Importing this package before numpy pins OpenBLAS to one thread unless the caller chose
otherwise: the studies' matrices are small, and on a busy 2-core machine a multi-threaded BLAS
made the prefix-replay study 9x slower (22.6 s vs 2.4 s). One thread also keeps the floating-point
reduction order, hence the figures' bytes, independent of the core count.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
