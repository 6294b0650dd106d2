"""The plotly figures of speculative_replay, the one app not moved to its folder yet (its engineer
is changing it); every other app keeps its figures next to its page (``apps/<name>/figures.py``,
docs/apps.md). This package goes when speculative_replay moves."""
