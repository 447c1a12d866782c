"""Regenerate the simulated default data sets of the zoo (run once; the JSON is shipped).

    python models/data/make_data.py

Writes ``logistic_regression.json``, ``radon.json``, ``garch.json`` and
``neal_funnel.json`` next to this file. Each data set is simulated from the model it
belongs to with a fixed seed and the "true" values given below, so re-running this
script reproduces the shipped files byte for byte (numpy's PCG64 stream is stable).
The other data files are copied from posteriordb (see README).
"""

import json
import pathlib

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent


def _round(a, digits=6):
    return [round(float(v), digits) for v in np.ravel(a)]


def logistic_regression(seed=20240501):
    """N = 200 observations, K = 3 standardised covariates; alpha = -0.5,
    beta = (1.0, -0.75, 0.4); y ~ Bernoulli(inv_logit(alpha + X beta))."""
    rng = np.random.default_rng(seed)
    N, K = 200, 3
    X = rng.standard_normal((N, K))
    alpha, beta = -0.5, np.array([1.0, -0.75, 0.4])
    p = 1.0 / (1.0 + np.exp(-(alpha + X @ beta)))
    y = (rng.random(N) < p).astype(int)
    X = np.round(X, 6)
    return {"N": N, "K": K, "X": [_round(r) for r in X], "y": [int(v) for v in y]}


def radon(seed=20240502):
    """A radon-like survey: J = 30 counties with unequal numbers of houses (1 to ~40,
    N = 350 in all); floor_measure = 0 (basement) or 1 (first floor, ~20% of houses);
    log_radon = alpha[county] + beta * floor + N(0, sigma_y), with
    alpha[j] ~ N(mu_alpha = 1.5, sigma_alpha = 0.35), beta = -0.65, sigma_y = 0.75
    (close to the values fitted to the Minnesota radon survey of Gelman & Hill)."""
    rng = np.random.default_rng(seed)
    J, N = 30, 350
    weights = rng.lognormal(0.0, 1.0, J)
    counts = np.ones(J, dtype=int)                       # every county has a house
    counts += rng.multinomial(N - J, weights / weights.sum())
    county = np.repeat(np.arange(1, J + 1), counts)
    floor = (rng.random(N) < 0.2).astype(float)
    alpha = rng.normal(1.5, 0.35, J)
    log_radon = alpha[county - 1] - 0.65 * floor + rng.normal(0.0, 0.75, N)
    return {"J": J, "N": N, "county_idx": [int(c) for c in county],
            "floor_measure": _round(floor), "log_radon": _round(log_radon)}


def garch(seed=20240503):
    """T = 200 returns from a GARCH(1,1): y_t = mu + sigma_t eps_t, eps_t ~ N(0, 1),
    sigma_t^2 = alpha0 + alpha1 (y_{t-1} - mu)^2 + beta1 sigma_{t-1}^2, with mu = 0.3,
    alpha0 = 0.1, alpha1 = 0.25, beta1 = 0.65 and sigma_1 = 1 (the stationary sd)."""
    rng = np.random.default_rng(seed)
    T, mu, a0, a1, b1, sigma1 = 200, 0.3, 0.1, 0.25, 0.65, 1.0
    y = np.empty(T)
    s = sigma1
    for t in range(T):
        if t > 0:
            s = np.sqrt(a0 + a1 * (y[t - 1] - mu) ** 2 + b1 * s ** 2)
        y[t] = mu + s * rng.standard_normal()
    return {"T": T, "y": _round(y), "sigma1": sigma1}


def neal_funnel():
    """No observations: only the dimension (v plus D - 1 coordinates x)."""
    return {"D": 10}


def main():
    for name, make in (("logistic_regression", logistic_regression), ("radon", radon),
                       ("garch", garch), ("neal_funnel", neal_funnel)):
        write(HERE / f"{name}.json", make())


def write(path, data):
    """One field per line (diff-friendly, still small)."""
    body = ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in data.items())
    with open(path, "w") as f:
        f.write("{\n" + body + "\n}\n")


if __name__ == "__main__":
    main()
