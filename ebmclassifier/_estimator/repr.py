"""The estimators' parameters as scikit-learn reads them: the signature and the ``repr``.

scikit-learn prints ``LogisticRegression(C=0.5)``: the parameters the user set, whether the
estimator is fitted or not. skorch's nets print their class path and, once initialized, the
whole torch network, which hides those parameters. :class:`ParamsReprMixin` gives the
estimators scikit-learn's form, and a signature of ``__init__`` that names every parameter:
the estimators pass most of theirs on to the base and to skorch through ``**kwargs``, so
their own signature shows few, and scikit-learn, which reads the defaults from it (in
the ``repr`` of a ``Pipeline`` or a search, in the HTML diagram of a notebook), took every
other parameter for one the user changed. The full signature (:func:`full_signature`: the
class's own parameters, then those of each ``__init__`` up the hierarchy that it passes on)
is what scikit-learn reads. ``help`` and the API reference show :func:`short_signature`
instead, the class's ``__signature__``: its own parameters and the common training ones, where
the full list opened ``help(NGEBMClassifier)`` on some 1,100 characters of every engine
parameter before a word of what the class is (the docstring's Parameters list them all).
Routed parameters (``module__hidden_sizes``) have no default and are always shown. The fitted
network is ``module_``.
"""

from __future__ import annotations

import inspect

__all__ = ["ParamsReprMixin", "changed_params", "full_signature", "short_signature"]

_WIDTH = 79  # scikit-learn's printer wraps at this width too
_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)

#: The training parameters every estimator shares that :func:`short_signature` shows too.
COMMON_PARAMETERS = ("lr", "max_epochs", "batch_size", "random_state", "device", "verbose")


def full_signature(cls: type) -> inspect.Signature:
    """The signature of ``cls.__init__`` with the parameters its ``**kwargs`` pass on.

    The class's own parameters first, then, keyword-only, those of each ``__init__`` up the
    method resolution order that are not named yet, then ``**kwargs`` (routed parameters).
    Names in a class's ``_not_parameters`` (what an ``__init__`` removes) are left out.

    Parameters
    ----------
    cls : type

    Returns
    -------
    inspect.Signature

    Examples
    --------
    >>> from ebmclassifier import NGEBMClassifier
    >>> parameters = full_signature(NGEBMClassifier).parameters
    >>> list(parameters)[:3], parameters["lr"].default, parameters["warm_start"].default
    (['self', 'module', 'beta'], 0.001, False)
    """
    excluded = {name for klass in cls.__mro__ for name in getattr(klass, "_not_parameters", ())}
    own: list[inspect.Parameter] = []
    kwargs = None
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None or klass is object:
            continue
        for parameter in inspect.signature(init).parameters.values():
            if parameter.kind is inspect.Parameter.VAR_KEYWORD:
                kwargs = kwargs or parameter
            elif parameter.kind not in _VARIADIC and parameter.name not in excluded:
                if all(parameter.name != p.name for p in own):
                    if own and parameter.kind is not inspect.Parameter.POSITIONAL_ONLY:
                        parameter = _keyword_only(parameter, own)
                    own.append(parameter)
        if kwargs is None:  # this __init__ passes nothing on
            break
    return inspect.Signature(own + ([kwargs] if kwargs is not None else []))


def short_signature(cls: type, own: list[str] | None = None) -> inspect.Signature:
    """The signature ``help(cls)`` and the API reference show: the parameters of the class's
    own ``__init__`` and the common training ones (:data:`COMMON_PARAMETERS`), then
    ``**kwargs`` for every other (which the docstring lists), without type annotations, a
    class or function default shown by its name.

    Parameters
    ----------
    cls : type
    own : list of str or None, default=None
        The names the class's own ``__init__`` declares; None reads them from it.

    Returns
    -------
    inspect.Signature

    Examples
    --------
    >>> from ebmclassifier import NGEBMClassifier
    >>> shown = list(short_signature(NGEBMClassifier).parameters)
    >>> shown[:3], shown[-1], "compile" in shown
    (['module', 'beta', 'gamma'], 'kwargs', False)
    """
    if own is None:  # the names the function declares (its __signature__ is the full one)
        code = cls.__dict__["__init__"].__code__
        own = list(code.co_varnames[: code.co_argcount + code.co_kwonlyargcount])
    shown = [
        _readable(p)
        for name, p in full_signature(cls).parameters.items()
        if name != "self"
        and p.kind is not inspect.Parameter.VAR_KEYWORD
        and (name in own or name in COMMON_PARAMETERS)
    ]
    rest = [p for p in full_signature(cls).parameters.values() if p.kind in _VARIADIC]
    return inspect.Signature(shown + rest)


