"""Linear algebra with matrix adjoints, Stan's names.

Every function is one primitive (numpy / scipy.linalg on plain arrays) with its
reverse-mode rule beside it, or a short composition of such primitives. References
"Giles: <result>" are to the result of that name in M. Giles (2008), "An extended
collection of matrix derivative results for forward and reverse mode algorithmic
differentiation" (Oxford NA report 08/01); ``X_bar`` is the adjoint of ``X``, ``G``
(``g``) the adjoint of the output.

    C = A B            A_bar = G B^T,  B_bar = A^T G          (Giles: multiplication)
    C = A^-1           A_bar = -C^T G C^T                     (Giles: inverse)
    C = A^-1 B         B_bar = A^-T G,  A_bar = -B_bar C^T    (Giles: inverse product)
    c = det A          A_bar = g c A^-T                       (Giles: determinant)
    c = log|det A|     A_bar = g A^-T
    A = L L^T          A_bar = (S + S^T) / 2,  S = L^-T Phi(L^T L_bar) L^-1, where Phi
                       takes the lower triangle and halves the diagonal; it follows
                       from the forward rule dL = L Phi(L^-1 dA L^-T)
                       (Giles: Cholesky factorisation; Murray 2016, "Differentiation
                       of the Cholesky decomposition")
    A = V diag(l) V^T  A_bar = V (diag(l_bar) + F o (V^T V_bar)) V^T, symmetrised,
                       F_ij = 1 / (l_j - l_i) for i != j, 0 on the diagonal
                       (Giles: eigenvalues and eigenvectors)

Forward mode: each primitive also has its JVP beside its VJP (``dX`` the tangent):

    dC = dA B + A dB;   d(A^-1) = -A^-1 dA A^-1;   d(A^-1 B) = A^-1 (dB - dA C)
    d log|det A| = tr(A^-1 dA);   d det A = det A tr(A^-1 dA)
    dL = L Phi(L^-1 dA L^-T)                              (Cholesky)
    dl_i = v_i^T dA v_i,   dV = V (F o (V^T dA V))        (symmetric eigenproblem)

Tangents carry leading batch axes ``B`` (vector mode, used for Hessians): the rules
act on the last two axes only, and a tangent whose stack has fewer axes than the
output's is padded after ``B`` (:func:`_pad`) before it meets broadcasting. Like the
VJPs, the JVPs use stanlite operations only, so they are differentiated again (third
derivatives; forward-over-reverse evaluates the VJPs on duals). Functions of
symmetric matrices use the symmetric part of ``dA``, matching their symmetric
adjoints.

Conventions
-----------
* Matrices are 2-D arrays; most functions also take stacks ``(..., m, n)`` with
  numpy's broadcasting of the leading axes. A 1-D right-hand side is a vector.
* Functions of symmetric matrices (``cholesky_decompose``, ``eigenvalues_sym``,
  ``eigenvectors_sym``, ``quad_form_sym``, ``log_determinant_spd``, the ``*_spd``
  solves) check symmetry (to ``1e-8`` relative) as Stan does, and their adjoints are
  symmetric: they are the gradients with respect to symmetric perturbations.
* The adjoints are written with stanlite operations only, so that under nested
  differentiation they are recorded and differentiated again (reverse-over-reverse).
  Triangular solves are primitives; Cholesky and triangular solves are used in
  preference to explicit inverses.
* Bad shapes and non-square inputs raise ``ValueError`` naming the function (and
  the shapes): programming errors. Non-symmetric, non-positive-definite, singular or
  NaN values raise :class:`~stanlite.DomainError` (a ``ValueError`` too), which a
  sampler treats as a rejected proposal, as Stan does.

Where things live (one module a job; this package re-exports every public name, so
``stanlite.math.linalg.X`` and ``sl.X`` are the import paths to use):

- :mod:`.common`: transposes of stacks, tangent padding, the argument checks;
- :mod:`.products`: ``matmul``, ``dot``, ``crossprod``, ``tcrossprod``, quadratic
  forms, diagonal scalings, ``multiply_lower_tri_self_transpose``, ``matrix_power``;
- :mod:`.diagonal`: ``diagonal``, ``diag_matrix``, ``add_diag``, ``trace``;
- :mod:`.solves`: triangular, Cholesky (SPD) and general solves, inverses and
  determinants, ``cholesky_decompose``;
- :mod:`.decompositions`: symmetric eigendecomposition, thin QR and SVD;
- :mod:`.gaussian_process`: the ``gp_*_cov`` kernels;
- :mod:`.sparse`: CSR products in Stan's layout;
- :mod:`.numpy_api`: numpy's functions on traced values, ``norm1``, ``norm2``.
"""

from .products import (matmul, dot, crossprod, tcrossprod, quad_form, quad_form_sym,
                       quad_form_diag, diag_pre_multiply, diag_post_multiply,
                       multiply_lower_tri_self_transpose, matrix_power)
from .diagonal import diag_matrix, diagonal, add_diag, trace
from .solves import (cholesky_decompose, mdivide_left_tri_low, mdivide_right_tri_low,
                     mdivide_left, mdivide_right, mdivide_left_spd, mdivide_right_spd, solve,
                     inverse, inverse_spd, log_determinant, determinant, log_determinant_spd)
from .decompositions import (eigenvalues_sym, eigenvectors_sym, qr_thin_Q, qr_thin_R,
                             singular_values, svd_U, svd_V)
from .gaussian_process import (gp_exp_quad_cov, cov_exp_quad, gp_exponential_cov,
                               gp_matern32_cov, gp_matern52_cov, gp_periodic_cov)
from .sparse import csr_matrix_times_vector, csr_extract
from .numpy_api import norm1, norm2
# the Cholesky, LU and triangular primitives themselves (tests lower and inspect them)
from .solves import _cholesky, _solve, _trisolve  # noqa: F401
from ...autodiff.operators import register as _register_operators

# ``v @ w`` and ``v.dot(w)`` of traced values (autodiff/operators.py)
_register_operators(matmul=matmul, dot=dot)

__all__ = ["matmul", "dot", "crossprod", "tcrossprod", "quad_form", "quad_form_sym",
           "quad_form_diag", "diag_matrix", "diagonal", "add_diag", "diag_pre_multiply",
           "diag_post_multiply", "trace", "cholesky_decompose", "mdivide_left_tri_low",
           "mdivide_right_tri_low", "mdivide_left", "mdivide_right", "mdivide_left_spd",
           "mdivide_right_spd", "solve", "inverse", "inverse_spd", "log_determinant",
           "determinant", "log_determinant_spd", "multiply_lower_tri_self_transpose",
           "eigenvalues_sym", "eigenvectors_sym", "gp_exp_quad_cov", "cov_exp_quad",
           "qr_thin_Q", "qr_thin_R", "singular_values", "svd_U", "svd_V",
           "matrix_power", "csr_matrix_times_vector", "csr_extract", "gp_exponential_cov",
           "gp_matern32_cov", "gp_matern52_cov", "gp_periodic_cov", "norm1", "norm2"]
