"""One- and two-compartment models with first-order absorption, in closed form.

The models of Torsten's ``pmx_solve_onecpt`` / ``pmx_solve_twocpt`` (compartment 1
the gut (depot), 2 the central, 3 the peripheral one; amounts, not concentrations):

    one compartment (CL, V, ka), k = CL / V:
        gut'  = -ka gut
        cent' =  ka gut - k cent

    two compartments (CL, Q, V2, V3, ka), k10 = CL/V2, k12 = Q/V2, k21 = Q/V3:
        gut'    = -ka gut
        cent'   =  ka gut - (k10 + k12) cent + k21 periph
        periph' =  k12 cent - k21 periph

Closed forms as divided differences. The response of compartment m to a unit bolus
into compartment c is the inverse Laplace transform of a rational function
``p(s) / prod_i (s + lambda_i)`` whose poles are the rates (``ka``, ``k``; or ``ka``
and the two disposition rates ``alpha > beta``, roots of ``l^2 - (k10 + k12 + k21) l
+ k10 k21``). By partial fractions it equals ``(-1)^(n-1)`` times the divided
difference of ``x -> p(-x) e^{-x t}`` at the rates, and for ``p(s) = s + c`` Leibniz's
rule gives

    (-1)^(n-1) [ (c - x_0) e[x_0, ..., x_{n-1}] - e[x_1, ..., x_{n-1}] ],
    e[x_0..x_m] = divided difference of x -> e^{-x t} = t^m divdiff_exp(x t).

With ``x_0 = beta`` both terms have the same sign (``beta < k21, k10 + k12 < alpha``),
so nothing cancels, and unlike the textbook sums of exponentials with factors
``1 / (ka - k)`` the formulas stay exact when rates coincide (``ka = k``, ``ka =
alpha`` ...). An infusion (the integral of the bolus response) adds a pole at 0::

    one compartment, unit bolus             unit-rate infusion for time t
      gut  -> gut   e[ka]                       -e[0, ka]
      gut  -> cent  -ka e[k, ka]                 ka e[0, k, ka]
      cent -> cent  e[k]                        -e[0, k]

    two compartments (E = e[beta, alpha]; with the gut, E3 = e[beta, alpha, ka])
      gut  -> cent   ka ((k21 - beta) E3 - e[alpha, ka]);   -> periph  ka k12 E3
      cent -> cent   e[alpha] - (k21 - beta) E;             -> periph  -k12 E
      periph -> cent -k21 E;    -> periph  e[alpha] - (k10 + k12 - beta) E

The disposition rates are computed without cancellation: ``alpha = (S + R) / 2``,
``beta = 2 k10 k21 / (S + R)`` with ``S = k10 + k12 + k21`` and ``R^2 = (k10 - k21)^2
+ k12 (k12 + 2 k10 + 2 k21)`` (a sum of non-negative terms).

Every formula is vectorised over all (record, dose) pairs of all subjects at once,
so a population's amounts cost a few dozen array nodes whatever its size.
"""

import numpy as np

from ..autodiff.var import Box, shape_of
from ..math.elementwise import exp, sqrt
from ..math.structure import stack
from .divdiff import divdiff_exp
from .dosing import as_numbers, value_check
from .solve import LinearKernel, solve_linear

__all__ = ["onecpt", "twocpt", "OneCptKernel", "TwoCptKernel"]


def _e(u, *rates):
    """Divided difference of x -> e^{-x u} at ``rates`` (0 for a pole at the origin),
    elementwise over the vector ``u``: ``u^m divdiff_exp([r_0 u, ..., r_m u])``."""
    m = len(rates) - 1
    if m == 0:
        return exp(-(rates[0] * u))
    zeros = None
    cols = []
    for r in rates:
        if isinstance(r, (int, float)) and r == 0:
            if zeros is None:
                zeros = np.zeros(shape_of(u))
            cols.append(zeros)
        else:
            cols.append(r * u)
    d = divdiff_exp(stack(cols, axis=-1))
    return d * u if m == 1 else d * u ** m


def _param(who, name, x, n_subjects, n_records=None):
    """A model parameter: a positive scalar, one value per subject or (with
    ``n_records``) one per record (:mod:`.per_record`)."""
    x = as_numbers(x, f"{who}: {name} must be a number or a vector of numbers")
    if not isinstance(x, Box) and x.ndim == 0:
        x = float(x)
    s = shape_of(x)
    if s not in ((), (n_subjects,)) and (n_records is None or s != (n_records,)):
        per_record = "" if n_records is None else \
            f" (one value per record, {n_records}, is accepted too)"
        raise ValueError(f"{who}: {name} must be a scalar or have one value per subject "
                         f"({n_subjects}), got shape {s}{per_record}")
    return x


def _by_record(events, params):
    """Whether some parameter has one value per record (and records are not
    subjects): then superposition does not apply (:mod:`.per_record`)."""
    R = events.n_records
    return R != events.n_subjects and any(shape_of(x) == (R,) for x in params)


