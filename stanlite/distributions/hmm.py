"""Hidden Markov models with Stan's names: ``hmm_marginal`` (the log likelihood with
the hidden states summed out), ``hmm_hidden_state_prob`` and ``hmm_latent_rng``.

The model (Stan's convention): K hidden states, N observations;
``log_omega[k, n]`` = log p(y_n | z_n = k) (a K x N matrix of log emission
densities), ``Gamma[i, j]`` = p(z_{n+1} = j | z_n = i) (rows are simplexes),
``rho[k]`` = p(z_1 = k). Then

    hmm_marginal = log p(y) = log sum_z rho[z_1] omega[z_1, 1]
                              prod_{n >= 2} Gamma[z_{n-1}, z_n] omega[z_n, n].

Why one fused node: a loop of ``log_sum_exp`` nodes (the forward algorithm written
as a model) records N x K nodes; here the forward algorithm and the backward one
run once, on plain arrays, and their products are the partial derivatives
(Baum-Welch's smoothing identities). It lives among the distributions because it is
a log density, built with their :func:`.fused` machinery.

Scaled forward-backward (no underflow): with omega_n = exp(log_omega[:, n] - c_n),
c_n = max_k log_omega[k, n],

    a_1 = rho o omega_1 / s_1,   a_n = (Gamma^T a_{n-1}) o omega_n / s_n
    (s_n normalises a_n to sum 1),   log p = sum_n (log s_n + c_n);
    b_N = 1,   b_n = Gamma (omega_{n+1} o b_{n+1}) / s_{n+1}   (so a_n . b_n = 1);

    d log p / d log_omega[:, n] = a_n o b_n            (the posterior marginals)
    d log p / d Gamma           = sum_{n >= 2} a_{n-1} (omega_n o b_n)^T / s_n
    d log p / d rho             = omega_1 o b_1 / s_1.

The kernel is written with stanlite operations, so on traced values (Hessians,
reverse-over-reverse) the partials are themselves differentiated.
"""

import numpy as np

from .. import math as sm
from ..autodiff.var import shape_of, value_of
from ..errors import DomainError
from .discrete import SIMPLEX_TOL, _int_draws
from .fused import _fail, check_not_nan, fused, plain
from .rng import as_generator

__all__ = ["hmm_marginal", "hmm_hidden_state_prob", "hmm_latent_rng"]


# --------------------------------------------------------------------------------------
# argument checks (plain values)
# --------------------------------------------------------------------------------------
def _check_hmm(fn, log_omega, Gamma, rho):
    lo = np.asarray(log_omega, dtype=float)
    G = np.asarray(Gamma, dtype=float)
    r = np.asarray(rho, dtype=float)
    if lo.ndim != 2 or lo.shape[1] == 0:
        raise ValueError(f"{fn}: log_omega must be a K x N matrix with N >= 1 "
                         f"(states x observations), but has shape {lo.shape}")
    K = lo.shape[0]
    if G.shape != (K, K):
        raise ValueError(f"{fn}: Gamma must be a K x K matrix with K = {K} (the rows of "
                         f"log_omega), but has shape {G.shape}")
    if r.shape != (K,):
        raise ValueError(f"{fn}: rho must be a vector of size K = {K}, but has shape "
                         f"{r.shape}")
    check_not_nan(fn, "log_omega", lo)
    ok = G >= 0
    if not np.all(ok):
        _fail(fn, "Gamma", "non-negative (each row a simplex)", G, ~ok)
    rows = G.sum(axis=1)
    bad = ~(np.abs(rows - 1.0) <= SIMPLEX_TOL)
    if np.any(bad):
        i = int(np.argmax(bad))
        raise DomainError(f"{fn}: Gamma[{i}] (row {i + 1}) must be a simplex (sum to 1 "
                          f"within {SIMPLEX_TOL:g}), but sums to {float(rows[i])!r}")
    ok = r >= 0
    if not np.all(ok):
        _fail(fn, "rho", "non-negative (a simplex)", r, ~ok)
    s = float(r.sum())
    if not abs(s - 1.0) <= SIMPLEX_TOL:
        raise DomainError(f"{fn}: rho must be a simplex (sum to 1 within "
                          f"{SIMPLEX_TOL:g}), but sums to {s!r}")


