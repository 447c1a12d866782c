"""Shared test configuration: deterministic seeds, paths to ../shared (optional)."""

import pathlib

import numpy as np
import pytest

SHARED = pathlib.Path(__file__).resolve().parents[2] / "shared"


@pytest.fixture
def rng():
    """A fixed-seed generator: every test is deterministic."""
    return np.random.default_rng(20261121)


@pytest.fixture
def shared_dir():
    """../shared beside the checkout; tests needing it skip cleanly when it is absent."""
    if not SHARED.is_dir():
        pytest.skip("../shared is not present (it is optional for users)")
    return SHARED
