"""``python -m kda_core.sizing CONFIG [...]``: see ``kda_core.sizing._cli``."""

import sys

from kda_core.sizing._cli import main

sys.exit(main())
