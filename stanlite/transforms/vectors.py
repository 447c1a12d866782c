"""Constrained vectors, and matrices made of them: :class:`Simplex` (stick-breaking),
:class:`Ordered`, :class:`PositiveOrdered`, :class:`UnitVector`, :class:`SumToZero`
(Stan 2.36's isometric transform), :class:`RowStochastic` and
:class:`ColumnStochastic` (a simplex per row or column).

Each is a :class:`~stanlite.transforms.base._Structured`: ``_constrain`` maps the free
reals of every object of the array at once, ``_violation`` says why a value is not in
the set, ``_unconstrain`` is the inverse on plain arrays.
"""

from functools import lru_cache

import numpy as np

from ..autodiff.var import guarded
from ..errors import DomainError
from ..math import (concatenate, cumulative_sum, exp, log_inv_logit, log1m_inv_logit,
                    matmul, reshape, swapaxes)
from ..math import sum as _sum
from ..math import sqrt as _sqrt
from .base import (CONSTRAINT_TOLERANCE, _Structured, _first, _idx, _loc, _nan_message,
                   _num)


def _negative_message(v):
    """Message for the first negative element of ``v``, None if there is none."""
    i = _first(v < 0)
    return None if i is None else f"must be >= 0, but {_loc(i)}is {_num(v[i])}"


def _total_message(bad, s, want, total="the sum"):
    """Message for the first object whose total ``s`` (a sum, a squared norm) is off
    (``bad``): ``"<want>, but the sum at [i] is <s_i>"``; None if none is."""
    i = _first(bad)
    if i is None:
        return None
    at = f" at {_idx(i)}" if i else ""
    return f"{want}, but {total}{at} is {_num(s[i])}"


class _NonEmptyVector(_Structured):
    """A vector of at least one element (``core = 1``) with one free real fewer than
    elements by default: :class:`Simplex`, :class:`SumToZero` (and :class:`UnitVector`,
    which has as many)."""

    def _check_dims(self, dims):
        if dims[0] < 1:
            raise ValueError(f"{self.name}: needs at least 1 element")

    def _core_free(self, dims):
        return dims[0] - 1


class Simplex(_NonEmptyVector):
    """Stan's stick-breaking simplex: ``K - 1`` free reals for a ``K``-simplex.

    With ``z_k = inv_logit(x_k - log(K - k))`` (1-based ``k``), ``y_k = z_k`` times the
    stick left after the first ``k - 1`` breaks, ``y_K`` the stick left at the end;
    ``log_jac = sum_k log(z_k (1 - z_k) stick_k)`` (the Jacobian of the first ``K - 1``
    coordinates). ``x = 0`` maps to the centre ``1/K``.

    >>> import numpy as np
    >>> Simplex().constrain(np.zeros(3), (4,))[0]
    array([0.25, 0.25, 0.25, 0.25])
    """

    name = "simplex"

    def _constrain(self, x, batch, dims):
        K = dims[0]
        if K == 1:
            return np.ones(batch + (1,)), 0.0
        u = x - np.log(K - np.arange(1.0, K))
        lz = log_inv_logit(u)                              # log z_k
        cs = cumulative_sum(log1m_inv_logit(u), axis=-1)   # log stick after break k
        zero = np.zeros(batch + (1,))
        y = exp(concatenate([lz, zero], axis=-1) + concatenate([zero, cs], axis=-1))
        return y, _sum(lz + cs)

    def _violation(self, v, dims):
        msg = _nan_message(v) or _negative_message(v)
        if msg:
            return msg
        s = np.sum(v, axis=-1)
        return _total_message(np.abs(s - 1.0) > CONSTRAINT_TOLERANCE, s,
                              f"must sum to 1 (within {CONSTRAINT_TOLERANCE:g})")

    def _unconstrain(self, v, dims):
        K = dims[0]
        tail = np.cumsum(v[..., ::-1], axis=-1)[..., ::-1]     # sum_{j >= k} y_j
        return (np.log(v[..., :-1]) - np.log(tail[..., 1:])
                + np.log(K - np.arange(1.0, K)))


