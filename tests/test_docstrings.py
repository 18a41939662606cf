"""Every public name has a numpydoc docstring with Parameters, Returns and Examples.

Parameters must name every parameter of the signature (``*args`` / ``**kwargs`` excepted; for a
``torch.autograd.Function``, those of ``forward``, which ``apply`` takes); functions need
Returns (Yields for generators); Examples must hold a doctest. The public methods of the
documented classes are public names too: every one defined in ebmclassifier, on the class or
on a base class of ours, follows the rules of a function (see :func:`own_methods`).

The public API is what the API reference lists (the ``autosummary`` and ``autodata`` entries of
``docs/api/*.rst``) together with ``ebmclassifier.__all__`` and the ``__all__`` of every public
module (no part of its dotted name starts with ``_``). A second test checks that the reference
lists every name of those ``__all__``, so a new public name cannot skip the documentation.
The Examples themselves run as doctests (``--doctest-modules`` in pyproject.toml).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import warnings
from pathlib import Path

import pytest
import skorch
import torch
from numpydoc.docscrape import ClassDoc, FunctionDoc, NumpyDocString

import ebmclassifier

API_DIR = Path(__file__).resolve().parents[1] / "docs" / "api"

# Written by docs/conf.py at build time (git-ignored), so not read from disk here.
GENERATED_PAGES = {"jem.rst": ("ebmclassifier.jem", ["JEMClassifier"])}

# Modules without a leading underscore that are not part of the Python API: the command line.
NOT_API = {
    "ebmclassifier.cli": "the command line, documented by its --help",
    "ebmclassifier.experiments.bench": "the 'bench' command of the command line",
    "ebmclassifier.experiments.demo": "the 'demo' command of the command line",
    "ebmclassifier.experiments.continual": "the 'continual' command of the command line",
}

_DIRECTIVE = re.compile(r"^\.\. (currentmodule|autodata|autosummary)::\s*(\S*)")


def _parse_reference(text: str) -> list[tuple[str, str]]:
    """``(module, name)`` of every autosummary and autodata entry of one API page."""
    entries, module, in_autosummary = [], None, False
    for line in text.splitlines():
        if in_autosummary:
            if not line.strip() or line.strip().startswith(":"):
                continue
            if line[0].isspace():  # a name, or ~submodule.name (shown as name)
                prefix, _, name = line.strip().lstrip("~").rpartition(".")
                entries.append((f"{module}.{prefix}" if prefix else module, name))
                continue
            in_autosummary = False
        match = _DIRECTIVE.match(line)
        if match is None:
            continue
        directive, argument = match.groups()
        if directive == "currentmodule":
            module = argument
        elif directive == "autodata":
            entries.append((module, argument))
        else:
            in_autosummary = True
    return entries


def reference_entries() -> list[tuple[str, str]]:
    entries = []
    for page in sorted(API_DIR.glob("*.rst")):
        if page.name not in GENERATED_PAGES:
            entries += _parse_reference(page.read_text())
    for module, names in GENERATED_PAGES.values():
        entries += [(module, name) for name in names]
    return entries


def public_modules() -> list[str]:
    names = ["ebmclassifier"]
    for info in pkgutil.walk_packages(ebmclassifier.__path__, "ebmclassifier."):
        parts = info.name.split(".")
        if info.name not in NOT_API and not any(p.startswith("_") for p in parts):
            names.append(info.name)
    return names


def _all_names() -> list[tuple[str, str]]:
    """``(module, name)`` of every name in the ``__all__`` of a public module."""
    pairs = []
    for module_name in public_modules():
        module = importlib.import_module(module_name)
        pairs += [(module_name, name) for name in getattr(module, "__all__", ())]
    return pairs


def _canonical(module: str, name: str, obj) -> str:
    """One id per object, wherever it is re-exported: where it is defined."""
    if inspect.isroutine(obj) or inspect.isclass(obj):
        return f"{obj.__module__}.{obj.__qualname__}"
    return f"{module}.{name}"


def _documented_objects() -> dict[str, object]:
    """Canonical id -> object, for every function, class and callable instance of the API."""
    objects = {}
    for module, name in reference_entries() + _all_names():
        obj = getattr(importlib.import_module(module), name)
        if inspect.isroutine(obj) or inspect.isclass(obj) or _is_documented_instance(obj):
            objects.setdefault(_canonical(module, name, obj), obj)
    return objects


def _is_documented_instance(obj) -> bool:
    """A callable object of one of our classes (the scorers), documented by its own __doc__."""
    return (
        callable(obj)
        and not inspect.isroutine(obj)
        and not inspect.isclass(obj)
        and type(obj).__module__.startswith("ebmclassifier")
    )


def _named_parameters(func) -> list[str]:
    """Parameters a caller names: not self / cls / ctx, nor *args / **kwargs."""
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):  # builtins without a signature (an exception's __init__)
        return []
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return [
        p.name
        for p in signature.parameters.values()
        if p.kind not in variadic and p.name not in ("self", "cls", "ctx")
    ]


def _parse(obj) -> NumpyDocString:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpydoc warns about unknown or malformed sections
        if inspect.isclass(obj):
            return ClassDoc(obj)
        if inspect.isroutine(obj):
            return FunctionDoc(obj)
        return NumpyDocString(inspect.cleandoc(obj.__doc__ or ""))


def _documented_parameters(doc: NumpyDocString) -> set[str]:
    """Names in the Parameters section; an entry may name several (``low, high : float``)."""
    names = set()
    for parameter in doc["Parameters"]:
        names.update(n.strip().lstrip("*") for n in parameter.name.split(","))
    return names


def missing_sections(obj) -> list[str]:
    doc = _parse(obj)
    if inspect.isclass(obj) and issubclass(obj, torch.autograd.Function):
        # called as Function.apply(...): the arguments and result of forward
        parameters, returns = _named_parameters(obj.forward), True
    elif inspect.isclass(obj):
        # the class's signature may be the short one help() shows (repr.short_signature);
        # __init__'s names every parameter
        parameters = list(dict.fromkeys(_named_parameters(obj) + _named_parameters(obj.__init__)))
        returns = False
    else:
        call = obj if inspect.isroutine(obj) else obj.__call__
        parameters, returns = _named_parameters(call), True
    missing = []
    if not doc["Summary"]:
        missing.append("Summary")
    undocumented = [p for p in parameters if p not in _documented_parameters(doc)]
    if undocumented:
        missing.append(f"Parameters ({', '.join(undocumented)})")
    if returns:
        generator = inspect.isgeneratorfunction(obj)
        section = "Yields" if generator else "Returns"
        if not doc[section]:
            missing.append(section)
    if not any(">>>" in line for line in doc["Examples"]):
        missing.append("Examples (with a doctest)")
    return missing


# Public methods that are documented elsewhere: an nn.Module's forward is its __call__,
# documented by the class; an autograd.Function's forward / backward / setup_context are
# called through apply, whose arguments and result the class documents; extra_repr only feeds
# repr().
NOT_DOCUMENTED_METHODS = {"forward", "backward", "setup_context", "extra_repr"}


# skorch's hooks and the skorch methods that ebmclassifier/_estimator/engine.py extends: skorch
# documents their parameters and results, ours say in a summary what they add, and tests/ tests
# them (issue #13: no doctests on internal skorch hooks).
SKORCH_HOOKS = {
    "check_data",
    "get_iterator",
    "infer",
    "initialize",
    "initialize_callbacks",
    "initialize_module",
    "load_params",
    "on_batch_begin",
    "on_batch_end",
    "on_epoch_begin",
    "on_epoch_end",
    "on_train_begin",
    "on_train_end",
    "set_params",
    "train_step",
    "train_step_single",
    "validation_step",
}


def is_skorch_hook(method) -> bool:
    """A method of ours that overrides one of skorch's hooks listed in SKORCH_HOOKS."""
    if not (inspect.isfunction(method) and "." in method.__qualname__):
        return False
    return method.__name__ in SKORCH_HOOKS and hasattr(skorch.NeuralNet, method.__name__)


