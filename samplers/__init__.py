"""stanlite.samplers: HMC, NUTS, Riemannian HMC, ADVI, Pathfinder and the optimizers
on the log-density protocol.

This folder (``samplers/`` at the repository root) is the package ``stanlite.samplers``:
pyproject.toml's ``package-dir`` maps it into ``stanlite`` in an installed copy, and
stanlite/__init__.py appends the repository root to ``stanlite.__path__`` for a
checkout. In the layering (docs/architecture.md) it stands above the model and the
fits and below the inference front door (stanlite/inference.py): modules here import
``stanlite.model``, ``stanlite.fit`` and below, never ``stanlite.inference``.
"""

__all__ = []
