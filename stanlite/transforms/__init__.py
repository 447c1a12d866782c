"""Constraint transforms: bijections from the unconstrained space onto constrained sets.

A constrained parameter (``real<lower=0>``, ``simplex[K]``, ``cov_matrix[K]``, ...) is
sampled on the unconstrained space R^n; the model sees ``y = constrain(x)`` and its log
density gains ``log |det J(x)|``, the change-of-measure term, so that a density that is
flat in ``x + log_jac`` is flat on the constrained set. The maps are the ones Stan's
reference manual defines in its chapter "Constraint Transforms" (deviations are listed
at the end of this docstring).

Every transform implements the same small interface (the model layer codes against it):

``name``
    short name (``"lower"``, ``"simplex"``, ...).
``free_size(shape)``
    number ``n`` of unconstrained reals for a constrained value of ``shape``.
``constrain(x, shape, *bounds) -> (y, log_jac)``
    ``x`` is a 1-D array or traced ``Var`` of length ``free_size(shape)``; ``y`` has
    ``shape`` (a float for ``shape == ()``); ``log_jac`` is the scalar
    ``log |det dy_free/dx|``. Written with stanlite operations, so it is differentiable
    in reverse mode and nested (forward-over-reverse: ``sl.hessian`` works through it).
    ``bounds`` are the evaluated bounds of the declaration, in the order of the
    transform's ``bound_names`` (floats, arrays broadcastable to ``shape``, or traced
    ``Var``s when a bound is a function of other parameters: the value is then
    differentiable with respect to the bound too). ``None`` stands for an absent bound;
    with no bounds passed at all, the numeric values given to :func:`make` are used.
``unconstrain(y, shape, *bounds) -> ndarray``
    the inverse map (plain floats, 1-D of length ``free_size(shape)``); raises
    :class:`stanlite.DomainError` if ``y`` is not in the constrained set.
``check(y, shape, *bounds) -> str | None``
    ``None`` if ``y`` is in the constrained set (with Stan's tolerance ``1e-8`` for
    simplex sums, unit lengths, unit diagonals and symmetry), else a short message.
    Element indices in messages are 0-based (Python), not Stan's 1-based ones.

Elementwise transforms (any shape: scalar, vector, matrix, array): :class:`Identity`,
:class:`Lower`, :class:`Upper`, :class:`LowerUpper`, :class:`OffsetMultiplier`.
Structured transforms (the constrained object is the trailing one or two axes of
``shape``; leading axes are an array of such objects, e.g. ``shape=(3, K)`` for three
simplexes): :class:`Simplex`, :class:`Ordered`, :class:`PositiveOrdered`,
:class:`UnitVector`, :class:`CholeskyFactorCorr`, :class:`CholeskyFactorCov`,
:class:`CorrMatrix`, :class:`CovMatrix`, :class:`SumToZero` (Stan 2.36's isometric
sum-to-zero vector), :class:`RowStochastic`, :class:`ColumnStochastic` (each row or
column a simplex). A declaration's ``array=`` dimensions are such leading axes: every
element of the array gets its own transform, computed for all elements at once, and
the log-Jacobian is the sum over them. :func:`make` picks the transform for a
declaration.

>>> import numpy as np, stanlite as sl
>>> from stanlite import transforms as T
>>> t = T.make("vector", lower=0.0)
>>> y, lj = t.constrain(np.array([0.0, np.log(2.0)]), (2,))
>>> y, float(lj)
(array([1., 2.]), 0.6931471805599453)
>>> t.unconstrain(y, (2,))
array([0.        , 0.69314718])
>>> t.check(np.array([1.0, -1.5]), (2,))
'must be >= 0, but element [1] is -1.5'

Deviations from Stan (all deliberate):

* the stick-breaking simplex transform is the one of Stan's reference manual up to
  version 2.35 (Stan 2.36 switched to an isometric-log-ratio transform);
* the correlation-matrix constrain returns an exactly symmetric matrix with an exactly
  unit diagonal, and the covariance-matrix one an exactly symmetric matrix;
* the free coordinates of ``row_stochastic_matrix`` are row by row (each row's
  ``M - 1`` together), not column-major as Stan's;
* the free coordinates of ``corr_matrix`` are ordered like those of
  ``cholesky_factor_corr`` (row-major over the strictly lower triangle, as the
  reference manual's figure), not column-major as Stan's ``read_corr_L``;
* unbounded values are checked only for NaN (infinite values pass, as they do for
  bounded ones at the open end);
* infinite bounds reduce to the one-sided or identity map *when the transform is
  evaluated*, element by element (a bound can be data or a parameter), so
  ``make("real", lower=0, upper=np.inf)`` is a :class:`LowerUpper` that behaves as
  :class:`Lower`.

Where things live: :mod:`.base` (the interface, the shared structured half, the
message helpers), :mod:`.bounded` (the elementwise transforms), :mod:`.vectors`
(simplex, ordered, unit and sum-to-zero vectors, stochastic matrices),
:mod:`.covariance` (correlation and covariance matrices and their Cholesky factors);
this module holds the registry of declaration kinds and :func:`make`, and re-exports
every class, so ``stanlite.transforms.X`` is the path to use (and the one pickles of
older models name).
"""

