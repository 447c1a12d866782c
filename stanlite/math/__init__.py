"""stanlite's math library: differentiable functions with Stan's names.

Import order matters only in that :mod:`.structure` (indexing, reshaping) and
:mod:`.arithmetic` (the operators) come first; every other module builds on them.
"""

import sys as _sys

from ..autodiff import library as _library

# the AD core looks up the library functions it calls by name (autodiff/library.py):
# this package's namespace, registered before its modules fill it
_library.register_namespace(_sys.modules[__name__])

from .structure import *  # noqa: F401,F403
from .arithmetic import *  # noqa: F401,F403
from .elementwise import *  # noqa: F401,F403
from .reductions import *  # noqa: F401,F403
from .linalg import *  # noqa: F401,F403
from .special import *  # noqa: F401,F403
from .incomplete import *  # noqa: F401,F403
from . import structure, arithmetic, elementwise, reductions, linalg, special, incomplete  # noqa: F401,E501

__all__ = (structure.__all__ + arithmetic.__all__ + elementwise.__all__
           + reductions.__all__ + linalg.__all__ + special.__all__ + incomplete.__all__)
