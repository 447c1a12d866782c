"""Import first in a benchmark script: one BLAS thread unless the environment says
otherwise. On a shared 2-core machine idle OpenBLAS workers spin, and their CPU time
(and contention) would be charged to whichever column runs a matrix product."""

import os
import sys

if "numpy" in sys.modules:
    raise ImportError("import blas_threads before numpy, or the setting has no effect")
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
