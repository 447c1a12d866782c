"""Lowering recordings to the compiled interpreter (stanlite/autodiff/vm/program.py):
data movement, segment sums, guards, domain errors and non-finite results.

Data movement (every indexing form numpy has, stacking, concatenation, reshaping,
transposition, where, broadcast_to) lowers to one GATHER found by running the
primitive on slot numbers; scatter_add and sums along axes to a segment sum. Each case
runs in the interpreter (asserted) and equals the eager tape to rounding and central
differences. Guards: a decision that flips at a new point makes the program report
its guard and the point is recorded again; a value outside an argument's domain inside
the kernel and a non-finite log density are decided by the eager tape - the same
DomainError, the same inf/NaN.
"""

import warnings

import numpy as np
import pytest

import stanlite as sl
from stanlite.autodiff.var import guarded
from stanlite.autodiff.vm import opcodes as O
from stanlite.autodiff.vm.program import guard_lowering as _guard_lowering

X0 = np.array([0.7, -1.3, 0.4, 2.1, -0.6, 1.5])
MASK = np.array([True, False, True, True, False, True])
MASK23 = MASK.reshape(2, 3)
W = np.linspace(0.5, 1.7, 12)


def _pts(k=3, seed=5):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-2, 2, 6) for _ in range(k)]


def _wsum(r):
    """A weighted sum of ``r`` (each element a different weight: a wrong element in a
    gather changes the gradient)."""
    shape = tuple(getattr(r, "shape", ()))
    n = int(np.prod(shape))
    return sl.sum(sl.sin(r) * W[:n].reshape(shape)) if shape else sl.sin(r) * 1.3


def _m(x):
    return sl.reshape(x, (2, 3))


MOVEMENT = {
    "int": lambda x: x[2],
    "negative_int": lambda x: x[-1],
    "slice": lambda x: x[1:5],
    "slice_step": lambda x: x[1:6:2],
    "negative_step": lambda x: x[::-1],
    "negative_step_bounds": lambda x: x[4:0:-2],
    "fancy_repeated": lambda x: x[np.array([3, 0, 3, 1, 5, 5])],
    "fancy_list": lambda x: x[[0, 0, 1]],
    "boolean": lambda x: x[MASK],
    "row": lambda x: _m(x)[1],
    "column": lambda x: _m(x)[:, 1],
    "element_2d": lambda x: _m(x)[1, 2],
    "negative_2d": lambda x: _m(x)[-1, -2],
    "strided_2d": lambda x: _m(x)[::-1, ::2],
    "fancy_2d": lambda x: _m(x)[[0, 1, 1], [2, 0, 2]],
    "boolean_2d": lambda x: _m(x)[MASK23],
    "newaxis": lambda x: _m(x)[None, :, 1:],
    "ellipsis": lambda x: sl.reshape(x, (1, 2, 3))[..., 0],
    "stack": lambda x: sl.stack([x[:3], 2.0 * x[3:], x[::2]]),
    "stack_axis1": lambda x: sl.stack([x[:3], x[3:]], axis=1),
    "stack_scalars": lambda x: sl.stack([x[0], x[4], x[0]]),
    "concatenate": lambda x: sl.concatenate([x[:2], x, x[4:5]]),
    "concatenate_const": lambda x: sl.concatenate([x[:2], np.array([0.5, 1.5]), x[3:]]),
    "concatenate_2d": lambda x: sl.concatenate([_m(x), _m(x)[::-1]], axis=1),
    "reshape": lambda x: sl.reshape(x, (3, 2)),
    "transpose": lambda x: sl.transpose(_m(x)),
    "transpose_3d": lambda x: sl.transpose(sl.reshape(x, (1, 2, 3)), (2, 0, 1)),
    "where": lambda x: sl.where(MASK, x, x * x),
    "where_const": lambda x: sl.where(MASK, x, 0.25),
    "where_scalar": lambda x: sl.where(MASK, x[0], x),
    "broadcast_to": lambda x: sl.broadcast_to(x[:3], (2, 3)),
    "broadcast_scalar": lambda x: sl.broadcast_to(x[1], (2, 2)),
}


IN_PLACE = frozenset(("reshape", "row", "slice"))


@pytest.mark.parametrize("name", sorted(MOVEMENT))
def test_data_movement_lowers_to_a_gather(vm, name):
    f = lambda x: _wsum(MOVEMENT[name](x))
    pts = _pts()
    vg = vm.check(f, X0, pts)
    # a run of the input in order (a slice, a row, a reshape) is read where it is:
    # the passes drop its GATHER (vm/passes.py, _copies)
    assert vm.opcodes(vg) & {O.GATHER, O.COPY} or name in IN_PLACE


