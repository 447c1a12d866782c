"""What one implicit leapfrog step of RHMC costs, and where the time goes (issue 24,
point 3: at most 20 NUTS gradients a step on the funnels).

A short RHMC run at the defaults gives alpha, the sampling step size and typical
points; from each of those points, with a fresh momentum, a trajectory of ``--steps``
implicit steps is timed (``SoftAbsMetric.step``, CPU time), and beside it, in the
same process, the pieces one at a time inside compiled loops (no Python per call):
the model's gradient program (the unit: a NUTS gradient as the compiled NUTS tree
calls it), its Hessian program, the third-order sweep program, the
eigendecomposition with the SoftAbs transform, the divided differences J and the
matrix M. The evaluation counts per step are ``rhmc.PROFILE``'s.

Run:  python benchmarks/rhmc_step_cost.py [--cases funnel10 funnel51 banana]
                                         [--points 20] [--steps 20] [--keep PREFIX]
"""

import argparse
import time

import blas_threads  # one BLAS thread per process: imported first, for its effect

del blas_threads

import numpy as np  # noqa: E402

from stanlite.samplers import rhmc, rhmc_kernels as K  # noqa: E402
from stanlite.samplers.nuts_jit import njit  # noqa: E402
from stanlite.autodiff.vm import kernel as vm  # noqa: E402

import rhmc as bench  # noqa: E402  (benchmarks/rhmc.py: the cases)


@njit(cache=True)
def _loop_grad(reps, code, aux, V, A, dim, out, nvar, q, g):
    s = 0.0
    for _ in range(reps):
        st, lp = vm.value_grad(code, aux, V, A, dim, out, nvar, q, g)
        s += lp
    return s


@njit(cache=True)
def _loop_value(reps, code, aux, V, dim, out, size, q, res):
    s = 0.0
    for _ in range(reps):
        vm.value_only(code, aux, V, dim, out, size, q, res)
        s += res[0]
    return s


@njit(cache=True)
def _loop_eig(reps, A, alpha):
    s = 0.0
    for _ in range(reps):
        S, lam, Q, f, finv, logdet = K.eig_softabs(A, alpha)
        s += logdet
    return s


@njit(cache=True)
def _loop_J(reps, lam, f, alpha):
    s = 0.0
    for _ in range(reps):
        s += K.divided_differences(lam, f, alpha)[0, 0]
    return s


@njit(cache=True)
def _loop_M(reps, Q, finv, J, p):
    s = 0.0
    for _ in range(reps):
        s += K.trace_matrix(Q, finv, J, p)[0, 0]
    return s


def _per_call(fn, *args, reps=2000):
    fn(2, *args)
    best = np.inf
    for _ in range(3):
        t0 = time.process_time()
        fn(reps, *args)
        best = min(best, (time.process_time() - t0) / reps)
    return best


def pieces(model, metric, q):
    """CPU seconds of one call of each piece at ``q`` (compiled loops, best of 3)."""
    kb = metric._jit_programs(model)
    pg, ph, ps = kb[0], kb[1], kb[2]
    n = q.shape[0]
    g = np.empty(n)
    out = {"grad": _per_call(_loop_grad, pg.code, pg.aux, pg.V.copy(), pg.A.copy(),
                             pg.dim, pg.out, pg.nvar, q, g)}
    res = np.empty(ph.size)
    out["hessian"] = _per_call(_loop_value, ph.code, ph.aux, ph.V.copy(), ph.dim, ph.out,
                               ph.size, q, res, reps=500)
    geo = metric.geometry(model, q)
    xs = np.concatenate([q, geo.trace_matrix(np.ones(n)).ravel()])
    gs = np.empty(ps.dim)
    out["sweep"] = _per_call(_loop_grad, ps.code, ps.aux, ps.V.copy(), ps.A.copy(),
                             ps.dim, ps.out, ps.nvar, xs, gs, reps=200)
    out["eigh"] = _per_call(_loop_eig, np.ascontiguousarray(geo.A), metric.alpha, reps=500)
    out["J"] = _per_call(_loop_J, geo.lam, geo.f, metric.alpha, reps=500)
    out["M"] = _per_call(_loop_M, geo.Q, geo.finv, geo.J, np.ones(n), reps=500)
    out["sizes"] = (len(pg.code), len(ph.code), len(ps.code))
    return out


