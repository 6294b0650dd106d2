"""The one message catalog of the lab's front ends: every word an app page or a figure shows,
in English and 中文, as whole messages with named placeholders (docs/apps.md).

``words.catalog`` is the machinery (``Catalog``, ``Msg``, ``T``: no UI library, so ``apps/``
and ``plots/`` both import it); ``words.common`` the messages every page shares; one module per
concept (``words.checkpoint_density``, ...) holds ``MSG``, the messages its app page and its
figures show, so a page and a figure that say the same thing say it from the same key; a
study's codes (a trend, a reason, a variant) are worded there too (``t.word(prefix, code)``).
``words.phrases`` builds the few sentences both front ends assemble from a study's codes and
numbers. ``kda_core`` holds no translated text: it returns codes and numbers.
"""

from words.catalog import CODES, LANGS, Catalog, Msg, T, code

__all__ = ["CODES", "LANGS", "Catalog", "Msg", "T", "code"]
