"""Placeholder replaced by the arithmetic simplifier."""
def simplify(e, ranges=None):
    return e