def _at(x, s):
    """Per-subject parameter ``x`` at the subjects ``s`` of a batch of pairs."""
    return x if shape_of(x) == () else x[s]


class OneCptKernel(LinearKernel):
    """Closed-form responses of the one-compartment model (see the module docstring).

    ``CL, V, ka``: scalars or vectors over subjects (plain or traced)."""

    n_cmt = 2

    def __init__(self, CL, V, ka):
        self.k = CL / V
        self.ka = ka

    def bolus(self, u, c, s):
        k = _at(self.k, s)
        if c == 0:
            ka = _at(self.ka, s)
            return stack([_e(u, ka), -ka * _e(u, k, ka)], axis=1)
        return stack([np.zeros(shape_of(u)), _e(u, k)], axis=1)

    def infuse(self, u, c, s):
        k = _at(self.k, s)
        if c == 0:
            ka = _at(self.ka, s)
            return stack([-_e(u, 0, ka), ka * _e(u, 0, k, ka)], axis=1)
        return stack([np.zeros(shape_of(u)), -_e(u, 0, k)], axis=1)

    def ginf(self, c, s):
        k = _at(self.k, s)
        inv_k = 1.0 / k
        if c == 0:
            return _row([1.0 / _at(self.ka, s), inv_k], s)
        return _row([0.0, inv_k], s)


class TwoCptKernel(LinearKernel):
    """Closed-form responses of the two-compartment model (see the module docstring).

    ``CL, Q, V2, V3, ka``: scalars or vectors over subjects (plain or traced)."""

    n_cmt = 3

    def __init__(self, CL, Q, V2, V3, ka):
        k10 = CL / V2
        k12 = Q / V2
        k21 = Q / V3
        S = k10 + k12 + k21
        d = k10 - k21
        R = sqrt(d * d + k12 * (k12 + 2.0 * (k10 + k21)))
        self.alpha = 0.5 * (S + R)
        self.beta = 2.0 * k10 * k21 / (S + R)
        self.k10, self.k12, self.k21, self.ka = k10, k12, k21, ka

    def _rates(self, s):
        return (_at(self.alpha, s), _at(self.beta, s), _at(self.k10, s), _at(self.k12, s),
                _at(self.k21, s))

    def bolus(self, u, c, s):
        al, be, k10, k12, k21 = self._rates(s)
        if c == 0:
            ka = _at(self.ka, s)
            E3 = _e(u, be, al, ka)
            cent = ka * ((k21 - be) * E3 - _e(u, al, ka))
            return stack([_e(u, ka), cent, ka * k12 * E3], axis=1)
        E = _e(u, be, al)
        ea = _e(u, al)
        zero = np.zeros(shape_of(u))
        if c == 1:
            return stack([zero, ea - (k21 - be) * E, -k12 * E], axis=1)
        return stack([zero, -k21 * E, ea - (k10 + k12 - be) * E], axis=1)

    def infuse(self, u, c, s):
        al, be, k10, k12, k21 = self._rates(s)
        if c == 0:
            ka = _at(self.ka, s)
            E4 = _e(u, be, al, ka, 0)
            cent = -ka * ((k21 - be) * E4 - _e(u, al, ka, 0))
            return stack([-_e(u, 0, ka), cent, -ka * k12 * E4], axis=1)
        E = _e(u, be, al, 0)
        ea = _e(u, al, 0)
        zero = np.zeros(shape_of(u))
        if c == 1:
            return stack([zero, (k21 - be) * E - ea, k12 * E], axis=1)
        return stack([zero, k21 * E, (k10 + k12 - be) * E - ea], axis=1)

    def ginf(self, c, s):
        _, _, k10, k12, k21 = self._rates(s)
        cent = 1.0 / k10
        per = (k12 + k10) / (k10 * k21) if c == 2 else k12 / (k10 * k21)
        gut = 1.0 / _at(self.ka, s) if c == 0 else 0.0
        return _row([gut, cent, per], s)


def _row(entries, s):
    """Stack per-pair entries (scalars or vectors over the batch ``s``) into (P, n)."""
    P = len(s)
    cols = []
    for e in entries:
        if shape_of(e) == ():
            e = e * np.ones(P) if isinstance(e, Box) else np.full(P, float(e))
        cols.append(e)
    return stack(cols, axis=1)


