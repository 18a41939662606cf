"""The experiments behind the command line: ``demo``, ``compare``, ``bench`` and
``continual``.

Each command is declared once, as a :class:`~ebmclassifier.experiments._command.Command`
named ``COMMAND`` (its options, its help, the function that runs it) in a module of its own
that imports neither torch nor the estimators (``_demo_options.py``, ``_compare_options.py``,
...); :mod:`ebmclassifier.cli` builds its parsers from :func:`commands`, and the module that
runs a command is imported when it starts. The experiments reach the estimators through their
public methods only.
"""

from __future__ import annotations


def commands() -> list:
    """The commands of ``python -m ebmclassifier``, in the order ``--help`` lists them."""
    from . import _bench_options, _compare_options, _continual_options, _demo_options

    return [
        _demo_options.COMMAND,
        _compare_options.COMMAND,
        _bench_options.COMMAND,
        _continual_options.COMMAND,
    ]
