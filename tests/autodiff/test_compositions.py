"""Random compositions of primitives (hypothesis) checked against finite differences.

A program is a list of steps applied to a stack of vectors of length 4; each step is
a unary or binary primitive, an indexing/reshaping move, a constant matrix product or
a reduction. Inputs stay in a bounded box and the unary steps are kept smooth and
bounded, so every generated program is differentiable where it is evaluated.
"""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stanlite as sl

N = 4
_M = np.random.default_rng(7).standard_normal((N, N)) / 2.0

UNARY = {
    "sin": sl.sin,
    "cos": sl.cos,
    "exp_scaled": lambda v: sl.exp(0.3 * v),
    "square_damped": lambda v: v * v / (1.0 + v * v),
    "log_1p_sq": lambda v: sl.log(1.0 + v * v),
    "sqrt_1p_sq": lambda v: sl.sqrt(1.0 + v * v),
    "neg": lambda v: -v,
    "abs_smooth": lambda v: sl.sqrt(v * v + 0.5),
    "reverse": lambda v: v[::-1],
    "roll": lambda v: sl.concatenate([v[1:], v[:1]]),
    "gather": lambda v: v[np.array([0, 0, 2, 3])],
    "matvec": lambda v: _M @ v,
    "vecmat": lambda v: v @ _M,
    "center": lambda v: v - sl.mean(v),
    "outer_diag": lambda v: sl.sum(sl.reshape(v, (N, 1)) * sl.reshape(v, (1, N)), axis=0) / N,
    # branches that agree to second order at the switch (inputs often sit exactly on it)
    "where": lambda v: sl.where(v > 0, sl.sin(v), v - v * v * v / 6.0),
    "stack_sum": lambda v: sl.sum(sl.stack([v, 2.0 * v]), axis=0),
}
BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / (1.5 + b * b),
    "pow": lambda a, b: (1.0 + a * a) ** (0.5 * sl.sin(b)),
    "bcast_scalar": lambda a, b: a * sl.sum(b) / N,
}

step = st.one_of(
    st.tuples(st.just("u"), st.sampled_from(sorted(UNARY))),
    st.tuples(st.just("b"), st.sampled_from(sorted(BINARY))),
)


def run(program, x):
    stack = [x, sl.sin(x) * 0.5]
    for kind, name in program:
        if kind == "u":
            stack.append(UNARY[name](stack[-1]))
        else:
            stack.append(BINARY[name](stack[-1], stack[-2]))
    return sl.sum(stack[-1] * stack[-1]) + sl.sum(stack[-2])


@settings(max_examples=120, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(program=st.lists(step, min_size=1, max_size=8),
       x=st.lists(st.floats(-1.5, 1.5), min_size=N, max_size=N))
def test_random_programs_match_finite_differences(program, x):
    x = np.array(x)
    r = sl.check_grad(lambda v: run(program, v), x, rtol=1e-5, atol=1e-7)
    assert r.passed, (program, r)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(program=st.lists(step, min_size=1, max_size=5),
       x=st.lists(st.floats(-1.0, 1.0), min_size=N, max_size=N))
def test_random_programs_second_order(program, x):
    # the gradient program (a recorded backward sweep) is itself differentiable
    x = np.array(x)
    r = sl.check_grad(lambda v: sl.grad(lambda w: run(program, w))(v), x,
                      rtol=1e-5, atol=1e-6)
    assert r.passed, (program, r)
