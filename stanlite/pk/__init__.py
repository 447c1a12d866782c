"""Pharmacometrics: dosing events, compartment models, steady states (being written)."""

__all__ = []