def _check_marginal(log_omega, Gamma, rho):
    _check_hmm("hmm_marginal", log_omega, Gamma, rho)


# --------------------------------------------------------------------------------------
# forward and backward passes (stanlite operations: plain or traced values)
# --------------------------------------------------------------------------------------
def _forward(log_omega, Gamma, rho):
    """Scaled forward pass: (log p, [a_n], [s_n], omega as N x K rows)."""
    # the shift c_n is a constant (any c_n gives the same log p), taken from the values
    c = np.max(plain(log_omega), axis=0)
    c = np.where(np.isfinite(c), c, 0.0)    # a column of -inf: p(y) = 0, log p = -inf
    omega = sm.exp(sm.transpose(log_omega) - c[:, None])        # N x K
    N = len(c)
    a = rho * omega[0]
    s = sm.sum(a)
    a = a / s
    alphas, scales = [a], [s]
    for n in range(1, N):
        a = sm.matmul(a, Gamma) * omega[n]
        s = sm.sum(a)
        a = a / s
        alphas.append(a)
        scales.append(s)
    lp = sm.sum(sm.log(sm.stack(scales))) + float(np.sum(c))
    return lp, alphas, scales, omega


def _backward(Gamma, scales, omega):
    """Scaled backward pass: [b_n] with a_n . b_n = 1, and [omega_n o b_n / s_n]."""
    N = len(scales)
    betas = [None] * N
    weighted = [None] * N           # omega_n o b_n / s_n
    betas[N - 1] = np.ones(shape_of(omega)[1])
    for n in range(N - 1, -1, -1):
        w = omega[n] * betas[n] / scales[n]
        weighted[n] = w
        if n:
            betas[n - 1] = sm.matmul(Gamma, w)
    return betas, weighted


def _hmm(need, log_omega, Gamma, rho):
    # impossible observations (p(y) = 0) give log p = -inf and NaN partials, silently
    with np.errstate(divide="ignore", invalid="ignore"):
        return _hmm_partials(need, log_omega, Gamma, rho)


def _forward_np(log_omega, Gamma, rho):
    """:func:`_forward` on plain arrays (first order, the hot path): the same steps
    as numpy calls into preallocated arrays, without a stanlite call per step."""
    c = np.max(log_omega, axis=0)
    c = np.where(np.isfinite(c), c, 0.0)
    omega = np.exp(log_omega.T - c[:, None])
    N = omega.shape[0]
    alphas = np.empty_like(omega)
    scales = np.empty(N)
    ones = np.ones(omega.shape[1])
    a = rho * omega[0]
    for n in range(N):
        if n:
            a = (a @ Gamma) * omega[n]
        s = a @ ones            # a.sum(), without numpy's Python-level wrapper
        a = a / s
        alphas[n] = a
        scales[n] = s
    return float(np.sum(np.log(scales)) + np.sum(c)), alphas, scales, omega


def _backward_np(Gamma, scales, omega):
    N, K = omega.shape
    betas = np.empty_like(omega)
    weighted = np.empty_like(omega)
    b = np.ones(K)
    for n in range(N - 1, -1, -1):
        betas[n] = b
        w = omega[n] * b / scales[n]
        weighted[n] = w
        b = Gamma @ w
    return betas, weighted


def _hmm_partials(need, log_omega, Gamma, rho):
    if all(type(a) is np.ndarray for a in (log_omega, Gamma, rho)):
        lp, alphas, scales, omega = _forward_np(log_omega, Gamma, rho)
        if not any(need):
            return lp, [None, None, None]
        betas, weighted = _backward_np(Gamma, scales, omega)
        return lp, [(alphas * betas).T if need[0] else None,
                    alphas[:-1].T @ weighted[1:] if need[1] else None,
                    weighted[0] if need[2] else None]
    lp, alphas, scales, omega = _forward(log_omega, Gamma, rho)
    if not any(need):
        return lp, [None, None, None]
    betas, weighted = _backward(Gamma, scales, omega)
    parts = [None, None, None]
    if need[0]:
        parts[0] = sm.transpose(sm.stack(alphas) * sm.stack(betas))
    if need[1]:
        if len(alphas) > 1:
            parts[1] = sm.matmul(sm.transpose(sm.stack(alphas[:-1])),
                                 sm.stack(weighted[1:]))
        else:
            parts[1] = np.zeros(np.shape(plain(Gamma)))
    if need[2]:
        parts[2] = weighted[0]
    return lp, parts


