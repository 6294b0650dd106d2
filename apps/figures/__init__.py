"""Plotly figure builders of the apps that keep the older shape (one module per app here); an app
moved into its folder keeps them next to its page (``apps/<name>/figures.py``, docs/apps.md)."""
