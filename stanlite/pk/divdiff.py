"""Divided differences of the exponential: the one primitive the closed forms need.

Every amount in a linear compartment model is an inverse Laplace transform
``p(s) / prod_i (s + lambda_i)``, and by partial fractions that is a *divided
difference* of ``x -> p(-x) e^{-x t}`` at the rates ``lambda_i`` (Leibniz's rule
splits it into divided differences of ``e^{-x t}`` alone). Written as divided
differences the closed forms have no ``1 / (ka - ke)`` that blows up when two rates
meet: the divided difference is an entire function of its nodes, equal rates included.

``divdiff_exp(Y)`` is ``g[y_0, ..., y_n]`` for ``g(y) = e^{-y}``, over the last axis of
``Y`` (a stack of node sets). Its derivatives are divided differences again
(de Boor 2005, "Divided differences", Surveys in Approximation Theory 1, eq. (27)):

    d g[y_0, ..., y_n] / d y_i = g[y_0, ..., y_n, y_i]     (y_i repeated),

so the VJP and the JVP call ``divdiff_exp`` itself on one more node, written with
stanlite operations: Hessians (and higher derivatives) nest without further work.

Evaluation on plain floats (McCurdy, Ng & Parlett 1984, "Accurate computation of
divided differences of the exponential function", Math. Comp. 43):

* one node: ``e^{-y}``; two nodes: ``-e^{-lo} (1 - e^{-d}) / d`` with ``lo`` the
  smaller node and ``d >= 0`` the spread, by ``expm1`` (exact to rounding, 1 at d = 0);
* three nodes: sorted and shifted to (0, a, D), the recursion ``(g[a, D] - g[0, a])
  / D`` for ``D >= 1`` (no cancellation there), the Taylor series in the complete
  homogeneous polynomials below; four nodes: the recursion on exact three-node
  terms for a spread >= 1;
* otherwise: Opitz's formula ``g(J)[0, n] = g[y_0..y_n]`` for the bidiagonal matrix
  ``J`` with the nodes on the diagonal and ones above it. The nodes are shifted by
  their minimum (a factor ``e^{-lo}``) and scaled by ``2^-s`` into [0, 1/2]; the
  exponential of the scaled matrix comes from its Taylor series, and ``s`` squarings
  undo the scaling. Every entry ``[i, j]`` of these matrices is a divided difference
  of order ``j - i`` of ``e^{-y}``, of sign ``(-1)^{j-i}``, so all terms of a squaring
  have the same sign: no cancellation, relative accuracy of a few ulps per squaring,
  whatever the spacing of the nodes (equal, close or far apart).
"""

import math

import numpy as np

from ..autodiff.extend import broadcast_to, defjvp, defvjp, primitive
from ..autodiff.var import Box, shape_of
from ..math.reductions import sum as _sum
from ..math.structure import concatenate, expand_dims

__all__ = ["divdiff_exp"]



def _dd2(y0, y1):
    """g[y0, y1] for g(y) = e^{-y}, elementwise, stable for equal or close nodes."""
    lo = np.minimum(y0, y1)
    d = np.abs(np.atleast_1d(y1 - y0))
    return (-np.exp(-lo) * _m0(d)).reshape(np.shape(lo))


def _m0(x):
    """(1 - e^{-x}) / x for x >= 0 (1 at 0; called under errstate(all="ignore"))."""
    r = np.expm1(-x)
    r /= -x
    r[x == 0] = 1.0
    return r


def _dd3(Z):
    """g[z_0, z_1, z_2] for rows ``Z`` (k, 3) of finite nodes. Sorted and shifted to
    (0, a, D): for a spread D >= 1 the recursion (g[a, D] - g[0, a]) / D, whose two
    terms (exact, by expm1) do not cancel there; below, the Taylor series in the
    complete homogeneous polynomials, g[0, a, D] = sum_q (-1)^q h_q(a, D) / (q + 2)!
    (all terms < (q + 1) / (q + 2)!: 20 of them reach the rounding level)."""
    y0, y1, y2 = Z[:, 0], Z[:, 1], Z[:, 2]
    lo01 = np.minimum(y0, y1)
    hi01 = np.maximum(y0, y1)
    z0 = np.minimum(lo01, y2)
    mid = np.maximum(lo01, np.minimum(hi01, y2))
    a = mid - z0
    D = np.maximum(hi01, y2) - z0
    big = D >= 1.0
    nbig = int(np.count_nonzero(big))
    if nbig == len(D):
        out = (_m0(a) - np.exp(-a) * _m0(D - a)) / D
    else:
        out = np.empty(len(D))
        if nbig:
            ab, Db = a[big], D[big]
            out[big] = (_m0(ab) - np.exp(-ab) * _m0(Db - ab)) / Db
        small = ~big
        a_s, D_s = a[small], D[small]
        h = np.ones(len(a_s))               # h_0
        apow = np.ones(len(a_s))
        acc = h / 2.0
        fact = 2.0
        for q in range(1, 21):
            apow = apow * a_s
            h = D_s * h + apow              # h_q(a, D) = D h_{q-1}(a, D) + a^q
            fact *= q + 2
            acc = acc + ((-1.0) ** q / fact) * h
        out[small] = acc
    return np.exp(-z0) * out


def _dd4(Z):
    """g[z_0..z_3]: for a spread >= 1 the recursion (g[z_1..z_3] - g[z_0..z_2]) /
    (z_3 - z_0) on sorted nodes, whose three-node terms are exact (``_dd3``) and do not
    cancel there (checked against 50-digit arithmetic, including clusters); else the
    matrix method."""
    Z = np.sort(Z, axis=1)
    D = Z[:, 3] - Z[:, 0]
    big = D >= 1.0
    if not big.any():
        return _dd_matrix(Z)
    out = np.empty(len(Z))
    Zb = Z[big] if not big.all() else Z
    out[big] = (_dd3(Zb[:, 1:]) - _dd3(Zb[:, :3])) / D[big]
    if not big.all():
        out[~big] = _dd_matrix(Z[~big])
    return out