def own_methods(cls, package: str = "ebmclassifier") -> list:
    """The public methods of ``cls`` defined in ``package``, on ``cls`` or any of its bases.

    Overridden definitions count too (``TrainingEngine.compute_loss`` under
    ``NGEBMClassifier.compute_loss``): each is a documented hook of its own class. Methods
    that ``cls`` inherits from torch, skorch or scikit-learn are theirs to document.
    """
    methods = []
    for klass in cls.__mro__:
        for name, attr in vars(klass).items():
            if name.startswith("_") or name in NOT_DOCUMENTED_METHODS:
                continue
            func = attr.__func__ if isinstance(attr, (staticmethod, classmethod)) else attr
            # the module of a decorated method (torch.no_grad) is the wrapped function's
            if inspect.isfunction(func) and func.__module__.split(".")[0] == package:
                methods.append(func)
    return methods


def _cases(hooks: bool = False) -> list:
    """The parameter sets, as a list: pytest 9.1 deprecates parametrizing over a generator
    (an error from pytest 10)."""
    cases = dict(_documented_objects())
    for obj in list(cases.values()):
        if inspect.isclass(obj):
            for method in own_methods(obj):
                cases.setdefault(f"{method.__module__}.{method.__qualname__}", method)
    return [
        pytest.param(obj, id=qualname)
        for qualname, obj in sorted(cases.items())
        if is_skorch_hook(obj) == hooks
    ]


