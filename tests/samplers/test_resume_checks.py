"""``resume_from`` and ``load_fit(model=)`` refuse a fit of a model with other
parameters (names, shapes, constraints), whatever ``data_changed_ok`` says: its
chains would be continued in another posterior (held-out corpus, issue 19)."""

import warnings

import pytest

import stanlite as sl


class A(sl.Model):
    a = sl.param.vector(2)

    def log_prob(self, a):
        return sl.normal_lpdf(a, 10, 0.1)


class B(sl.Model):
    b = sl.param.real()

    def log_prob(self, b):
        return sl.normal_lpdf(b, 0, 1)


class BPositive(B):
    """B's parameter constrained to be positive (B's log_prob)."""
    b = sl.param.real(lower=0)


class C(sl.Model):
    c = sl.param.real()

    def log_prob(self, c):
        return sl.normal_lpdf(c, 10, 0.1)


class Sized(sl.Model):
    N = sl.data.int(lower=1)
    v = sl.param.vector("N")

    def log_prob(self, v):
        return sl.normal_lpdf(v, 0, 1)


RUN = dict(progress=False, parallel=False)


def _fit(model, **kw):
    return model.sample(chains=1, draws=10, warmup=10, seed=1, **RUN, **kw)


@pytest.mark.parametrize("changed_ok", [False, True])
def test_resume_from_a_model_with_other_parameter_names(changed_ok):
    # same dimension (one real each): accepted and mixed before
    with pytest.raises(sl.ArgumentError, match=r"model C with parameters \[c\], "
                       r"this model B has \[b\]"):
        B().sample(resume_from=_fit(C()), draws=30, data_changed_ok=changed_ok, **RUN)


@pytest.mark.parametrize("changed_ok", [False, True])
def test_resume_from_a_model_of_another_dimension(changed_ok):
    # was a ValueError about the diag_e inverse metric, deep in the sampler
    with pytest.raises(sl.ArgumentError, match=r"model A with parameters \[a\]"):
        B().sample(resume_from=_fit(A()), data_changed_ok=changed_ok, **RUN)


def test_resume_from_other_constraints_or_shapes():
    with pytest.raises(sl.ArgumentError, match=r"b is real there, real<lower=0> here"):
        BPositive().sample(resume_from=_fit(B()), **RUN)
    with pytest.raises(sl.ArgumentError, match=r"v is vector\[2\] there, vector\[3\] "):
        Sized(N=3).sample(resume_from=_fit(Sized(N=2)), data_changed_ok=True, **RUN)


def test_resume_from_a_renamed_class_with_the_same_parameters_still_works():
    class A2(sl.Model):
        a = sl.param.vector(2)

        def log_prob(self, a):
            return sl.normal_lpdf(a, 10, 0.1)
    with pytest.warns(RuntimeWarning, match="model class named A"):
        fit = A2().sample(resume_from=_fit(A()), draws=15, **RUN)
    assert fit["a"].shape == (1, 15, 2)


def test_load_fit_and_resume_from_file_with_a_model_of_other_parameters(tmp_path):
    path = _fit(A()).save(tmp_path / "a.nc")
    with pytest.raises(sl.ModelError, match=r"model A with parameters \[a\], this "
                       r"model B has \[b\]"):
        sl.load_fit(path, model=B())
    loaded = sl.load_fit(path)
    with pytest.raises(sl.ArgumentError, match=r"model A with parameters \[a\]"):
        B().sample(resume_from=loaded, data_changed_ok=True, **RUN)
    # the declarations are recorded in the file: a constraint differs, names agree
    path = _fit(B()).save(tmp_path / "b.nc")
    with pytest.raises(sl.ModelError, match=r"b is real there, real<lower=0> here"):
        sl.load_fit(path, model=BPositive())
    with pytest.raises(sl.ArgumentError, match=r"b is real there, real<lower=0> here"):
        BPositive().sample(resume_from=sl.load_fit(path), **RUN)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = B().sample(resume_from=sl.load_fit(path, model=B()), draws=12, **RUN)
    assert again["b"].shape == (1, 12)
