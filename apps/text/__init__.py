"""Per-app phrase tables (English -> 中文) and explanations, one module per app."""
