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
from .experiments._command import CommandError

__all__ = ["main", "build_parser"]


class _UsageError(Exception):
    """A bad option, as argparse found it: ``prog`` is the (sub)command's."""

    def __init__(self, prog: str, message: str):
        super().__init__(message)
        self.prog = prog


class _Parser(argparse.ArgumentParser):
    """argparse's parser, but a bad option is an exception, so that ``main`` prints one line
    and returns 2 (argparse would print the usage and exit the interpreter)."""

    def error(self, message: str):
        raise _UsageError(self.prog, message)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every command registered.

    Returns
    -------
    parser : argparse.ArgumentParser
        ``python -m ebmclassifier``'s parser: the commands ``demo``, ``compare`` and ``bench``.

    Examples
    --------
    >>> args = build_parser().parse_args(["compare", "--models", "ce,ngebm", "--seeds", "1"])
    >>> args.models, args.seeds, args.data  # the main job's two data sets by default
    (['ce', 'ngebm'], 1, ['digits', 'mnist1d'])
    """
    parser = _Parser(
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
        The exit status: 0 on success; 2 when an option or the data is wrong (an unknown or
        out-of-range option, a device this machine lacks, an ``--out`` that cannot be written,
        a missing or malformed data file, labels that are not classes), found before any
        training; 1 when the run itself went wrong (a fit that failed: the other fits still
        run and are reported, then the failed ones are listed); 130 when interrupted (Ctrl-C:
        the report is left as it was, or written whole when it was being written). Each error
        is one line on
        stderr, ``python -m ebmclassifier COMMAND: error: ...``. Without a command the help
        is printed. ``--help`` and ``--version`` print and exit, as argparse does.

    Examples
    --------
    >>> import contextlib, io
    >>> with contextlib.redirect_stdout(io.StringIO()) as printed:
    ...     status = main([])
    >>> status, "compare" in printed.getvalue()
    (0, True)
    >>> with contextlib.redirect_stderr(io.StringIO()) as errors:
    ...     status = main(["compare", "--seeds", "0"])
    >>> status
    2
    >>> print(errors.getvalue().replace("python -m ebmclassifier compare: ", ""), end="")
    error: argument --seeds: expected an int >= 1 and <= 100 (each seed trains ...), got '0'
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except _UsageError as exc:
        return _error(exc.prog, exc, 2)
    if not hasattr(args, "func"):
        parser.print_help()
        return 0
    prog = f"{parser.prog} {args.command}"
    from .experiments._report_files import InterruptedAfterReport  # with the command's imports

    try:
        return args.func(args)
    except CommandError as exc:
        return _error(prog, exc, exc.status)
    except (OSError, ValueError) as exc:  # bad data, files or options: a message, no traceback
        return _error(prog, exc, 2)
    except InterruptedAfterReport as exc:
        return _error(prog, exc, 130)
    except KeyboardInterrupt as exc:  # Ctrl-C, also inside a fit (skorch's swallowed one)
        detail = f" ({exc})" if str(exc) else ""
        return _error(
            prog,
            f"interrupted{detail}. The command stopped before writing its report: what --out "
            "held before is as it was.",
            130,
        )


def _error(prog: str, exc: Exception, status: int) -> int:
    """Print ``exc`` as one ``error:`` line (a message of several lines joined by "; ")."""
    message = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    print(f"{prog}: error: {message}", file=sys.stderr)
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
