"""Panels that more than one app lays out: one module per panel (its layout, checks and
callbacks, laid out by ``<panel>_panel(page, demo, name)`` inside the app's ``build()``) and its
view next to it (``<panel>_view.py``: figures and tables), as an app's own panels sit in its
folder; their words are in ``words/<panel>.py``. A panel here has no page of its own: its elem
ids and endpoints carry the name of the app that lays it out (docs/apps.md)."""
