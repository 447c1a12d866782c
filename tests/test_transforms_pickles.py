"""stanlite.transforms after its split into a package (issue 23): the import path of
every transform stays ``stanlite.transforms.X``, and a model pickled before the split
(its transforms and the shortcuts ``shaped_constrain`` hands the model name
``stanlite.transforms.<class>``) still loads and constrains as a freshly made one."""

import base64
import pickle

import numpy as np

from stanlite import transforms as T

# pickle.dumps (protocol 4) of the objects below, made by the single-module
# stanlite/transforms.py of commit 98a0200
OLD = base64.b64decode(
    "gASVsgEAAAAAAABdlCiME3N0YW5saXRlLnRyYW5zZm9ybXOUjAVMb3dlcpSTlCmBlH2UjAhkZWNsYXJlZJR9"
    "lIwFbG93ZXKURwAAAAAAAAAAc3NiaAGMCkxvd2VyVXBwZXKUk5QpgZR9lGgGfZQoaAhHv/AAAAAAAACMBXVw"
    "cGVylEdAAAAAAAAAAHVzYmgBjAdTaW1wbGV4lJOUKYGUfZRoBn2Uc2JoAYwKQ29yck1hdHJpeJSTlCmBlH2U"
    "aAZ9lHNiaAGMEUNob2xlc2t5RmFjdG9yQ292lJOUKYGUfZRoBn2Uc2JoAYwJU3VtVG9aZXJvlJOUKYGUfZRo"
    "Bn2Uc2JoAYwOX1NoYXBlZEJvdW5kZWSUk5QpgZROfZQojARjYXNllEsBjAJsYpRHAAAAAAAAAACMAnVilE6M"
    "AW6USwJ1hpRiaAGMEF9zaGFwZWRfaWRlbnRpdHmUk5RoAYwRX1NoYXBlZFN0cnVjdHVyZWSUk5QpgZROfZQo"
    "jAl0cmFuc2Zvcm2UaAGMCUNvdk1hdHJpeJSTlCmBlH2UaAZ9lHNijAViYXRjaJQpjARkaW1zlEsDSwOGlHWG"
    "lGJlLg==")


def _fresh():
    return [T.make("real", lower=0.0), T.make("vector", lower=-1.0, upper=2.0),
            T.make("simplex"), T.make("corr_matrix"), T.make("cholesky_factor_cov"),
            T.make("sum_to_zero_vector"), T.Lower(0.0).shaped_constrain((2,), 0.0)[0],
            T.make("real").shaped_constrain(())[0],
            T.make("cov_matrix").shaped_constrain((3, 3))[0]]


def test_every_name_stays_importable_from_stanlite_transforms():
    for name in T.__all__:
        assert hasattr(T, name), name
    for name in ("_Elementwise", "_Structured", "_ShapedBounded", "_ShapedStructured",
                 "_shaped_identity"):
        obj = getattr(T, name)
        assert pickle.loads(b"cstanlite.transforms\n" + name.encode() + b"\n.") is obj


def test_a_pickle_made_before_the_split_loads_and_constrains_the_same():
    old, new = pickle.loads(OLD), _fresh()
    assert [repr(t) for t in old[:6]] == [repr(t) for t in new[:6]]
    assert [type(t) for t in old] == [type(t) for t in new]
    rng = np.random.default_rng(3)
    shapes = [(), (3,), (4,), (3, 3), (3, 2), (4,)]
    for a, b, shape in zip(old[:6], new[:6], shapes):
        x = rng.standard_normal(b.free_size(shape))
        ya, lja = a.constrain(x, shape)
        yb, ljb = b.constrain(x, shape)
        assert np.array_equal(ya, yb) and lja == ljb, repr(b)
    for a, b, n in zip(old[6:], new[6:], (2, 1, 6)):
        x = rng.standard_normal(n) if n > 1 else float(rng.standard_normal())
        (ya, lja), (yb, ljb) = a(x), b(x)
        assert np.array_equal(ya, yb) and lja == ljb
