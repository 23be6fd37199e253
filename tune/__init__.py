"""tune: schedule search, measurement and the tuning-records database (see the README's status)."""
