"""stanlite.samplers: HMC, NUTS, Riemannian HMC and ADVI on the log-density protocol.

Installed as ``stanlite.samplers`` (the repository folder ``samplers/`` is mapped into
the ``stanlite`` package by pyproject.toml). The samplers arrive with the NUTS issue;
this package is importable so that the layout and the wheel can be tested now.
"""

__all__ = []
