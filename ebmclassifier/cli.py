"""The command line: ``python -m ebmclassifier <command> ...``.

Each command is declared once, with its options, in its module of
:mod:`ebmclassifier.experiments`; this module only builds the parsers from those declarations
and runs the chosen command.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import __version__
from .experiments import commands

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every command registered.

    Returns
    -------
    parser : argparse.ArgumentParser
        ``python -m ebmclassifier``'s parser: the commands ``demo``, ``compare`` and ``bench``.

    Examples
    --------
    >>> args = build_parser().parse_args(["compare", "--models", "ce,ngebm", "--seeds", "1"])
    >>> args.models, args.seeds, args.data
    (['ce', 'ngebm'], 1, 'digits')
    """
    parser = argparse.ArgumentParser(
        prog="python -m ebmclassifier",
        description="Energy-based classifiers as scikit-learn estimators.",
    )
    parser.add_argument("--version", action="version", version=f"ebmclassifier {__version__}")
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND")
    for command in commands():
        command.add_to(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line (``python -m ebmclassifier``).

    Parameters
    ----------
    argv : sequence of str or None, default=None
        The arguments after the program name; None reads ``sys.argv``.

    Returns
    -------
    status : int
        The exit status: 0 on success, 2 when the data or an option is wrong (missing files,
        an unknown model or network; the message goes to stderr). Without a command the help
        is printed. ``--help`` and ``--version`` print and exit, as argparse does.

    Examples
    --------
    >>> import contextlib, io
    >>> with contextlib.redirect_stdout(io.StringIO()) as printed:
    ...     status = main([])
    >>> status, "compare" in printed.getvalue()
    (0, True)
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):
        parser.print_help()
        return 0
    try:
        return args.func(args)
    except (FileNotFoundError, ValueError) as exc:  # bad data or options: a message, no traceback
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
