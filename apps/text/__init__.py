"""Every word each app shows, in English and 中文: one catalog of whole messages per app
(``MSG``), plus ``common.COMMON`` (the messages every app shares)."""

# apps.ui's checks render COMMON messages: import it first, so importing a catalog on its own
# (apps.text.common -> apps.ui.catalog -> apps.ui -> apps.ui.checks) finds COMMON defined
import apps.ui  # noqa: E402, F401
