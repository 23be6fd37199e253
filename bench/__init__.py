"""The benchmark suite: ``python -m bench`` (small sizes) or ``python -m bench --full``."""
