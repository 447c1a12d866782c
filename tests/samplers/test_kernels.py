"""The kernel registry and the run's settings (issue 23, point 1): the registry is
the only place that knows the sampler names, and the settings are checked once,
when made, with the front door's messages."""

import dataclasses
import pathlib

import numpy as np
import pytest

import stanlite as sl
from stanlite.samplers import kernels
from stanlite.samplers.settings import SAMPLER_DEFAULT, ChainSettings

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_registry_names_the_samplers():
    assert kernels.NAMES == ("nuts", "hmc", "rhmc")
    assert all(kernels.kernel(n).name == n for n in kernels.NAMES)
    assert kernels.kernel("nuts").segments and not kernels.kernel("hmc").segments
    assert not kernels.kernel("rhmc").euclidean


def test_no_module_but_the_registry_switches_on_a_sampler_name():
    """``sampler == "rhmc"`` and the like were decided in three files; the kernels
    answer those questions now."""
    offenders = []
    for folder in ("samplers", "stanlite"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name == "kernels.py":
                continue
            for i, line in enumerate(path.read_text().splitlines(), 1):
                code = line.split("#")[0]
                if any(f'{w} "{n}"' in code or f"{w} '{n}'" in code
                       for w in ("==", "!=") for n in kernels.NAMES):
                    offenders.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert offenders == []


def test_settings_are_frozen_and_filled_in():
    s = ChainSettings(num_warmup=10, num_draws=5, sampler="rhmc",
                      adapt_delta=SAMPLER_DEFAULT)
    from stanlite.samplers.rhmc import ADAPT_DELTA, OPTION_DEFAULTS
    assert s.adapt_delta == ADAPT_DELTA
    assert set(s.sampler_options) == set(OPTION_DEFAULTS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.num_draws = 3
    assert ChainSettings(adapt_delta=SAMPLER_DEFAULT).adapt_delta == 0.8
    assert s.replace(num_draws=7).num_draws == 7


@pytest.mark.parametrize("kw, message", [
    (dict(sampler="nust"), "sampler must be one of 'nuts', 'hmc', 'rhmc', got 'nust'; "
     "did you mean 'nuts'?"),
    (dict(num_draws=-1), "draws must be an integer >= 0, got -1"),
    (dict(num_warmup=1.5), "warmup must be an integer >= 0, got 1.5"),
    (dict(adapt_delta=None), r"adapt_delta must be a number in \(0, 1\), got None"),
    (dict(max_treedepth=31), r"max_treedepth must be an integer in 1..30, got 31"),
    (dict(sampler_options={"alpha": 1.0}), "sampler_options are for sampler='rhmc', "
     "not 'nuts'"),
    (dict(sampler="rhmc", adaptation="nutpie"), "adapts a Euclidean metric"),
    (dict(inv_metric=np.ones(2), dim=3), r"must have shape \(3,\)"),
])
def test_settings_are_checked_with_the_front_doors_messages(kw, message):
    with pytest.raises(sl.ArgumentError, match=message):
        ChainSettings(**kw)