SEGSUMS = {
    "scatter_add_repeated": lambda x: sl.scatter_add(x[:5], np.array([2, 0, 2, 2, 4]),
                                                     (6,)),
    "scatter_add_2d": lambda x: sl.scatter_add(x[:4], (np.array([0, 1, 0, 0]),
                                                       np.array([2, 1, 2, 0])), (2, 3)),
    "sum_axis0": lambda x: sl.sum(_m(x), axis=0),
    "sum_axis1_keepdims": lambda x: sl.sum(_m(x), axis=1, keepdims=True),
    "sum_axes_3d": lambda x: sl.sum(sl.reshape(x, (3, 1, 2)), axis=(0, 1)),
}


@pytest.mark.parametrize("name", sorted(SEGSUMS))
def test_scatter_add_and_axis_sums_are_segment_sums(vm, name):
    f = lambda x: _wsum(SEGSUMS[name](x))
    vg = vm.check(f, X0, _pts())
    assert O.SEGSUM in vm.opcodes(vg)


def test_the_gradient_of_repeated_indices_accumulates(vm):
    # x[3] read three times and x[0] twice: their adjoints are sums over the copies
    f = lambda x: sl.sum(x[np.array([3, 3, 0, 3, 0])] * np.arange(1.0, 6.0))
    vg = vm.compile(f, X0)
    v, g = vg(X0)
    assert g.tolist() == [3.0 + 5.0, 0.0, 0.0, 1.0 + 2.0 + 4.0, 0.0, 0.0]


# --------------------------------------------------------------------------------------
# guards
# --------------------------------------------------------------------------------------
def _branchy(x):
    # Python control flow on values: two comparisons, recorded as guards
    a = sl.exp(x[0]) if x[0] > x[1] else x[0] * x[1]
    return a + (sl.sum(x * x) if x[2] > 0.0 else sl.sum(sl.sin(x)))


def test_a_flipped_comparison_records_again_and_each_path_stays_compiled(vm):
    points = [np.array([1.0, 0.0, 1.0]), np.array([0.0, 1.0, 1.0]),
              np.array([1.0, 0.0, -1.0]), np.array([0.0, 1.0, -1.0])]
    vg = sl.compile(_branchy, points[0], verify=False)
    assert vg.compiled
    prog = vg._programs[(3,)][0]
    assert type(prog.fn(points[1])) is int            # its guard failed: not a value
    ref = sl.value_and_grad(_branchy)
    for k, x in enumerate(points):
        assert vm.close(vg(x), ref(x))
        assert vg.recordings == k + 1 and vg.compiled
    rng = np.random.default_rng(0)
    for x in [rng.standard_normal(3) for _ in range(12)]:   # every path known by now
        assert vm.close(vg(x), ref(x))
    assert vg.recordings == 4 and vg.programs == 4 and vg.fallback is None
    assert all(hasattr(p, "code") for p in vg._programs[(3,)])


class Flips(sl.Model):
    y = sl.data.vector(3)
    p = sl.param.real(lower=0, upper=1)
    s = sl.param.real(lower=0)
    t = sl.param.real(lower=lambda p: -p, upper=lambda p: 1 + p)   # traced bounds

    def log_prob(self, p, s, t):
        lp = sl.beta_lpdf(p, 2, 2) + sl.lognormal_lpdf(s, 0, 1) + sl.normal_lpdf(t, 0, 1)
        return lp + sl.normal_lpdf(self.y, t * s + p, 1.0)


def test_a_bounded_parameter_whose_sign_flips_keeps_one_recording(vm):
    # the bounded transform decides nothing on the free values' signs
    m = Flips(y=[0.1, 0.5, -0.3])
    rng = np.random.default_rng(1)
    pts = [np.array([0.3, 0.2, 0.5]), np.array([-0.3, 0.2, -0.5])]
    for x in pts + [rng.uniform(-1, 1, 3) for _ in range(8)]:
        assert vm.close(m.log_density_gradient(x), m._gradient(m._point(x), True))
    rg = m._retaped[True]
    assert rg.fallback is None and rg.compiled and rg.recordings == 1


def _positive(v):
    return np.asarray(v) > 0


_guard_lowering(_positive, "positive")


def _sign_split(x):
    # a formula picked per element by sign: a "positive" guard of the interpreter
    pos = guarded(_positive, x)
    return sl.sum(sl.where(pos, sl.log1p(x), -x * x))


def test_a_positive_guard_that_fails_records_again(vm):
    up, down = np.array([0.3, 0.2, 0.5]), np.array([-0.3, 0.2, -0.5])
    vg = vm.compile(_sign_split, up)
    (prog,) = vg._programs[(3,)]
    assert type(prog.fn(down)) is int                 # the interpreter's guard fails
    ref = sl.value_and_grad(_sign_split)
    assert vm.close(vg(down), ref(down))
    assert vg.recordings == 2 and vg.programs == 2 and vg.compiled
    for x in (up, down):
        answers = [r for r in (p.fn(x) for p in vg._programs[(3,)]) if type(r) is tuple]
        assert len(answers) == 1 and vm.close(answers[0], ref(x)), x


