"""Pharmacometrics: dosing events, compartment models, steady states (being written)."""

from .divdiff import divdiff_exp
from .events import EventSchedule, events
from .analytic import onecpt, twocpt

__all__ = ["divdiff_exp", "EventSchedule", "events", "onecpt", "twocpt"]
from .linear import linode  # noqa: E402

__all__ += ["linode"]
from .nonlinear import ode  # noqa: E402
from .steady_state import ode_steady_state  # noqa: E402

__all__ += ["ode", "ode_steady_state"]
