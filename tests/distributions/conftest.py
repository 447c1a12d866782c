"""Shared checks for every distribution: value against a scipy reference, gradient
against central differences w.r.t. every real argument (jointly and one at a time,
so that each partial is exercised alone), and nested AD (forward-mode JVP and the
forward-over-reverse Hessian) against differences of the gradient."""

import numpy as np
import pytest

import stanlite as sl


class DistributionChecks:
    @staticmethod
    def value(fn, ref, args, rtol=1e-10, atol=1e-10):
        """``fn(*args)`` equals the sum of the elementwise reference log density."""
        got = fn(*args)
        want = float(np.sum(ref(*args)))
        assert np.isfinite(got), f"{fn.__name__}{args} = {got}"
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol,
                                   err_msg=f"{fn.__name__} value")

    @staticmethod
    def _packed(fn, args, diff):
        shapes = [np.shape(args[i]) for i in diff]
        sizes = [int(np.prod(s, dtype=int)) for s in shapes]
        x0 = np.concatenate([np.ravel(np.asarray(args[i], dtype=float)) for i in diff])

        def f(x):
            a = list(args)
            k = 0
            for i, s, n in zip(diff, shapes, sizes):
                piece = x[k:k + n]
                a[i] = sl.reshape(piece, s) if s else piece[0]
                k += n
            return fn(*a)
        return f, x0

    @classmethod
    def grad(cls, fn, args, diff, rtol=1e-6, atol=1e-8):
        """Reverse-mode gradient w.r.t. ``args[i] for i in diff`` vs differences,
        jointly and for each argument alone."""
        for subset in [tuple(diff)] + ([(i,) for i in diff] if len(diff) > 1 else []):
            f, x0 = cls._packed(fn, args, subset)
            sl.assert_grad(f, x0, rtol=rtol, atol=atol)

    @classmethod
    def nested(cls, fn, args, diff, rtol=1e-5, atol=1e-6):
        """Forward mode (JVP) and the forward-over-reverse Hessian vs differences."""
        f, x0 = cls._packed(fn, args, tuple(diff))
        sl.assert_jvp(f, x0, rtol=rtol, atol=atol)
        sl.assert_hessian(f, x0, rtol=rtol, atol=atol)

    @classmethod
    def all(cls, fn, ref, args, diff, rtol=1e-10):
        cls.value(fn, ref, args, rtol=rtol)
        cls.grad(fn, args, diff)
        cls.nested(fn, args, diff)

    @classmethod
    def pointwise(cls, fn, ref, args, diff, rtol=1e-10):
        """``fn(*args, reduce=False)`` equals the elementwise reference (broadcast to
        its shape) and sums to ``fn(*args)``; the gradient of a weighted sum of it
        against differences."""
        out = fn(*args, reduce=False)
        want = np.broadcast_to(ref(*args), np.shape(out))
        np.testing.assert_allclose(out, want, rtol=rtol, atol=1e-10,
                                   err_msg=f"{fn.__name__} pointwise")
        np.testing.assert_allclose(np.sum(out), fn(*args), rtol=1e-12, atol=1e-12)
        w = np.random.default_rng(0).uniform(0.5, 1.5, np.shape(out))
        cls.grad(lambda *a: sl.sum(w * fn(*a, reduce=False)), args, diff,
                 rtol=1e-5, atol=1e-7)

    @staticmethod
    def domain(fn, args, i, bad, argname):
        """A bad value of argument ``i`` raises DomainError naming the argument."""
        a = list(args)
        a[i] = bad
        with pytest.raises(sl.DomainError, match=argname):
            fn(*a)


@pytest.fixture
def check():
    return DistributionChecks
