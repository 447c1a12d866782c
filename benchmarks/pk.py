"""Population PK gradients: what one NUTS leapfrog step pays with ``sl.pk``.

One gradient of the log density of a population model - 10 subjects, 10 records
each (an oral dose, then 9 concentrations over 12 h), per-subject CL, V, ka on the
log scale (30 parameters), log-normal residuals - solved by

* ``onecpt``   the closed form (divided differences, superposition over all
               (record, dose) pairs of all subjects in one vectorised pass);
* ``twocpt``   the two-compartment closed form (Q = 1.5 CL, V3 = 3 V);
* ``linode``   the one-compartment model as a matrix, matrix-exponential super node;
* ``ode``      the one-compartment model as an ODE, ``ode_rk45`` (rel/abs tol 1e-8),
               one ODE super node per subject;
* ``naive``    the baseline a user would write without ``sl.pk``: the textbook
               formula ``D ka / (V (ka - k)) (e^{-k t} - e^{-ka t})`` in a Python loop
               over subjects and observations, on scalars;

with a second regimen, ``ss``: the same subjects at steady state of 100 mg every
12 h (one ss = 1 record each; the ODE one solved by the algebraic-solver super node).
Columns: eager gradient (the tape built and swept each time), retaped gradient
(``sl.compile``, what ``Model.log_density_gradient`` uses), the number of nodes of the
tape. Times are CPU milliseconds of the process (best of 3 loops), so that other work
on a shared machine does not count.

Run:  python benchmarks/pk.py [--quick]
"""

import argparse

import blas_threads  # noqa: F401  (before numpy)
from _common import best_time
import numpy as np

import stanlite as sl

S, T_OBS = 10, [0.25, 0.5, 1.0, 2.0, 3.5, 5.0, 7.0, 9.0, 12.0]


def schedule(ss):
    ids, time_, evid, amt, ii, ssf = [], [], [], [], [], []
    for s in range(S):
        for k, t in enumerate([0.0] + T_OBS):
            ids.append(s + 1)
            time_.append(t)
            evid.append(1 if k == 0 else 0)
            amt.append(100.0 if k == 0 else 0.0)
            ii.append(12.0 if (k == 0 and ss) else 0.0)
            ssf.append(1 if (k == 0 and ss) else 0)
    return sl.pk.events(id=ids, time=time_, evid=evid, amt=amt, ii=ii, ss=ssf)


def one_cpt(t, x, th):
    return sl.stack([-th[0] * x[0], th[0] * x[0] - th[1] * x[1]])


def make_lp(kind, ev, y):
    obs = ev.observed
    subj = ev.subject[obs]
    times = np.asarray(ev.time)[obs]

    def lp(x):
        cl, v, ka = sl.exp(x[:S]), sl.exp(x[S:2 * S]), sl.exp(x[2 * S:])
        if kind == "naive":
            c = []
            for i in range(len(obs)):
                s = int(subj[i])
                k = cl[s] / v[s]
                c.append(100.0 * ka[s] / (v[s] * (ka[s] - k))
                         * (sl.exp(-k * times[i]) - sl.exp(-ka[s] * times[i])))
            c = sl.stack(c)
        else:
            if kind == "onecpt":
                A = sl.pk.onecpt(ev, cl, v, ka)
            elif kind == "twocpt":
                A = sl.pk.twocpt(ev, cl, 1.5 * cl, v, 3.0 * v, ka)
            elif kind == "linode":
                k = cl / v
                z = np.zeros(S)
                K = sl.reshape(sl.stack([-ka, z, ka, -k], axis=1), (S, 2, 2))
                A = sl.pk.linode(ev, K)
            else:
                th = sl.stack([ka, cl / v], axis=1)
                A = sl.pk.ode(one_cpt, 2, ev, th, rel_tol=1e-8, abs_tol=1e-8)
            c = A[obs, 1] / v[subj]
        return sl.normal_lpdf(np.log(y), sl.log(c), 0.2)
    return lp


def n_nodes(lp, x):
    with sl.nested():
        v = sl.Var(x)
        lp(v)
        return len(v.tape.nodes)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    budget = 0.2 if args.quick else 1.5
    rng = np.random.default_rng(20261121)
    x = np.r_[np.log(np.full(S, 5.0)), np.log(np.full(S, 50.0)), np.log(np.full(S, 1.2))]
    x = x + rng.normal(0, 0.2, 3 * S)
    print(f"population: {S} subjects x {1 + len(T_OBS)} records, 30 parameters; CPU ms "
          "per gradient (best of 3)")
    print(f"{'regimen':8s} {'model':8s} {'eager ms':>9s} {'retaped ms':>11s} {'nodes':>6s}")
    for regimen in ("single", "ss"):
        ev = schedule(regimen == "ss")
        truth = sl.pk.onecpt(ev, np.exp(x[:S]), np.exp(x[S:2 * S]), np.exp(x[2 * S:]))
        y = truth[ev.observed, 1] / np.exp(x[S:2 * S])[ev.subject[ev.observed]]
        y = y * np.exp(rng.normal(0, 0.2, len(y)))
        kinds = ["naive", "onecpt", "twocpt", "linode", "ode"]
        if regimen == "ss":
            kinds = kinds[1:]
        for kind in kinds:
            lp = make_lp(kind, ev, y)
            g = sl.grad(lp)
            eager = best_time(lambda: g(x), budget) * 1e3
            vg = sl.compile(lp, x)
            retaped = best_time(lambda: vg(x), budget) * 1e3
            print(f"{regimen:8s} {kind:8s} {eager:9.3f} {retaped:11.3f} "
                  f"{n_nodes(lp, x):6d}")


if __name__ == "__main__":
    main()
