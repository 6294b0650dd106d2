"""Per-app plotly figure builders, one module per app (they draw what kda_core.studies returns)."""
