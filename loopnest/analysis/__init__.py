"""Polyhedral analysis with islpy: iteration domains and accesses, dependences, bounds."""
