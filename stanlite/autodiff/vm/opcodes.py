"""The instruction set of the compiled tape interpreter (:mod:`.kernel`).

A lowered program is a table of rows of ``ROW`` int64 fields, executed top to bottom
by the forward kernel and bottom to top by the reverse kernel, over one float64 value
buffer ``V`` and one adjoint buffer ``A`` of the same layout (every node's value is a
contiguous run of ``V``; the parameters come first, constants last). The fields:

    OP    the op code below                   N     element count of the output
    OUT   offset of the output in V           MASK  bit i: argument i needs an adjoint
    A, B, C  offsets of up to three arguments  SA, SB, SC  their strides (0: a scalar
          broadcast against the output, 1: one element per output element)
    X1, X2, X3  op-specific integers (matrix sizes, offsets into the integer table
          ``aux``, guard indices, constant offsets)

Why a table and not generated code: one kernel, compiled once per install and cached
by numba, runs every model, so no model waits for a compiler and a 10^5-node loop
program has no code-size problem (../shared/reviews/compiled-prototype.md, design A).
The op codes are grouped so that the hottest (scalar arithmetic) are tested first in
the kernels' if-chains.
"""

ROW = 14
OP, N, OUT, A, SA, B, SB, C, SC, MASK, X1, X2, X3, X4 = range(ROW)

# -- elementwise binary: out[i] = f(V[a + i*sa], V[b + i*sb]) ---------------------------
ADD = 1
SUB = 2
MUL = 3
DIV = 4
POW = 5
LSE2 = 6                 # log(e^a + e^b)
LOG_MIX = 7              # log(a e^b + (1 - a) e^c), 0 < a < 1 (log_mix(a, b, c))

# -- elementwise unary: out[i] = f(V[a + i]) --------------------------------------------
NEG = 10
EXP = 11
LOG = 12
LOG1P = 13
EXPM1 = 14
SQRT = 15
SQUARE = 16
INV = 17
LOG1M = 18
INV_LOGIT = 19
LOG_INV_LOGIT = 20
LOG1M_INV_LOGIT = 21
LOG1P_EXP = 22
TANH = 23
SIN = 24
COS = 25
LGAMMA = 26
FABS = 27
INV_SQRT = 28
LOGIT = 29
ATAN = 30
SINH = 31
COSH = 32
INV_SQUARE = 33
LOG1M_EXP = 34
CBRT = 35
ERF = 36
ERFC = 37
PHI = 38

# -- data movement and reductions --------------------------------------------------------
COPY = 40                # out[i] = V[a + i*sa]
GATHER = 41              # out[i] = V[aux[X1 + i]]
SEGSUM = 42              # out = 0; out[aux[X1 + i]] += V[a + i], i < X2 (N outputs)
SUM = 43                 # out[0] = sum V[a : a + X2]
LSE = 44                 # out[0] = log sum exp V[a : a + X2]
MATMUL = 45              # out (X1 x X3) = V[a] (X1 x X2) @ V[b] (X2 x X3)
DOT = 46                 # out[0] = V[a:a+X2] . V[b:b+X2]
CUMSUM = 47              # running sums of V[a] as (X1, X2, X3) along its middle axis
SUMN = 48                # out[0] = sum_i V[aux[X1 + i]], i < X2 (n-ary sum, passes.py)
EXTREME = 49             # out[0] = max (X1 = 1) or min (X1 = 0) of V[a : a + X2]
SOFTMAX = 50             # softmax of V[a] as (X1, X2, X3) along its middle axis
LOG_SOFTMAX = 51         # log_softmax, the same layout
GP_EXP_QUAD = 53         # K (X1 x X1) of X1 points V[a] of X2 coordinates,
#                          alpha V[b], rho V[c]
CHOLESKY = 54            # lower factor of V[a] (X1 x X1); X3 scratch (2 X1^2 values)
LSE_AXIS = 52            # log_sum_exp of V[a] as (X1, X2, X3) along its middle axis