class Ordered(_Structured):
    """``y_1 = x_1``, ``y_k = y_{k-1} + exp(x_k)``; ``log_jac = sum_{k >= 2} x_k``.

    >>> import numpy as np
    >>> Ordered().constrain(np.array([1.0, 0.0, 0.0]), (3,))[0]
    array([1., 2., 3.])
    """

    name = "ordered"
    _positive = False

    def _core_free(self, dims):
        return dims[0]

    def _constrain(self, x, batch, dims):
        if dims[0] == 0:
            return x, 0.0
        if self._positive:
            return cumulative_sum(exp(x), axis=-1), _sum(x)
        if batch:
            first, rest = x[..., :1], x[..., 1:]
        else:                                   # one vector: plain slices (cheaper)
            first, rest = x[:1], x[1:]
        steps = concatenate([first, exp(rest)], axis=-1)
        return cumulative_sum(steps, axis=-1), _sum(rest)

    def _violation(self, v, dims):
        msg = _nan_message(v)
        if msg:
            return msg
        if self._positive:
            msg = _negative_message(v[..., :1])
            if msg:
                return msg
        d = np.diff(v, axis=-1)
        i = _first(~(d > 0))
        if i is not None:
            j = i[:-1] + (i[-1] + 1,)
            return (f"must be strictly increasing, but {_loc(j)}is {_num(v[j])} after "
                    f"{_loc(i)}= {_num(v[i])}")
        return None

    def _unconstrain(self, v, dims):
        if self._positive:
            return np.log(np.concatenate([v[..., :1], np.diff(v, axis=-1)], axis=-1))
        return np.concatenate([v[..., :1], np.log(np.diff(v, axis=-1))], axis=-1)


class PositiveOrdered(Ordered):
    """``y_1 = exp(x_1)``, ``y_k = y_{k-1} + exp(x_k)``; ``log_jac = sum(x)``."""

    name = "positive_ordered"
    _positive = True


def _check_direction(r2):
    if _first(np.asarray(r2) == 0) is not None:
        raise DomainError("unit_vector: the unconstrained vector is all zeros, so it "
                          "has no direction")


class UnitVector(_NonEmptyVector):
    """``y = x / ||x||`` with the log "Jacobian" ``-||x||^2 / 2``, as Stan.

    This is **not** a bijection: ``K`` free reals map onto the ``K - 1``-dimensional
    sphere, and every ray gives the same point. The term is the log density of a
    standard normal ``x`` (up to a constant), whose direction is uniform on the sphere:
    it makes the radius proper so that a flat density in ``y`` is sampled correctly.
    ``unconstrain`` returns ``y`` itself (the point of norm 1 on its ray). ``x = 0`` has
    no direction and raises :class:`stanlite.DomainError`.

    >>> import numpy as np
    >>> y, lj = UnitVector().constrain(np.array([3.0, 4.0]), (2,))
    >>> y, lj
    (array([0.6, 0.8]), -12.5)
    """

    name = "unit_vector"

    def _core_free(self, dims):
        return dims[0]

    def _constrain(self, x, batch, dims):
        sq = x * x
        r2 = _sum(sq, axis=-1, keepdims=True)
        guarded(_check_direction, r2)
        return x / _sqrt(r2), -0.5 * _sum(r2)

    def _violation(self, v, dims):
        msg = _nan_message(v)
        if msg:
            return msg
        s = np.sum(v * v, axis=-1)
        return _total_message(~(np.abs(s - 1.0) <= CONSTRAINT_TOLERANCE), s,
                              f"must have unit length (within {CONSTRAINT_TOLERANCE:g} on "
                              f"the squared norm)", "the squared norm")

    def _unconstrain(self, v, dims):
        return v


# --------------------------------------------------------------------------------------
# sum-to-zero vectors and stochastic matrices
# --------------------------------------------------------------------------------------
@lru_cache(maxsize=64)
def _zero_sum_basis(K):
    """The ``(K - 1) x K`` matrix whose rows are an orthonormal basis of the vectors
    summing to zero (Stan 2.36's "pivot coordinates"): row ``i`` (1-based) holds
    ``1/sqrt(i(i+1))`` in its first ``i`` places, ``-i/sqrt(i(i+1))`` in place
    ``i + 1`` and zeros after."""
    B = np.zeros((max(K - 1, 0), K))
    for i in range(1, K):
        a = 1.0 / np.sqrt(i * (i + 1.0))
        B[i - 1, :i] = a
        B[i - 1, i] = -i * a
    B.setflags(write=False)
    return B