@pytest.mark.parametrize("obj", _cases())
def test_public_name_has_numpydoc_sections(obj):
    missing = missing_sections(obj)
    assert not missing, f"the docstring lacks: {', '.join(missing)}"


@pytest.mark.parametrize("obj", _cases(hooks=True))
def test_skorch_hook_says_what_it_adds(obj):
    assert _parse(obj)["Summary"], "the docstring lacks: Summary"


def test_own_methods_walks_our_bases_and_skips_the_frameworks():
    from ebmclassifier import NGEBMClassifier
    from ebmclassifier.distributed import DataParallelNGEBMClassifier
    from ebmclassifier.latent.score_function import RunningMeanBaseline

    names = {m.__qualname__ for m in own_methods(DataParallelNGEBMClassifier)}
    # the mixin's hook, the estimator's override of it and the base's definition
    assert {
        "DataParallelMixin.compute_loss",
        "NGEBMClassifier.compute_loss",
        "TrainingEngine.compute_loss",
        "InferenceMixin.predict_proba",  # the batched inference the base inherits
    } <= names
    # skorch's and scikit-learn's own methods, private ones and forward are not ours to check
    assert not names & {"NeuralNet.get_params", "NeuralNet.forward", "BaseEstimator.get_params"}
    assert all(not n.split(".")[-1].startswith("_") for n in names)
    assert "RunningMeanBaseline.update" in {  # through torch.no_grad's wrapper
        m.__qualname__ for m in own_methods(RunningMeanBaseline)
    }
    assert "Module.to" not in {m.__qualname__ for m in own_methods(NGEBMClassifier)}


def test_the_reference_lists_every_public_name():
    documented = set()
    for module, name in reference_entries():
        documented.add(id(getattr(importlib.import_module(module), name)))
    unlisted = [
        f"{module}.{name}"
        for module, name in _all_names()
        if id(getattr(importlib.import_module(module), name)) not in documented
    ]
    assert not unlisted, f"add to an autosummary or autodata list in docs/api/: {unlisted}"


def test_reference_constants_have_doc_comments():
    # autodata reads a constant's "#:" comment in the module the page names; without one (or
    # under a module that only re-exports it) the page shows the docstring of tuple instead.
    undocumented = []
    for module_name, name in reference_entries():
        module = importlib.import_module(module_name)
        obj = getattr(module, name)
        if inspect.isroutine(obj) or inspect.isclass(obj) or _is_documented_instance(obj):
            continue
        comment = re.compile(rf"^#:.*\n(?:#:.*\n)*{name}\s*(?::[^=\n]*)?=", re.MULTILINE)
        if not comment.search(inspect.getsource(module)):
            undocumented.append(f"{module_name}.{name}")
    assert not undocumented, f"no '#:' comment above the assignment: {undocumented}"


