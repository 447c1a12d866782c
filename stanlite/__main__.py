"""``python -m stanlite``: the main job.

Until the samplers land this is the AD demo of the README: a log density, its
reverse-mode gradient next to central finite differences, and a Hessian by nested AD.
"""

import numpy as np

import stanlite as sl


def log_density(theta, y=np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0]),
                sigma=np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])):
    """Eight schools, non-centred, on the unconstrained scale (log tau)."""
    mu, log_tau, z = theta[0], theta[1], theta[2:]
    tau = sl.exp(log_tau)
    th = mu + tau * z
    return (-0.5 * (mu / 5.0) ** 2 - sl.log1p((tau / 5.0) ** 2) + log_tau
            - 0.5 * sl.sum(z * z) - 0.5 * sl.sum(((y - th) / sigma) ** 2))


def main():
    rng = np.random.default_rng(1)
    theta = rng.uniform(-2, 2, 10)
    lp, g = sl.value_and_grad(log_density)(theta)
    eps = 1e-6
    fd = np.array([(log_density(theta + eps * e) - log_density(theta - eps * e)) / (2 * eps)
                   for e in np.eye(theta.size)])
    print(f"eight schools (non-centred) log density at a random point: {lp:.6f}\n")
    print(f"{'parameter':<12}{'reverse-mode AD':>20}{'finite difference':>20}{'abs diff':>12}")
    names = ["mu", "log_tau"] + [f"z[{j + 1}]" for j in range(8)]
    for n, a, f in zip(names, g, fd):
        print(f"{n:<12}{a:>20.10f}{f:>20.10f}{abs(a - f):>12.2e}")
    check = sl.check_grad(log_density, theta)
    print(f"\ncheck_grad (Richardson central differences, 4 random directions): "
          f"max rel err {check.max_rel_err:.2e} -> {'OK' if check.passed else 'FAILED'}")
    H = sl.jacobian(sl.grad(log_density))(theta)
    print(f"Hessian by nested reverse mode: 10x10, symmetric to "
          f"{np.max(np.abs(H - H.T)):.1e}, diagonal[:3] = {np.round(np.diag(H)[:3], 6)}")


if __name__ == "__main__":
    main()