class SumToZero(_NonEmptyVector):
    """Stan's ``sum_to_zero_vector[K]`` (Stan 2.36's isometric transform): ``K - 1``
    free reals are the coordinates of ``y`` in the orthonormal basis of the
    hyperplane ``sum(y) = 0`` given by :func:`_zero_sum_basis`, ``y = x B``. The map
    is linear and an isometry onto the hyperplane, so ``log_jac = 0`` (as in Stan):
    a standard normal on ``x`` is a normal on ``y`` with marginal variances
    ``(K - 1) / K``.

    >>> import numpy as np
    >>> y, lj = SumToZero().constrain(np.array([1.0, 2.0]), (3,))
    >>> round(float(y.sum()), 12), lj
    (0.0, 0.0)
    """

    name = "sum_to_zero_vector"

    def _constrain(self, x, batch, dims):
        K = dims[0]
        if K == 1:
            return np.zeros(batch + (1,)), 0.0
        return matmul(x, _zero_sum_basis(K)), 0.0

    def _violation(self, v, dims):
        msg = _nan_message(v)
        if msg:
            return msg
        s = np.sum(v, axis=-1)
        return _total_message(~(np.abs(s) <= CONSTRAINT_TOLERANCE), s,
                              f"must sum to 0 (within {CONSTRAINT_TOLERANCE:g})")

    def _unconstrain(self, v, dims):
        return v @ _zero_sum_basis(dims[0]).T


class RowStochastic(_Structured):
    """Stan's ``row_stochastic_matrix[N, M]``: each row a simplex (the
    :class:`Simplex` transform per row, all rows at once), ``N (M - 1)`` free reals,
    row by row (each row's ``M - 1`` together; Stan orders them column-major);
    ``log_jac`` is the sum of the rows' simplex terms.

    >>> import numpy as np
    >>> RowStochastic().constrain(np.zeros(2), (2, 2))[0]
    array([[0.5, 0.5],
           [0.5, 0.5]])
    """

    name = "row_stochastic_matrix"
    core = 2
    _simplex = Simplex()

    def _check_dims(self, dims):
        if dims[1] < 1:
            raise ValueError(f"{self.name}: needs at least 1 column")

    def _core_free(self, dims):
        return dims[0] * (dims[1] - 1)

    def _constrain(self, x, batch, dims):
        N, M = dims
        return self._simplex._constrain(reshape(x, batch + (N, M - 1)), batch + (N,),
                                        (M,))

    def _violation(self, v, dims):
        return _stochastic_message(v, -1, "row")

    def _unconstrain(self, v, dims):
        return self._simplex._unconstrain(v, (dims[1],))


class ColumnStochastic(RowStochastic):
    """Stan's ``column_stochastic_matrix[N, M]``: each column a simplex, ``(N - 1) M``
    free reals, column by column (as Stan's column-major order); the simplex
    transform on the transpose."""

    name = "column_stochastic_matrix"

    def _check_dims(self, dims):
        if dims[0] < 1:
            raise ValueError(f"{self.name}: needs at least 1 row")

    def _core_free(self, dims):
        return (dims[0] - 1) * dims[1]

    def _constrain(self, x, batch, dims):
        N, M = dims
        y, lj = self._simplex._constrain(reshape(x, batch + (M, N - 1)), batch + (M,),
                                         (N,))
        return swapaxes(y, -1, -2), lj

    def _violation(self, v, dims):
        return _stochastic_message(v, -2, "column")

    def _unconstrain(self, v, dims):
        return self._simplex._unconstrain(np.swapaxes(v, -1, -2), (dims[0],))


def _stochastic_message(v, axis, what):
    """Why ``v`` is not row- (``axis=-1``) or column- (``axis=-2``) stochastic."""
    msg = _nan_message(v) or _negative_message(v)
    if msg:
        return msg
    s = np.sum(v, axis=axis)
    i = _first(np.abs(s - 1.0) > CONSTRAINT_TOLERANCE)
    if i is None:
        return None
    # i indexes the batch and then the row (column) whose sum is off
    where = f"{what} {i[-1]}" + (f" of {_idx(i[:-1])}" if len(i) > 1 else "")
    return (f"must have each {what} sum to 1 (within {CONSTRAINT_TOLERANCE:g}), but "
            f"{where} sums to {_num(s[i])}")