class _Named:
    """A default shown by its name (``CrossEntropyLoss``), not by ``<class '...'>``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


def _readable(parameter: inspect.Parameter) -> inspect.Parameter:
    default = parameter.default
    if inspect.isclass(default) or inspect.isfunction(default):
        default = _Named(default.__qualname__)
    return parameter.replace(annotation=inspect.Parameter.empty, default=default)


def _keyword_only(parameter: inspect.Parameter, before: list) -> inspect.Parameter:
    """``parameter`` as keyword-only where a keyword-only one precedes it (Python's order)."""
    if any(p.kind is inspect.Parameter.KEYWORD_ONLY for p in before):
        return parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY)
    return parameter


def _defaults(cls: type) -> dict:
    """``{parameter: default}`` of the parameters of :func:`full_signature` that have one."""
    return {
        name: p.default
        for name, p in full_signature(cls).parameters.items()
        if p.default is not inspect.Parameter.empty
    }


def _is_default(value, default) -> bool:
    if value is default:
        return True
    if type(value) is not type(default):  # 1 against 1.0, a list against a tuple: shown
        return False
    try:
        return bool(value == default)
    except (TypeError, ValueError, RuntimeError):  # arrays, tensors
        return repr(value) == repr(default)


def changed_params(estimator) -> dict:
    """The parameters of ``estimator`` that differ from their defaults, sorted by name.

    Parameters
    ----------
    estimator : estimator with ``get_params``

    Returns
    -------
    dict

    Examples
    --------
    >>> from ebmclassifier import NGEBMClassifier
    >>> changed_params(NGEBMClassifier(beta=0.25, max_epochs=50, module__hidden_sizes=(8,)))
    {'beta': 0.25, 'module__hidden_sizes': (8,)}
    """
    defaults = _defaults(type(estimator))
    return {
        name: value
        for name, value in sorted(estimator.get_params(deep=False).items())
        if name not in defaults or not _is_default(value, defaults[name])
    }


def _format(value) -> str:
    """A class or function by its name (``MLP``, not ``<class 'ebmclassifier.nn.MLP'>``)."""
    if inspect.isclass(value) or inspect.isfunction(value):
        return value.__qualname__
    return repr(value)


class ParamsReprMixin:
    """``repr`` as scikit-learn's estimators print it: ``NGEBMClassifier(beta=0.25)``.

    Examples
    --------
    >>> from ebmclassifier import NGEBMClassifier
    >>> from ebmclassifier.nn import MLP
    >>> NGEBMClassifier(beta=0.25, module=MLP, module__hidden_sizes=(8,))
    NGEBMClassifier(beta=0.25, module=MLP, module__hidden_sizes=(8,))
    >>> NGEBMClassifier()
    NGEBMClassifier()
    """

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is not None:  # scikit-learn reads every parameter and its default here
            own = list(inspect.signature(init).parameters)
            init.__signature__ = full_signature(cls)
            cls.__signature__ = short_signature(cls, own)  # what help() and Sphinx show

    def __repr__(self) -> str:
        name = type(self).__name__
        items = [f"{k}={_format(v)}" for k, v in changed_params(self).items()]
        one_line = f"{name}({', '.join(items)})"
        if len(one_line) <= _WIDTH:
            return one_line
        indent = "\n" + " " * (len(name) + 1)
        return f"{name}({(',' + indent).join(items)})"