# -- summed log densities: out[0] = sum_i lpdf(V[a+i*sa] | V[b+i*sb], V[c+i*sc]) -------
NORMAL = 60
CAUCHY = 61
LOGNORMAL = 62
STD_NORMAL = 63          # (y)
EXPONENTIAL = 64         # (y | beta)
POISSON = 65             # (n | lambda); X1: offset of the constants lgamma(n + 1)
POISSON_LOG = 66         # (n | alpha);  X1: as POISSON
GAMMA = 67               # (y | alpha, beta)
BETA = 68                # (y | a, b)
STUDENT_T = 69           # (y | nu, mu, sigma): X1 offset of sigma, X2 its stride
BERNOULLI_LOGIT = 70     # (n | alpha)
MVN_CHOLESKY = 71        # (y | mu, L): X1 rows, X2 = K, X3 scratch (2 X1 X2 values)
BINOMIAL_LOGIT = 73      # (n | N, alpha): + the constant V[X1] = sum lchoose(N, n)
POISSON_SS = 72          # sufficient statistics: V[X1] log V[b] - V[X1+1] V[b] - V[X1+2]

# -- guards: a decision recorded at one point, checked again at every call --------------
GUARD_POSITIVE = 90      # (V[a + i] > 0) == aux[X1 + i] for i < N; else guard X2 failed
GUARD_BOUNDS = 91        # int(isfinite(V[a])) + 2 int(isfinite(V[b])) == X1 (and a < b)
CHECK_POSITIVE = 92      # V[a + i] finite and > 0 (>= 0 when X1 == 0); else a domain error
CHECK_ARG = 94           # V[a + i] in the set X1 (CHECK_* below) for i < N; else a domain
#                          error (a density's argument check, replayed)
GUARD_CMP = 93           # (V[a] <op X1> V[b]) == X3, op 0..5: < <= > >= == !=; else guard X2

# the sets of CHECK_ARG (stricter than a density's own check is safe: the eager tape
# then decides; never looser)
CHECK_NOT_NAN, CHECK_FINITE, CHECK_POSITIVE_FINITE, CHECK_NONNEGATIVE_FINITE, \
    CHECK_UNIT, CHECK_POSITIVE_OR_INF = range(6)

# statuses returned by the kernels: 0 ok; > 0: 1 + the index of the failed guard;
# DOMAIN: a value outside an argument's domain, or a non-finite result - the caller
# hands the point to the eager tape, which raises or returns what it always does
OK = 0
DOMAIN = -1

# -- elementwise binary, second range: out[i] = f(V[a + i*sa], V[b + i*sb]) -----------
# (value and VJP generated from the declared derivatives: vm/binary_generated.py)
ATAN2 = 120              # atan2(a, b)
HYPOT = 121
LOG_DIFF_EXP = 122       # log(e^a - e^b)
LMULTIPLY = 123          # a log(b), 0 log 0 = 0
LOG_INV_LOGIT_DIFF = 124  # log(inv_logit(a) - inv_logit(b))
LOG_FALLING_FACTORIAL = 125
LOG_RISING_FACTORIAL = 126
FMIN = 127               # C's fmin: a NaN argument loses
FMAX = 128
MINIMUM = 129            # numpy's minimum: a NaN argument wins
MAXIMUM = 130
FDIM = 131               # max(a - b, 0)
LBETA = 132              # log B(a, b) (vm/scalar.py _lbeta)
LCHOOSE = 133            # log C(a, b) (vm/scalar.py _lchoose)
OWENS_T = 134            # Owen's T(h, a) (vm/scalar.py _owens_t)

# -- summed log densities, second range (as NORMAL ...) ----------------------------------
RAYLEIGH = 80            # (y | sigma)
LOGLOGISTIC = 81         # (y | alpha, beta)

# -- elementwise unary, second range: out[i] = f(V[a + i]) (as NEG ... PHI) -------------
LAMBERT_W0 = 140
LAMBERT_WM1 = 141
