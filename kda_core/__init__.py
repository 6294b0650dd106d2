"""KDA State Lab core: numpy only (no UI imports)."""
