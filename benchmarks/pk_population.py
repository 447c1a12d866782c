"""The review's population PK model through the closed form and through ODE solves,
side by side: issue 22's target "the 20-subject two-compartment oral population model
through ``sl.pk.ode``: <= 5x its closed-form gradient".

The model (the pharmacometrics review, section 3): 20 subjects, 200 mg orally every
12 h x 4 (one record, ADDL = 3), 15 samples each (0.5-12 h after the first dose,
36.5-60 h after the fourth, times jittered +-5%), allometric weights; log-normal
between-subject variability on CL, V2 and ka (non-centred), Q and V3 shared,
proportional residual error; 69 parameters. One log density + gradient
(``Model.log_density_gradient``, the retaped gradient) with the amounts from

* ``closed form``   ``sl.pk.twocpt`` (divided differences, all subjects vectorised);
* ``ode serial``    ``sl.pk.ode`` with the two-compartment ODE (rk45 at Torsten's
                    default tolerances 1e-6): one ODE super node per dosing interval
                    and subject (80 nodes), events walked in Python;
* ``ode_group``     ``sl.pk.ode_group``: the whole population in one node, every
                    subject's timeline in one compiled call;
* ``ode_group x2``  the same, subjects split between 2 threads;
* ``ode_group interp``  ``ode_group`` with the right-hand side run by the tape
                    interpreter inside the stepper (the route before its programs
                    were generated as straight-line numba code, functor/ode_codegen.py;
                    the other ODE rows use the generated code once a right-hand side
                    has run ``ode_codegen.AFTER`` evaluations, i.e. from the warm-up
                    gradient on).

Columns: wall and CPU milliseconds per gradient (best of 3 loops of moving points),
and the wall-time and CPU-time ratios to the closed form (on a loaded machine the
wall time of a row is mostly waiting for a core: compare CPU; with threads, CPU is
the sum over them). On a loaded machine compare only the
ratios of one run.

Run:  python benchmarks/pk_population.py [--quick] [--subjects N]
"""

import argparse
import time
import warnings

import blas_threads  # noqa: F401  (before numpy)
import numpy as np

import stanlite as sl
from stanlite.functor import ode_codegen

PRIOR_MEAN = np.log([4.0, 8.0, 30.0, 80.0, 1.5])
TOL = dict(rel_tol=1e-6, abs_tol=1e-6)


def design(n_subjects, seed=20261126):
    """The review's design and a simulated data set (truth CL 5, Q 10, V2 35, V3 100,
    ka 1; omega 0.3, 0.2, 0.4; proportional error 0.15)."""
    rng = np.random.default_rng(seed)
    wt = rng.uniform(50.0, 100.0, n_subjects)
    rows = []
    nominal = np.r_[np.linspace(0.5, 11.9, 8), np.linspace(36.5, 60.0, 7)]
    for j in range(n_subjects):
        rows.append((j + 1, 0.0, 1, 200.0, 1, 12.0, 3))
        for t in np.sort(nominal * rng.uniform(0.95, 1.05, nominal.size)):
            rows.append((j + 1, float(t), 0, 0.0, 2, 0.0, 0))
    ID, T, EVID, AMT, CMT, II, ADDL = map(np.array, zip(*rows))
    ev = sl.pk.events(id=ID, time=T, evid=EVID, amt=AMT, cmt=CMT, ii=II, addl=ADDL)
    eta = rng.normal(0.0, [0.3, 0.2, 0.4], (n_subjects, 3))
    lwt = np.log(wt / 70.0)
    cl = 5.0 * np.exp(0.75 * lwt + eta[:, 0])
    v2 = 35.0 * np.exp(lwt + eta[:, 1])
    ka = np.exp(eta[:, 2])
    A = sl.pk.twocpt(ev, CL=cl, Q=10.0, V2=v2, V3=100.0, ka=ka)
    obs = ev.observed
    c = A[obs, 1] / v2[ev.subject[obs]]
    dv = c * (1.0 + 0.15 * rng.normal(size=c.size))
    return ev, wt, dv


def two_cpt(t, x, th):
    """Gut, central, peripheral; th = (CL, Q, V2, V3, ka)."""
    return _two_cpt(t, x, th)


def two_cpt_interp(t, x, th):
    """The same system, another function (its own compiled programs, never generated)."""
    return _two_cpt(t, x, th)


def _two_cpt(t, x, th):
    cl, q, v2, v3, ka = th[0], th[1], th[2], th[3], th[4]
    k10, k12, k21 = cl / v2, q / v2, q / v3
    return sl.stack([-ka * x[0], ka * x[0] - (k10 + k12) * x[1] + k21 * x[2],
                     k12 * x[1] - k21 * x[2]])


