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
is also what ``help`` and the API reference show. Routed parameters (``module__hidden_sizes``)
have no default and are always shown. The fitted network is ``module_``.
"""

from __future__ import annotations

import inspect

__all__ = ["ParamsReprMixin", "changed_params", "full_signature"]

_WIDTH = 79  # scikit-learn's printer wraps at this width too
_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


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
        if init is not None:  # help(), Sphinx and scikit-learn's repr read every parameter
            init.__signature__ = full_signature(cls)

    def __repr__(self) -> str:
        name = type(self).__name__
        items = [f"{k}={_format(v)}" for k, v in changed_params(self).items()]
        one_line = f"{name}({', '.join(items)})"
        if len(one_line) <= _WIDTH:
            return one_line
        indent = "\n" + " " * (len(name) + 1)
        return f"{name}({(',' + indent).join(items)})"
