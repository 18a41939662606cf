"""The experiments behind the command line: ``demo``, ``compare``, ``bench`` and
``continual``.

Each module declares its command once, as a :class:`~ebmclassifier.experiments._command.Command`
named ``COMMAND`` (its options, its help, the function that runs it); :mod:`ebmclassifier.cli`
builds its parsers from :func:`commands`. The experiments reach the estimators through their
public methods only.
"""

from __future__ import annotations


def commands() -> list:
    """The commands of ``python -m ebmclassifier``, in the order ``--help`` lists them."""
    from . import bench, compare, continual, demo

    return [demo.COMMAND, compare.COMMAND, bench.COMMAND, continual.COMMAND]