def onecpt(events, CL, V, ka, F=None, tlag=None, infusion_rate=None,
           infusion_duration=None):
    """Amounts of the one-compartment model with first-order absorption at every record.

    Torsten's ``pmx_solve_onecpt`` (``theta = (CL, V2, ka)``): compartment 1 the gut
    (depot), 2 the central compartment, ``gut' = -ka gut``, ``cent' = ka gut - (CL/V)
    cent``. Returns an array ``(n_records, 2)`` of the amounts after each record's
    event (the transpose of Torsten's matrix); concentrations are ``cent / V``.

    Parameters
    ----------
    events : :class:`EventSchedule` (one or many subjects).
    CL, V, ka : clearance, volume, absorption rate constant; each a scalar, a
        vector with one value per subject, or one per record (Torsten's 2-D theta:
        row ``i`` holds on the interval ending at record ``i``; solved event by
        event, :mod:`stanlite.pk.per_record`); ``ka = 0``: no absorption.
    F, tlag : bioavailability and lag time per compartment: a scalar, a vector of 2,
        a matrix (subjects x 2) or (records x 2: the dose record's row). Default 1
        and 0.
    infusion_rate, infusion_duration : per compartment, for records with ``rate =
        -1`` (modelled rate) or ``-2`` (modelled duration).

    Everything may be traced (parameters), and so may the schedule's ``time, amt,
    rate, ii``: reverse and forward mode, to any order (Hessians). Closed forms
    (module docstring), superposed over doses (:mod:`stanlite.pk.solve`); steady
    states in closed form (:mod:`stanlite.pk.steady_state`).

    Example: a 100 mg oral dose; the central amount at 1 h is
    ``D ka / (ka - k) (e^{-k t} - e^{-ka t})``.

    >>> import numpy as np, stanlite as sl
    >>> ev = sl.pk.events(time=[0.0, 1.0, 4.0], evid=[1, 0, 0], amt=[100.0, 0, 0])
    >>> A = sl.pk.onecpt(ev, CL=5.0, V=50.0, ka=1.2)
    >>> A.round(4)
    array([[100.    ,   0.    ],
           [ 30.1194,  65.852 ],
           [  0.823 ,  72.228 ]])
    >>> k = 0.1; round(float(100 * 1.2 / (1.2 - k) * (np.exp(-k) - np.exp(-1.2))), 4)
    65.852
    """
    who = "onecpt"
    S, R = events.n_subjects, events.n_records
    ps = [_param(who, nm, x, S, R) for nm, x in (("CL", CL), ("V", V), ("ka", ka))]
    _positive(who, CL=CL, V=V)
    _positive(who, strict=False, ka=ka)
    return _solve(events, who, ps, "_OneCpt", OneCptKernel, F=F, tlag=tlag,
                  infusion_rate=infusion_rate, infusion_duration=infusion_duration)


def twocpt(events, CL, Q, V2, V3, ka, F=None, tlag=None, infusion_rate=None,
           infusion_duration=None):
    """Amounts of the two-compartment model with first-order absorption at every record.

    Torsten's ``pmx_solve_twocpt`` (``theta = (CL, Q, V2, V3, ka)``): compartments 1
    gut, 2 central, 3 peripheral (equations in the module docstring). Returns
    ``(n_records, 3)`` amounts after each record's event; parameters and options as
    in :func:`onecpt` (``F``, ``tlag`` per compartment: scalar, 3 or subjects x 3).

    Example: a 1000 mg bolus into the central compartment: the amounts decay
    bi-exponentially and mass is lost only by elimination.

    >>> import numpy as np, stanlite as sl
    >>> ev = sl.pk.events(time=[0.0, 2.0, 12.0], evid=[1, 0, 0], amt=[1000.0, 0, 0],
    ...                   cmt=[2, 2, 2])
    >>> sl.pk.twocpt(ev, CL=10.0, Q=15.0, V2=35.0, V3=105.0, ka=2.0).round(3)
    array([[   0.   , 1000.   ,    0.   ],
           [   0.   ,  285.244,  399.394],
           [   0.   ,   66.543,  308.853]])
    """
    who = "twocpt"
    S, R = events.n_subjects, events.n_records
    ps = [_param(who, nm, x, S, R) for nm, x in
          (("CL", CL), ("Q", Q), ("V2", V2), ("V3", V3), ("ka", ka))]
    _positive(who, CL=CL, Q=Q, V2=V2, V3=V3)
    _positive(who, strict=False, ka=ka)
    return _solve(events, who, ps, "_TwoCpt", TwoCptKernel, F=F, tlag=tlag,
                  infusion_rate=infusion_rate, infusion_duration=infusion_duration)


def _solve(events, who, ps, system, kernel, **dosing):
    """The amounts by the closed form ``kernel(*ps)``; with a parameter given per
    record, by the records' solve of the same model (``system``: its name in
    :mod:`.coupled`, which imports this module)."""
    if _by_record(events, ps):
        from . import coupled
        from .per_record import solve_per_record
        return solve_per_record(events, getattr(coupled, system), kernel, ps, who,
                                **dosing)
    return solve_linear(events, kernel(*ps), who, **dosing)


def _positive(who, strict=True, **params):
    from ..autodiff.var import guarded

    for name, x in params.items():
        fn = value_check(who, name, strict)
        # compiled interpreter: the same check as one instruction (autodiff/vm)
        fn._vm_guard = "check_positive" if strict else "check_nonnegative"
        guarded(fn, x)