hmm_marginal = fused("hmm_marginal", _hmm, _check_marginal)
hmm_marginal.__doc__ = """Log marginal likelihood of a hidden Markov model (Stan's
    ``hmm_marginal``): the hidden states summed out by the forward algorithm.

    log p(y) = log sum_z rho[z_1] omega[z_1, 1] prod_{n>=2} Gamma[z_{n-1}, z_n] omega[z_n, n]

    ``log_omega``: K x N log emission densities (``log_omega[k, n]`` = log p(y_n | z_n = k));
    ``Gamma``: K x K transition matrix, row i the distribution of the next state given
    state i (each row a simplex); ``rho``: the initial distribution (a K-simplex).
    Differentiable in all three (one fused node: forward and backward pass).

    >>> import numpy as np, stanlite as sl
    >>> G = np.array([[0.9, 0.1], [0.2, 0.8]])
    >>> lo = np.log(np.array([[0.5, 0.1], [0.2, 0.6]]))
    >>> round(float(sl.hmm_marginal(lo, G, np.array([0.5, 0.5]))), 6)
    -2.436116
    """


def _plain_args(fn, log_omega, Gamma, rho):
    args = [np.array(value_of(a), dtype=float) for a in (log_omega, Gamma, rho)]
    _check_hmm(fn, *args)
    return args


def hmm_hidden_state_prob(log_omega, Gamma, rho):
    """The K x N matrix of marginal posterior state probabilities
    ``p(z_n = k | y_1..y_N)`` (Stan's ``hmm_hidden_state_prob``; a plain array, for
    generated quantities). Columns sum to 1.

    >>> import numpy as np, stanlite as sl
    >>> G = np.array([[0.9, 0.1], [0.2, 0.8]])
    >>> lo = np.log(np.array([[0.5, 0.1], [0.2, 0.6]]))
    >>> sl.hmm_hidden_state_prob(lo, G, np.array([0.5, 0.5])).sum(axis=0)
    array([1., 1.])
    """
    lo, G, r = _plain_args("hmm_hidden_state_prob", log_omega, Gamma, rho)
    with np.errstate(all="ignore"):
        _lp, alphas, scales, omega = _forward_np(lo, G, r)
        betas, _w = _backward_np(G, scales, omega)
        return np.transpose(alphas * betas)


def hmm_latent_rng(log_omega, Gamma, rho, rng=None):
    """One draw of the hidden state sequence from its posterior given the
    observations (Stan's ``hmm_latent_rng``): an int array of N states in 1..K
    (1-based, as in Stan), by forward filtering, backward sampling.

    >>> import numpy as np, stanlite as sl
    >>> G = np.array([[0.9, 0.1], [0.2, 0.8]])
    >>> lo = np.log(np.array([[0.5, 0.1], [0.2, 0.6]]))
    >>> z = sl.hmm_latent_rng(lo, G, np.array([0.5, 0.5]), rng=1)
    >>> z.shape, set(z.tolist()) <= {1, 2}
    ((2,), True)
    """
    lo, G, r = _plain_args("hmm_latent_rng", log_omega, Gamma, rho)
    g = as_generator(rng)
    with np.errstate(all="ignore"):
        _lp, alphas, _s, _o = _forward_np(lo, G, r)
    N = len(alphas)
    z = np.empty(N, dtype=np.int64)
    p = alphas[-1]
    for n in range(N - 1, -1, -1):
        if n < N - 1:
            # p(z_n | z_{n+1}, y_1..y_n) is proportional to a_n o Gamma[:, z_{n+1}]
            p = alphas[n] * G[:, z[n + 1]]
        p = p / p.sum()
        if not np.all(np.isfinite(p)):
            raise DomainError("hmm_latent_rng: the observations have probability zero "
                              "under the model (log_omega, Gamma, rho)")
        z[n] = min(int(np.searchsorted(np.cumsum(p), g.random() * 1.0, side="right")),
                   len(p) - 1)
    return _int_draws(z + 1)
