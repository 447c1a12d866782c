"""Pharmacometrics: dosing events, compartment models, steady states (being written)."""

from .divdiff import divdiff_exp
from .events import EventSchedule, events
from .analytic import onecpt, twocpt

__all__ = ["divdiff_exp", "EventSchedule", "events", "onecpt", "twocpt"]