def _dd_matrix(Z):
    """g[z_0..z_n] for rows ``Z`` (k, n+1) of finite nodes, by the scaled and squared
    Taylor series of the bidiagonal matrix (see the module docstring)."""
    k, m = Z.shape
    lo = Z.min(axis=1)
    Z = Z - lo[:, None]
    spread = float(Z.max()) if Z.size else 0.0
    s = max(0, math.ceil(math.log2(spread / 0.5))) if spread > 0.5 else 0
    h = math.ldexp(1.0, -s)
    # B = -J / 2^s (diagonal -z h, superdiagonal -h); Horner's scheme for
    # I + B (I + B/2 (I + B/3 ...)), with B T computed from B's two diagonals:
    # (B T)[i, :] = -w_i T[i, :] - h T[i + 1, :]. The scaled nodes w are <= 1/2: the
    # tail of the series after 12 + 2m terms is below 1e-20 of every entry.
    w = (-Z * h)[:, :, None]
    eye = np.eye(m)
    T = np.broadcast_to(eye, (k, m, m)).copy()
    for j in range(12 + 2 * m, 0, -1):
        BT = T * w
        BT[:, :-1, :] -= h * T[:, 1:, :]
        BT *= 1.0 / j
        BT += eye
        T = BT
    for _ in range(s):
        T = T @ T
    return np.exp(-lo) * T[:, 0, m - 1]


def _divdiff_raw(Y):
    Y = np.asarray(Y, dtype=np.float64)
    if Y.ndim == 0 or Y.shape[-1] == 0:
        raise ValueError(f"divdiff_exp: Y must have at least one node on its last axis, "
                         f"got shape {Y.shape}")
    with np.errstate(all="ignore"):       # overflow/underflow: the value says so
        out = _divdiff_values(Y)
    return float(out) if np.ndim(out) == 0 else out


def _divdiff_values(Y):
    m = Y.shape[-1]
    lead = Y.shape[:-1]
    if m == 1:
        out = np.exp(-Y[..., 0])
    elif m == 2:
        out = _dd2(Y[..., 0], Y[..., 1])
    else:
        Z = Y.reshape(-1, m)
        flat = np.full(Z.shape[0], np.nan)
        ok = np.isfinite(Z).all(axis=1)
        fn = _dd3 if m == 3 else _dd4 if m == 4 else _dd_matrix
        if ok.all():
            flat = fn(Z)
        elif ok.any():
            flat[ok] = fn(Z[ok])
        out = flat.reshape(lead)
    return out


_divdiff = primitive(_divdiff_raw, name="divdiff_exp")


def _extended(Y):
    """``E[..., i] = g[y_0..y_n, y_i]``: the partial derivatives, as divided
    differences with node i repeated (written in stanlite operations: nests)."""
    s = shape_of(Y)
    m = s[-1]
    rows = broadcast_to(expand_dims(Y, -2), s[:-1] + (m, m))
    return _divdiff(concatenate([rows, expand_dims(Y, -1)], axis=-1))


defvjp(_divdiff, lambda g, ans, Y: expand_dims(g, -1) * _extended(Y))
defjvp(_divdiff, lambda t, ans, Y: _sum(t * _extended(Y), axis=-1))


def divdiff_exp(Y):
    """Divided differences ``g[y_0, ..., y_n]`` of ``g(y) = e^{-y}`` over the last axis.

    ``Y`` has shape ``(..., n + 1)`` (plain or traced); the result has shape ``(...)``.
    The divided difference is symmetric in the nodes and entire: equal nodes give the
    confluent (Hermite) value ``g^{(n)}(y) / n!``, e.g. ``g[y, y] = -e^{-y}``. The sign
    is ``(-1)^n``. Derivatives (any order, reverse and forward mode) are divided
    differences with the differentiated node repeated (module docstring).

    In pharmacokinetics, ``t^n divdiff_exp([l_0 t, ..., l_n t])`` is the divided
    difference of ``x -> e^{-x t}`` at the rates ``l_i``: for instance the central
    amount after a unit oral dose in the one-compartment model,
    ``ka / (ka - ke) (e^{-ke t} - e^{-ka t})``, is ``-ka t divdiff_exp([ke t, ka t])``,
    and stays exact at ``ka = ke`` (where it is ``ka t e^{-ka t}``).

    Example
    -------
    >>> import numpy as np, stanlite as sl
    >>> float(sl.pk.divdiff_exp(np.array([0.0, 1.0])))      # e^-1 - 1
    -0.6321205588285577
    >>> float(sl.pk.divdiff_exp(np.array([2.0, 2.0, 2.0])))  # g''(2) / 2 = e^-2 / 2
    0.06766764161830635
    >>> ka, ke, t = 1.0, 1.0, 2.0                            # equal rates
    >>> round(float(-ka * t * sl.pk.divdiff_exp(np.array([ke * t, ka * t]))), 12)
    0.270670566473
    """
    s = shape_of(Y)
    if len(s) == 0 or s[-1] == 0:
        raise ValueError(f"divdiff_exp: Y must have at least one node on its last axis, "
                         f"got shape {s}")
    if not isinstance(Y, (Box, np.ndarray)):
        Y = np.asarray(Y, dtype=np.float64)
    return _divdiff(Y)
