"""stanlite.models: the model zoo, one module per model, with default data in data/.

Installed as ``stanlite.models`` (the folder ``models/`` is mapped into the
``stanlite`` package by pyproject.toml). Zoo models arrive with the modeling issue.
"""

__all__ = []
