"""Distributions with Stan's names: ``<name>_lpdf``/``_lpmf`` (summed over elements,
broadcasting; one value per element with ``reduce=False``), ``_lcdf``/``_lccdf``
(censoring) and ``_rng`` (generated quantities).

Each log density is one fused node with analytic partials (:mod:`.fused`), declared
once per family with :func:`.family.family`; modules split by support:
:mod:`.continuous` (the real line), :mod:`.bounded` (positive and unit-interval
support, CDFs by incomplete gamma/beta), :mod:`.positive` (weibull, frechet, the
paretos), :mod:`.discrete` (bounded outcomes) and :mod:`.counts` (poisson, the
negative binomials), :mod:`.categorical`, :mod:`.multivariate`, and :mod:`.glm` (the
fused generalised linear models); :mod:`.ordinal` (ordered logistic and probit),
:mod:`.more_glm` (categorical-logit and negative-binomial GLMs),
:mod:`.more_continuous` (rayleigh, loglogistic, skew_normal, exp_mod_normal,
von_mises), :mod:`.more_multivariate` (precision and Cholesky parameterisations,
lkj_cov), :mod:`.more_discrete` (beta_neg_binomial, dirichlet_multinomial).
"""

from .fused import *  # noqa: F401,F403
from .continuous import *  # noqa: F401,F403
from .bounded import *  # noqa: F401,F403
from .positive import *  # noqa: F401,F403
from .discrete import *  # noqa: F401,F403
from .counts import *  # noqa: F401,F403
from .categorical import *  # noqa: F401,F403
from .multivariate import *  # noqa: F401,F403
from .glm import *  # noqa: F401,F403
from .hmm import *  # noqa: F401,F403
from . import (fused, continuous, bounded, positive, discrete, counts,  # noqa: F401
               categorical, multivariate, glm, hmm)

# families added for issue 21 (Stan's remaining distributions), one module per kind
from .ordinal import *  # noqa: F401,F403,E402
from .more_glm import *  # noqa: F401,F403,E402
from .more_continuous import *  # noqa: F401,F403,E402
from .more_multivariate import *  # noqa: F401,F403,E402
from .more_discrete import *  # noqa: F401,F403,E402
from . import ordinal, more_glm, more_continuous, more_multivariate, more_discrete  # noqa: F401,E402,E501

__all__ = (continuous.__all__ + bounded.__all__ + positive.__all__ + discrete.__all__
           + counts.__all__ + categorical.__all__
           + multivariate.__all__ + glm.__all__ + ordinal.__all__ + hmm.__all__
           + more_glm.__all__ + more_continuous.__all__ + more_multivariate.__all__
           + more_discrete.__all__)
