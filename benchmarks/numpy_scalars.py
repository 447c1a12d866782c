"""numpy scalar operands in a Stan-style loop (issue 19, point 14).

``self.y[t]`` in a loop is a ``numpy.float64``, not a Python float; the AD core must
treat both alike. This prints, in one run, the gradient of
``sum_t normal_lpdf(y[t] | mu, exp(log_sigma))`` written as a loop over numpy
scalars, as the same loop over Python floats, vectorised, and as a hand-written
numpy gradient, plus single operations with the scalar on either side. Ratios are
against the Python-float form of the same code.

    python benchmarks/numpy_scalars.py [--quick]
"""

import sys
import timeit

import numpy as np

import stanlite as sl


def best(fn, number, repeat=7):
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def loop_gradient(data):
    def f(th):
        mu, sigma = th[0], sl.exp(th[1])
        lp = 0.0
        for t in range(len(data)):
            lp = lp + sl.normal_lpdf(data[t], mu, sigma)
        return lp
    return sl.value_and_grad(f)


def hand_gradient(y):
    def g(th):
        mu, s = th[0], np.exp(th[1])
        z = (y - mu) / s
        lp = -0.5 * z @ z - y.size * (th[1] + 0.5 * np.log(2 * np.pi))
        return lp, np.array([z.sum() / s, z @ z - y.size])
    return g


def main(quick=False):
    n = 50 if quick else 200
    y = np.random.default_rng(0).normal(size=n)
    th = np.array([0.1, 0.2])
    f64, flt = loop_gradient(y), loop_gradient(y.tolist())
    vec = sl.value_and_grad(lambda t: sl.normal_lpdf(y, t[0], sl.exp(t[1])))
    hand = hand_gradient(y)
    for f in (f64, flt, vec):
        f(th)
    np.testing.assert_allclose(f64(th)[1], hand(th)[1], rtol=1e-10)
    reps = 20 if quick else 100
    t_flt = best(lambda: flt(th), reps)
    print(f"gradient of a {n}-term loop of normal_lpdf (us per gradient)")
    print(f"{'form':34s} {'us':>9s} {'/ float loop':>13s}")
    for name, fn in (("loop over numpy.float64 (y[t])", f64), ("loop over Python floats", flt),
                     ("vectorised normal_lpdf(y, ...)", vec), ("hand-written numpy gradient", hand)):
        t = t_flt if fn is flt else best(lambda: fn(th), reps)
        print(f"{name:34s} {t * 1e6:9.1f} {t / t_flt:12.2f}x")
    print(f"\nsingle operations on a traced scalar v (us per call)")
    print(f"{'operation':24s} {'numpy.float64':>14s} {'float':>8s} {'ratio':>7s}")
    k = 20000 if quick else 50000
    with sl.nested():
        v, s64, s = sl.Var(0.7), np.float64(2.0), 2.0
        for name, a, b in (("v * s", lambda: v * s64, lambda: v * s),
                           ("s * v", lambda: s64 * v, lambda: s * v),
                           ("v + s", lambda: v + s64, lambda: v + s),
                           ("s - v", lambda: s64 - v, lambda: s - v),
                           ("normal_lpdf(s, v, 1)", lambda: sl.normal_lpdf(s64, v, 1.0),
                            lambda: sl.normal_lpdf(s, v, 1.0))):
            ta, tb = best(a, k), best(b, k)
            del v.tape.nodes[1:]        # keep the tape short between measurements
            print(f"{name:24s} {ta * 1e6:14.3f} {tb * 1e6:8.3f} {ta / tb:6.2f}x")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