import numpy as np

from .base import (CONSTRAINT_TOLERANCE, Transform, _first, _idx, _is_numeric, _loc, _num,
                   _Structured, _ShapedStructured)  # noqa: F401  (pickles name them here)
from .bounded import (Identity, Lower, Upper, LowerUpper, OffsetMultiplier,
                      _Elementwise, _ShapedBounded, _shaped_identity)  # noqa: F401
from .vectors import (Simplex, Ordered, PositiveOrdered, UnitVector, SumToZero,
                      RowStochastic, ColumnStochastic)
from .covariance import CholeskyFactorCorr, CorrMatrix, CholeskyFactorCov, CovMatrix

__all__ = ["Transform", "Identity", "Lower", "Upper", "LowerUpper", "OffsetMultiplier",
           "Simplex", "Ordered", "PositiveOrdered", "UnitVector", "CholeskyFactorCorr",
           "CholeskyFactorCov", "CorrMatrix", "CovMatrix", "SumToZero", "RowStochastic",
           "ColumnStochastic", "make", "ELEMENTWISE_KINDS",
           "STRUCTURED_KINDS", "CONSTRAINT_TOLERANCE"]


# --------------------------------------------------------------------------------------
# the factory
# --------------------------------------------------------------------------------------
ELEMENTWISE_KINDS = ("real", "int", "vector", "row_vector", "matrix", "array")
STRUCTURED_KINDS = {
    "simplex": Simplex, "ordered": Ordered, "positive_ordered": PositiveOrdered,
    "unit_vector": UnitVector, "cholesky_factor_corr": CholeskyFactorCorr,
    "cholesky_factor_cov": CholeskyFactorCov, "corr_matrix": CorrMatrix,
    "cov_matrix": CovMatrix, "sum_to_zero_vector": SumToZero,
    "row_stochastic_matrix": RowStochastic,
    "column_stochastic_matrix": ColumnStochastic,
}


def make(kind, lower=None, upper=None, offset=None, multiplier=None):
    """The transform for a declaration of ``kind`` with the given bounds.

    ``kind`` is one of ``ELEMENTWISE_KINDS`` (bounds and offset/multiplier apply
    elementwise) or a structured kind (``"simplex"``, ``"ordered"``,
    ``"positive_ordered"``, ``"unit_vector"``, ``"cholesky_factor_corr"``,
    ``"cholesky_factor_cov"``, ``"corr_matrix"``, ``"cov_matrix"``,
    ``"sum_to_zero_vector"``, ``"row_stochastic_matrix"``,
    ``"column_stochastic_matrix"``), which take no
    bounds. Bounds may be numbers, arrays, or anything the caller evaluates later (a
    data name, a callable); they only decide the transform and serve as defaults.
    Numeric ``lower >= upper`` or a non-positive numeric multiplier raises ``ValueError``.

    >>> make("real", lower=0, upper=1)
    LowerUpper(lower=0, upper=1)
    >>> make("simplex")
    Simplex()
    >>> make("real", lower=2, upper=1)
    Traceback (most recent call last):
    ...
    ValueError: real: lower bound 2 must be less than upper bound 1
    """
    k = str(kind).lower()
    bounded = lower is not None or upper is not None
    affine = offset is not None or multiplier is not None
    if k in STRUCTURED_KINDS:
        if bounded or affine:
            raise ValueError(f"{k}: a {k} takes no lower/upper/offset/multiplier")
        return STRUCTURED_KINDS[k]()
    if k not in ELEMENTWISE_KINDS:
        raise ValueError(f"unknown kind {kind!r}; expected one of "
                         f"{ELEMENTWISE_KINDS + tuple(STRUCTURED_KINDS)}")
    if bounded and affine:
        raise ValueError(f"{k}: lower/upper cannot be combined with offset/multiplier")
    if lower is not None and upper is not None:
        if _is_numeric(lower) and _is_numeric(upper):
            lv, uv = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
            try:
                bad = ~(lv < uv)
            except ValueError:
                raise ValueError(f"{k}: lower bound of shape {lv.shape} and upper bound of "
                                 f"shape {uv.shape} do not broadcast")
            i = _first(bad)
            if i is not None:
                lb, ub = np.broadcast_arrays(lv, uv)
                at = f" at {_idx(i)}" if i else ""
                raise ValueError(f"{k}: lower bound {_num(lb[i])} must be less than upper "
                                 f"bound {_num(ub[i])}{at}")
        return LowerUpper(lower, upper)
    if lower is not None:
        return Lower(lower)
    if upper is not None:
        return Upper(upper)
    if affine:
        if multiplier is not None and _is_numeric(multiplier):
            mv = np.asarray(multiplier, dtype=float)
            i = _first(~(np.isfinite(mv) & (mv > 0)))
            if i is not None:
                raise ValueError(f"{k}: the multiplier must be positive and finite, but "
                                 f"{_loc(i)}is {_num(mv[i])}")
        return OffsetMultiplier(offset, multiplier)
    return Identity()