def start_points(m, points, warmup, seed, keep):
    """``(points, alpha, eps)`` from a short RHMC run at the defaults; kept in the
    file ``keep`` (if given) and read from it when it exists, so that two versions
    of the sampler are timed from the same points with the same alpha and step."""
    import os
    if keep and os.path.exists(keep):
        d = np.load(keep)
        return list(d["qs"]), float(d["alpha"]), float(d["eps"])
    fit = m.sample(sampler="rhmc", chains=1, warmup=warmup, draws=points, seed=seed,
                   progress=False, parallel=False)
    cs = fit.chain_states[0]
    alpha = float(cs.sampler_options["alpha"])
    eps = float(np.ravel(fit.step_size)[0])
    names = list(dict.fromkeys(n.split("[")[0] for n in m.param_names()))
    qs = [m.unconstrain({k: np.asarray(fit[k])[0, i] for k in names})
          for i in range(points)]
    if keep:
        np.savez(keep, qs=np.array(qs), alpha=alpha, eps=eps)
    return qs, alpha, eps


def measure(case, points, steps, warmup, seed, keep=None):
    m = bench.make_model(case)
    qs, alpha, eps = start_points(m, points, warmup, seed, keep and f"{keep}_{case}.npz")
    n = qs[0].shape[0]
    metric = rhmc.SoftAbsMetric(n, alpha, max_halvings=3)
    metric.retape = True
    rng = np.random.default_rng(seed)
    from stanlite.samplers.hamiltonian import Point
    # warm: compile and check the programs
    for q in qs[:2]:
        lp, gr = m.log_density_gradient(q)
        z = metric.start(m, Point(q, None, lp, gr, None, 0.0, None), rng)
        for _ in range(3):
            z = metric.step(m, z, eps)
    rhmc.reset_profile()
    t0 = time.process_time()
    nsteps = 0
    for q in qs:
        lp, gr = m.log_density_gradient(q)
        z = metric.start(m, Point(q, None, lp, gr, None, 0.0, None), rng)
        for _ in range(steps):
            z = metric.step(m, z, eps)
            nsteps += 1
            if z.h == np.inf:
                break
    cpu = time.process_time() - t0
    P = dict(rhmc.PROFILE)
    pc = pieces(m, metric, qs[-1])
    return dict(case=case, n=n, alpha=alpha, eps=eps, steps=nsteps, cpu=cpu, P=P, pc=pc)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=["funnel10", "funnel51"])
    ap.add_argument("--points", type=int, default=20)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--keep", default=None,
                    help="file prefix: the start points, alpha and step size are read "
                         "from (or written to) PREFIX_case.npz (A/B runs)")
    a = ap.parse_args()
    for case in a.cases:
        r = measure(case, a.points, a.steps, a.warmup, a.seed, a.keep)
        P, pc, ns = r["P"], r["pc"], max(r["steps"], 1)
        step = r["cpu"] / ns
        g = pc["grad"]
        print(f"{case} d={r['n']} alpha {r['alpha']:.3g} eps {r['eps']:.3g}: "
              f"{ns} steps, {1e6 * step:.1f} us a step = {step / g:.1f} NUTS gradients "
              f"({1e6 * g:.2f} us in-kernel); fp failures {P['fp_failures']}, "
              f"kernel steps {P['kernel_steps']}, handoffs {P['handoffs']}")
        print("  per step: " + ", ".join(
            f"{k} {P[k] / ns:.2f}" for k in ("hessians", "sweeps", "eighs",
                                             "p_iterations", "q_iterations",
                                             "restarts", "retries")))
        est = {k: P[c] / ns * pc[k] for k, c in (("hessian", "hessians"),
                                                  ("sweep", "sweeps"), ("eigh", "eighs"))}
        est["J+M"] = pc["J"] + P["sweeps"] / ns * pc["M"]
        print("  one call, us (x grad): " + ", ".join(
            f"{k} {1e6 * pc[k]:.2f} ({pc[k] / g:.1f})"
            for k in ("grad", "hessian", "sweep", "eigh", "J", "M"))
            + f"; program lengths grad/hess/sweep {pc['sizes']}")
        print("  estimated share of a step: " + ", ".join(
            f"{k} {100 * v / step:.0f}%" for k, v in est.items())
            + f", rest {100 * (1 - sum(est.values()) / step):.0f}%")
        # The floor of any step that moves q with the SoftAbs metric: dH/dq at one
        # new point needs that point's Hessian, its eigendecomposition and one
        # third-order sweep, even with no fixed-point iteration at all (an explicit
        # integrator): the cost of the model's programs, not of the glue.
        floor = (pc["hessian"] + pc["sweep"] + pc["eigh"]) / g
        print(f"  floor (one Hessian + one eigendecomposition + one sweep a step): "
              f"{floor:.1f} gradients; the measured step is {step / g / floor:.1f}x "
              f"the floor; issue 24's 20x is "
              + ("above the floor" if floor < 20 else "BELOW the floor: unreachable"))


if __name__ == "__main__":
    main()