class PopPK2(sl.Model):
    N = sl.data.int(lower=1)
    J = sl.data.int(lower=1)
    dv = sl.data.vector("N")
    wt = sl.data.vector("J", lower=0)
    theta = sl.param.vector(5)              # log CL, Q, V2, V3, ka
    omega = sl.param.vector(3, lower=0)     # BSV sd on CL, V2, ka
    z = sl.param.matrix("J", 3)
    sigma = sl.param.real(lower=0)          # proportional error

    def __init__(self, events, solver, threads=None, **data):
        super().__init__(**data)
        self.f = two_cpt_interp if solver == "interp" else two_cpt
        self.events = events
        self.solver = solver
        self.threads = threads
        self.obs = events.observed
        self.sub = events.subject[self.obs]
        self.lwt = np.log(self.wt / 70.0)

    def amounts(self, CL, Q, V2, V3, ka):
        if self.solver == "closed form":
            return sl.pk.twocpt(self.events, CL=CL, Q=Q, V2=V2, V3=V3, ka=ka)
        ones = np.ones(self.J)
        th = sl.stack([CL, Q * ones, V2, V3 * ones, ka], axis=1)
        if self.solver == "ode":
            return sl.pk.ode(self.f, 3, self.events, th, **TOL)
        return sl.pk.ode_group(self.f, 3, self.events, th, threads=self.threads, **TOL)

    def log_prob(self, theta, omega, z, sigma):
        eta = omega * z
        CL = sl.exp(theta[0] + 0.75 * self.lwt + eta[:, 0])
        V2 = sl.exp(theta[2] + self.lwt + eta[:, 1])
        ka = sl.exp(theta[4] + eta[:, 2])
        A = self.amounts(CL, sl.exp(theta[1]), V2, sl.exp(theta[3]), ka)
        C = A[self.obs, 1] / V2[self.sub]
        lp = sl.normal_lpdf(theta, PRIOR_MEAN, 1.0) + sl.normal_lpdf(omega, 0.0, 0.5)
        lp = lp + sl.std_normal_lpdf(z) + sl.normal_lpdf(sigma, 0.0, 0.5)
        return lp + sl.normal_lpdf(self.dv, C, sigma * C)


def per_gradient(model, x, budget, repeats=3):
    """Best (wall, CPU) seconds per gradient over ``repeats`` loops at moving points."""
    fn = model.log_density_gradient
    fn(x)
    t0 = time.perf_counter()
    fn(x + 1e-4)
    one = max(time.perf_counter() - t0, 1e-6)
    n = max(2, int(budget / repeats / one))
    wall = cpu = np.inf
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        for k in range(n):
            fn(x + 1e-4 * (k % 7))
        wall = min(wall, (time.perf_counter() - w0) / n)
        cpu = min(cpu, (time.process_time() - c0) / n)
    return wall, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="shorter timing loops")
    ap.add_argument("--subjects", type=int, default=20)
    args = ap.parse_args()
    budget = 0.5 if args.quick else 3.0
    ev, wt, dv = design(args.subjects)
    data = dict(N=len(dv), J=args.subjects, dv=dv, wt=wt)
    rng = np.random.default_rng(1)
    rows = [("closed form", "closed form", None), ("ode serial", "ode", None),
            ("ode_group", "group", None), ("ode_group x2", "group", 2),
            ("ode_group interp", "interp", None)]
    models = {name: PopPK2(ev, solver, threads, **data) for name, solver, threads in rows}
    ref = models["closed form"]
    x = ref.unconstrain({"theta": PRIOR_MEAN, "omega": [0.3, 0.2, 0.4],
                         "z": rng.normal(0, 1, (args.subjects, 3)), "sigma": 0.15})
    lp0, g0 = ref.log_density_gradient(x)
    print(f"population model: {args.subjects} subjects, {ev.n_records} records, "
          f"{ref.dim} parameters; ODE rk45 at rel_tol = abs_tol = 1e-6")
    print(f"{'solver':16s} {'wall ms':>9s} {'CPU ms':>9s} {'x closed form':>14s} "
          f"{'CPU x closed':>13s} {'max |grad diff| / max |grad|':>29s}")
    base = None
    after = ode_codegen.AFTER
    for name, _, _ in rows:
        m = models[name]
        # (the interpreter's row: its right-hand side's programs are never generated)
        ode_codegen.AFTER = None if name.endswith("interp") else after
        with warnings.catch_warnings():
            # (pk.ode's many nodes: its retaped gradient may run on the eager tape)
            warnings.simplefilter("ignore", sl.CompileWarning)
            lp, g = m.log_density_gradient(x)
            if ode_codegen.AFTER is not None and m.solver != "closed form":
                # past ode_codegen.AFTER right-hand side evaluations (at most 30
                # gradients), then wait for the generated right-hand side's compile in
                # another process (as friberg_karlsson.py and ode.py do), so that a
                # first run on an empty numba cache times the generated code, not the
                # interpreter, and the compile's CPU does not load the timed loops
                made = ode_codegen.STATS["generated"]
                for k in range(30):
                    if ode_codegen.STATS["generated"] != made:
                        break
                    m.log_density_gradient(x + 1e-4 * (k % 7))
                ode_codegen.wait()
                m.log_density_gradient(x)
            wall, cpu = per_gradient(m, x, budget)
        base = (wall, cpu) if base is None else base
        err = np.max(np.abs(g - g0)) / np.max(np.abs(g0))
        print(f"{name:16s} {1e3 * wall:9.2f} {1e3 * cpu:9.2f} {wall / base[0]:14.1f} "
              f"{cpu / base[1]:13.1f} {err:29.1e}")


if __name__ == "__main__":
    main()
