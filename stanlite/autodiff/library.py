"""The functions of the math layer that the AD core calls, handed in by that layer.

The AD core sits below the math library (docs/architecture.md) and never imports it.
A few of its routines still call library functions at run time: the Jacobians of
:mod:`.functional` stack and transpose traced rows, the derivative declarations of
:mod:`.derivative` name the primitives they call (``"g * sign(x)"``), the code
generator replays ``sum`` and indexing nodes with their backward helpers, the
interpreter lowers a binomial's constant ``lchoose``. The math package registers its
namespace here when it is imported (:func:`register_namespace`) and its private
helpers by name (:func:`provide`); the core looks names up with :func:`lookup`.

The operators of traced values have their own registration (:mod:`.operators`).

>>> import stanlite
>>> from stanlite.autodiff import library
>>> library.lookup("stack") is stanlite.stack
True
"""

__all__ = ["provide", "register_namespace", "lookup"]

_PROVIDED = {}          # name -> function handed in by name (helpers, not public)
_NAMESPACES = []        # modules whose public attributes are looked up by name


def provide(**functions):
    """Hand the core functions by name (``provide(_expand_back=_expand_back)``)."""
    _PROVIDED.update(functions)


def register_namespace(module):
    """Make the public names of ``module`` (the math package) visible to
    :func:`lookup`. The module may still be importing: names are read at lookup."""
    if module not in _NAMESPACES:
        _NAMESPACES.append(module)


def lookup(name, default=LookupError):
    """The function registered as ``name``: one handed in by :func:`provide`, else an
    attribute of a registered namespace. Missing: ``default`` if given, else a
    LookupError naming what to import."""
    fn = _PROVIDED.get(name)
    if fn is not None:
        return fn
    for ns in _NAMESPACES:
        fn = getattr(ns, name, None)
        if fn is not None:
            return fn
    if default is LookupError:
        raise LookupError(f"the AD core needs the library function {name!r}, which no "
                          "layer has registered: import stanlite (its math package "
                          "registers at import)")
    return default