def test_reference_entries_exist_and_cover_the_estimators():
    entries = reference_entries()
    for module, name in entries:  # a typo in an .rst file fails here, not only in Sphinx
        assert hasattr(importlib.import_module(module), name), f"{module}.{name}"
    assert {name for _, name in entries} >= set(ebmclassifier.__all__)


def test_the_check_sees_a_missing_section():
    def add(x, y):
        """Add.

        Parameters
        ----------
        x, y : float

        Returns
        -------
        float

        Examples
        --------
        >>> add(1.0, 2.0)
        3.0
        """
        return x + y

    def add_undocumented(x, y):
        """Add.

        Parameters
        ----------
        x : float
        """
        return x + y

    assert missing_sections(add) == []
    assert missing_sections(add_undocumented) == [
        "Parameters (y)",
        "Returns",
        "Examples (with a doctest)",
    ]


def test_the_check_sees_a_method_missing_a_section():
    class Counter:
        """Counts.

        Examples
        --------
        >>> Counter().add(1)
        1
        """

        def add(self, step):
            """Add ``step``.

            Parameters
            ----------
            step : int

            Examples
            --------
            >>> Counter().add(2)
            2
            """
            return step

        def _private(self):
            pass

    (add,) = own_methods(Counter, package=__name__.split(".")[0])
    assert add is Counter.add
    assert missing_sections(add) == ["Returns"]


def test_parse_reference_reads_autosummary_and_autodata():
    page = """
.. currentmodule:: pkg.mod

.. autosummary::
   :toctree: generated/
   :template: function.rst

   first
   ~sub.second

Text.

.. autodata:: CONSTANT
   :no-value:
"""
    assert _parse_reference(page) == [
        ("pkg.mod", "first"),
        ("pkg.mod.sub", "second"),  # ~sub.second: shown as "second"
        ("pkg.mod", "CONSTANT"),
    ]


def test_every_autosummary_template_is_where_sphinx_looks():
    # Sphinx resolves ``:template: NAME`` in templates_path (docs/_templates/NAME) and falls back
    # to its plain template, silently, when the file is elsewhere: the class pages then list no
    # methods at all (they did, before the templates moved out of _templates/autosummary/).
    sources = [*API_DIR.glob("*.rst"), API_DIR.parent / "conf.py"]
    templates = {
        name
        for source in sources
        for name in re.findall(r":template: (\S+?)(?:\\n|\s)", source.read_text())
    }
    assert {"estimator.rst", "class.rst", "function.rst"} <= templates
    for name in templates:
        assert (API_DIR.parent / "_templates" / name).is_file(), name


def test_the_parameter_sets_are_a_list_not_a_generator():
    # pytest 9.1 warns "Passing a non-Collection iterable to parametrize is deprecated"
    # (PytestRemovedIn10Warning) for a generator, which pytest 10 makes an error
    assert isinstance(_cases(), list) and isinstance(_cases(hooks=True), list)


#: What a scikit-learn user looks for on an estimator's page: the methods of scikit-learn's
#: estimator, classifier and transformer interfaces.
SKLEARN_METHODS = (
    "fit",
    "partial_fit",
    "predict",
    "predict_proba",
    "predict_log_proba",
    "decision_function",
    "score",
    "score_samples",
    "transform",
    "fit_transform",
    "get_feature_names_out",
    "set_output",
    "get_params",
    "set_params",
)


def test_every_estimator_page_lists_the_scikit_learn_methods_it_has():
    # the issue: the API page's methods table left out score, get_params and set_params
    template = (API_DIR.parent / "_templates" / "estimator.rst").read_text()
    listed = set(
        re.search(r"set user_methods = \[(.*?)\]", template)[1].replace('"', "").split(", ")
    )
    for page in sorted(API_DIR.glob("*.rst")):
        if ":template: estimator.rst" not in page.read_text():
            continue
        for module, name in _parse_reference(page.read_text()):
            cls = getattr(importlib.import_module(module), name)
            has = {method for method in SKLEARN_METHODS if hasattr(cls, method)}
            assert has <= listed, (name, sorted(has - listed))
