"""Docstrings written once: shared parameter text filled into the docstrings that use it.

:func:`fill_docstring` is the one helper; the fragments belong with their concept (the latent
layer's ``PARAMETER_DOCS`` (``latent/polytope.py``), the tree algorithms'
``TREE_PARAMETER_DOCS``).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from typing import TypeVar

__all__ = ["fill_docstring"]

_Documented = TypeVar("_Documented")

_PLACEHOLDER = re.compile(r"^( *)\{(\w+)\}$", re.MULTILINE)


def fill_docstring(fragments: dict[str, str]) -> Callable[[_Documented], _Documented]:
    """Decorator: each docstring line ``{name}`` becomes ``fragments[name]``, indented as it.

    Shared parameter text is so written once (the latent layer's ``PARAMETER_DOCS``; the tree
    algorithms share ``scores`` and ``lengths`` the same way) and read where it is used, by
    ``help``, numpydoc and Sphinx alike, since the docstring is filled when the module is
    imported.

    Parameters
    ----------
    fragments : dict of str to str
        Text by name, unindented; a placeholder without a fragment is a ``KeyError``.

    Returns
    -------
    callable
        Fills the docstring of the function or class it decorates and returns it.

    Examples
    --------
    >>> def half(x):
    ...     return x / 2
    >>> half.__doc__ = "Half of ``x``.\\n\\n    {x}\\n"
    >>> print(fill_docstring({"x": "x : float\\n    A number."})(half).__doc__)
    Half of ``x``.
    <BLANKLINE>
        x : float
            A number.
    <BLANKLINE>
    """

    def fill(documented: _Documented) -> _Documented:
        documented.__doc__ = _PLACEHOLDER.sub(
            lambda m: textwrap.indent(fragments[m.group(2)], m.group(1)), documented.__doc__
        )
        return documented

    return fill