class FreeScale(sl.Model):
    y = sl.data.vector(3)
    mu = sl.param.real()
    sigma = sl.param.real()                       # unconstrained: it can be <= 0

    def log_prob(self, mu, sigma):
        return sl.normal_lpdf(self.y, mu, sigma) + sl.log(sl.fabs(mu))


def _outcome(fn, x):
    """What ``fn(x)`` gives: its result or the class and message of its error."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            return fn(x)
        except sl.DomainError as e:
            return type(e), str(e)


def _same_outcome(vm, a, b):
    if type(a[0]) is type and issubclass(a[0], Exception):
        return a == b
    return vm.close(a, b)


def test_a_domain_error_inside_the_kernel_is_the_tapes_domain_error(vm):
    m = FreeScale(y=[0.1, 0.5, -0.3])
    m.log_density_gradient(np.array([0.4, 1.2]))
    rg = m._retaped[True]
    assert rg.compiled
    for x in (np.array([0.4, -1.0]), np.array([0.4, 0.0]), np.array([-0.2, -3.0])):
        got = _outcome(m.log_density_gradient, x)
        assert got[0] is sl.DomainError and "sigma" in got[1], got
        assert got == _outcome(lambda z: m._gradient(m._point(z), True), x)
        # the kernel itself reports the domain: the caller hands the point to the tape
        with pytest.raises(FloatingPointError):
            rg._programs[None][0].fn(x)
    assert rg.compiled and rg.fallback is None and rg.recordings == 1
    assert vm.close(m.log_density_gradient(np.array([0.3, 0.9])),
                    m._gradient(np.array([0.3, 0.9]), True))


def test_non_finite_results_are_the_tapes(vm):
    # log(0) = -inf, exp overflow = inf, log of a negative number = NaN: the kernel hands
    # such points to the eager tape, whose answer (inf/NaN values and gradients) is kept
    f = lambda x: sl.log(x[0]) + sl.sum(sl.exp(x * 300.0))
    vg = vm.compile(f, np.array([0.5, 1.0]))
    ref = sl.value_and_grad(f)
    for x in ([0.0, 1.0], [1.0, 3.0], [-1.0, 0.0], [1e-300, -2.0]):
        x = np.array(x)
        assert _same_outcome(vm, _outcome(vg, x), _outcome(ref, x)), x
    assert vg.fallback is None and vg.recordings == 1 and vg.compiled
    m = FreeScale(y=[0.1, 0.5, -0.3])
    for x in (np.array([0.0, 1.0]), np.array([0.4, 1.0])):       # log|mu| at mu = 0
        e = _outcome(lambda z: m._gradient(m._point(z), True), x)
        assert _same_outcome(vm, _outcome(m.log_density_gradient, x), e), x
    assert m._retaped[True].compiled


# --------------------------------------------------------------------------------------
# threads: the kernels release the GIL, the program's buffers are shared
# --------------------------------------------------------------------------------------
def test_threads_calling_one_program_get_their_own_results(vm):
    # chains under a ThreadPoolExecutor share a model, so its program: a call while
    # another runs must not mix values into it (it did: 4 threads, wrong gradients)
    import threading

    def f(x):
        s = 0.0
        for i in range(300):              # a long scalar program: calls overlap
            s = s + sl.sin(x[i % 7] * s * 0.01 + x[(i + 3) % 7]) * x[i % 5]
        return s
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(7) for _ in range(4)]
    vg = vm.compile(f, xs[0])
    expected = [vg(x) for x in xs]
    bad = []

    def work(k):
        for _ in range(400):
            r = vg(xs[k])
            if r[0] != expected[k][0] or not np.array_equal(r[1], expected[k][1]):
                bad.append(k)
                return
    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not bad and vg.compiled


def test_scalar_and_matrix_inputs_keep_their_shapes(vm):
    # the interpreter's flat gradient comes back in the input's own shape (a float for
    # a float; a (2, 3) array, and a (2, 3, 2, 3) Hessian, for a matrix)
    f = lambda x: sl.exp(x) * x
    vg = vm.compile(f, 0.3)
    r, e = vg(0.7), sl.value_and_grad(f)(0.7)
    assert type(r[1]) is float and vm.close(r, e)
    w = np.arange(6.0).reshape(2, 3)
    g = lambda x: sl.sum(sl.sin(x) * w * x[0, 1])
    X = np.linspace(0.1, 1.0, 6).reshape(2, 3)
    vg = vm.compile(g, X)
    r, e = vg(2 * X), sl.value_and_grad(g)(2 * X)
    assert r[1].shape == (2, 3) and vm.close(r, e)
    H = vg.hessian(2 * X)
    assert vg._hessian.compiled and H.shape == (2, 3, 2, 3)
    assert vm.close((0.0, H), (0.0, sl.hessian(g)(2 * X)))


# --------------------------------------------------------------------------------------
# answers come from the program, whatever was checked or recorded before
# --------------------------------------------------------------------------------------
class Conjugate(sl.Model):
    y = sl.data.vector(5)
    mu = sl.param.real()
    s = sl.param.real(lower=0)

    def log_prob(self, mu, s):
        return sl.normal_lpdf(mu, 2.0, 1.5) + sl.normal_lpdf(self.y, mu, s)


def test_a_models_answers_do_not_depend_on_its_call_history(vm):
    # the interpreter equals the tape to rounding, not bit for bit: if the calls that
    # record or are checked answered with the tape's numbers, a second run with the
    # same seed (other calls checked) would draw differently
    y = np.array([1.2, 2.9, 2.2, 0.4, 3.3])
    rng = np.random.default_rng(2)
    pts = [rng.standard_normal(2) for _ in range(12)]
    a = Conjugate(y=y)
    first = [a.log_density_gradient(x) for x in pts]       # recorded, checked, replayed
    assert a._retaped[True].compiled
    b = Conjugate(y=y)
    b.log_density_gradient(pts[5])                         # recorded elsewhere
    again = [b.log_density_gradient(x) for x in pts] + [a.log_density_gradient(x)
                                                        for x in pts]
    for (v, g), (v2, g2) in zip(first + first, again):
        assert v == v2 and np.array_equal(g, g2)


def test_rounding_at_a_mode_is_not_a_changed_graph():
    # at mu = mean(y) the gradient is a cancellation: the tape's 0.0 and the
    # interpreter's -4e-16 agree; a real difference does not
    import sys
    C = sys.modules["stanlite.autodiff.compile"]
    assert C._close((-9.29, np.array([-4.4e-16])), (-9.29, np.array([0.0])))
    assert C._close((1e-17, np.array([1.0])), (-2e-17, np.array([1.0])))    # lp near 0
    assert not C._close((-9.29, np.array([1e-6])), (-9.29, np.array([0.0])))
    assert not C._close((-9.29, np.array([1.0, 2.0])), (-9.29, np.array([1.0, 2.001])))
    with warnings.catch_warnings():
        warnings.simplefilter("error", sl.CompileWarning)
        m = Conjugate(y=np.array([1.2, 2.9, 2.2, 0.4, 3.3]))
        mode = np.array([2.0, 0.0])
        for x in [mode + 0.1, mode, mode, mode - 0.1, mode] * 4:   # spot checks at a mode
            m.log_density_gradient(x)
    assert m._retaped[True].fallback is None


# ---- found by review: a two-leaf sum that absorbed a one-element sum; constants of
# any numeric type moved by where/concatenate/stack (not read as slot numbers)
@pytest.mark.parametrize("f", [
    lambda x: x[2] * (x[0] + sl.sum(x[1:2])),
    lambda x: sl.sum(x[0:1]) * x[1] + sl.sum(x[2:3]),
])
def test_a_sum_that_absorbs_a_one_element_sum_is_rewritten(vm, f):
    vg = sl.compile(f, np.array([0.5, 0.0, 0.0]), verify=False)
    assert vg.compiled
    for x in (np.array([0.5, 1.0, 2.0]), np.array([-1.0, 3.0, 0.25])):
        v, g = vg(x)
        v0, g0 = sl.value_and_grad(f)(x)
        assert np.isclose(v, v0, rtol=1e-12) and np.allclose(g, g0, rtol=1e-12)


@pytest.mark.parametrize("make", [
    lambda c: (lambda x: sl.sum(sl.where(c, x, 0) * x)),
    lambda c: (lambda x: sl.sum(sl.where(c, x, 1) * x)),
    lambda c: (lambda x: sl.sum(sl.where(c, np.float64(2.0), x) * x)),
    lambda c: (lambda x: sl.sum(sl.concatenate([x, np.array([0, 1])]) ** 2)),
    lambda c: (lambda x: sl.sum(sl.stack([x[0], 3, x[1]]) * x)),
])
def test_moved_constants_of_any_numeric_type_are_constants(vm, make):
    f = make(np.array([True, False, True]))
    # the first parameter is 0 at the recording point: a constant read as slot 0 would
    # agree there
    vg = sl.compile(f, np.array([0.0, 1.0, -2.0]), verify=False)
    assert vg.compiled
    x = np.array([0.5, -1.0, 2.0])
    v, g = vg(x)
    v0, g0 = sl.value_and_grad(f)(x)
    assert np.isclose(v, v0, rtol=1e-12) and np.allclose(g, g0, rtol=1e-12)
