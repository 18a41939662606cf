"""A command of the command line, its options declared once, each with its own check.

Each experiment module declares one :class:`Command`: its name, its help, its options and the
function that runs it. The command line (:mod:`ebmclassifier.cli`) builds its parsers from these
declarations, and a command that turns its options into a configuration object, or writes the
command line that reproduces a run, reads the same declarations (:meth:`Option.spell`,
:attr:`Option.field`), so an option is written in one place.

An option's argparse ``type`` is also its check: :class:`Number` (a range), :class:`CommaList`,
:class:`DeviceName` (the library's own device resolution) and :class:`OutputPath` (a folder or
file that can be written). argparse runs them while it parses, so a bad value is reported
before any data is loaded or any model trained; :meth:`Command.start` then runs the command's
checks across options (``check``), makes and probes the output paths, which only trying
reveals, and runs the command. A command that fails after that raises :class:`CommandError`;
the command line prints either as one ``error:`` line.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import shlex
import tempfile
import textwrap
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from threadpoolctl import threadpool_limits


class CommandError(Exception):
    """A command failed; the command line prints ``message`` as one line and exits ``status``.

    Parameters
    ----------
    message : str
    status : int, default=1
        1: the run went wrong (e.g. a fit failed); 2: an option or a file is wrong.
    """

    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


class Deferred:
    """A function named by its module and its name, imported when it is first called.

    A command's declaration names the functions that run and check it this way, so that the
    command line builds its parsers, prints ``--help`` and reports a bad option without
    importing what runs the commands (torch among it).

    Parameters
    ----------
    module : str
        The module, relative to :mod:`ebmclassifier.experiments` (``".compare"``) or absolute.
    name : str
        The function's name in it.

    Examples
    --------
    >>> run = Deferred(".demo", "format_demo")
    >>> run
    Deferred('.demo', 'format_demo')
    >>> run.function().__name__  # imported now
    'format_demo'
    """

    def __init__(self, module: str, name: str):
        self.module, self.name = module, name

    def function(self) -> Callable:
        """The function, its module imported."""
        return getattr(importlib.import_module(self.module, __package__), self.name)

    def __call__(self, *args, **kwargs):
        return self.function()(*args, **kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.module!r}, {self.name!r})"


class Number:
    """An argparse ``type``: a finite int or float in a range, refused with the range otherwise.

    Parameters
    ----------
    kind : {int, float}
    low : number or None, default=None
        The smallest value allowed (``low_open``: values must be greater).
    low_open : bool, default=False
    also : tuple, default=()
        Values allowed outside the range, with what they mean (``{-1: "the whole split"}``).
    high : number or None, default=None
        The largest value allowed: the most a run can sensibly take.
    why : str, default=""
        Why ``high`` is the limit, said when a value above it is refused.

    Examples
    --------
    >>> Number(int, low=1)("3"), Number(float, low=0, low_open=True).describe()
    (3, 'a finite float > 0')
    >>> Number(int, low=1)("0")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: expected an int >= 1, got '0'
    >>> Number(int, low=1, high=100, why="seeds")("1000")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: expected an int >= 1 and <= 100 (seeds), got '1000'
    """

    def __init__(
        self,
        kind: type,
        low=None,
        *,
        low_open: bool = False,
        also: dict | None = None,
        high=None,
        why: str = "",
    ):
        self.kind, self.low, self.low_open, self.also = kind, low, low_open, dict(also or {})
        self.high, self.why = high, why
        self.__name__ = kind.__name__  # argparse names the type in its own messages

    def describe(self) -> str:
        """``"an int >= 1"``, ``"a finite float > 0"``: what the option takes."""
        what = "an int" if self.kind is int else "a finite float"
        if self.low is not None:
            what += f" {'>' if self.low_open else '>='} {self.low}"
        if self.high is not None:
            what += f" and <= {self.high}" + (f" ({self.why})" if self.why else "")
        return what + "".join(f" or {value} ({meaning})" for value, meaning in self.also.items())

    def __call__(self, text: str):
        try:
            value = self.kind(text)
        except ValueError:
            value = None
        if value is None or not self._allowed(value):
            raise argparse.ArgumentTypeError(f"expected {self.describe()}, got {text!r}")
        return value

    def _allowed(self, value) -> bool:
        if value in self.also:
            return True
        if not math.isfinite(value) or (self.high is not None and value > self.high):
            return False
        return self.low is None or (value > self.low if self.low_open else value >= self.low)


class CommaList:
    """An argparse ``type``: ``"a,b,c"`` -> ``[kind("a"), kind("b"), kind("c")]``.

    Each item is stripped of the blanks around it (``"a, b"`` is ``["a", "b"]``). The list must
    hold at least one item and no item twice.

    Parameters
    ----------
    kind : type or Number
        The type of each item (``str``, ``float``, ``Number(float, low=0)``, ...).
    """

    def __init__(self, kind):
        self.kind = kind
        self.__name__ = f"comma-separated {kind.__name__}"  # argparse names the type in errors

    def __call__(self, text: str) -> list:
        values = []
        for part in (part.strip() for part in text.split(",")):
            if not part:
                continue
            try:
                values.append(self.kind(part))
            except (ValueError, argparse.ArgumentTypeError):
                raise argparse.ArgumentTypeError(
                    f"expected a comma-separated list, each {self._item()}; {part!r} in "
                    f"{text!r} is not"
                ) from None
        if not values:
            raise argparse.ArgumentTypeError(f"expected at least one value, got {text!r}")
        repeated = sorted({str(v) for v in values if values.count(v) > 1})
        if repeated:
            raise argparse.ArgumentTypeError(f"{text!r} lists {', '.join(repeated)} more than once")
        return values

    def _item(self) -> str:
        return self.kind.describe() if isinstance(self.kind, Number) else f"a {self.kind.__name__}"

    def spell(self, values: Sequence) -> str:
        """The list written back as the option takes it (floats in ``%g`` form)."""
        if getattr(self.kind, "kind", self.kind) is float:
            return ",".join(f"{v:g}" for v in values)
        return ",".join(str(v) for v in values)


class LayerSizes(CommaList):
    """An argparse ``type``: ``"256,256"`` -> ``[256, 256]``, layer sizes (which may repeat)."""

    def __init__(self):
        super().__init__(Number(int, 1))
        self.__name__ = "comma-separated layer sizes"

    def __call__(self, text: str) -> list:
        sizes = []
        for part in text.split(","):  # one at a time: the parent refuses repeated values
            sizes += super().__call__(part)
        return sizes


class DeviceName:
    """An argparse ``type``: a device the estimators can compute on here, kept as written.

    The name goes through the library's own resolution (``"auto"``, ``"cpu"``, ``"cuda[:N]"``;
    :func:`ebmclassifier._utils.device.resolve_device`, which refuses ``"meta"``, a missing backend
    and a CUDA index beyond the GPUs), then torch must be able to allocate on the device.
    ``"auto"``, every command's default, is checked when the command starts (:meth:`prepare`),
    so that parsing it, and reporting another option's error, imports no torch.
    """

    __name__ = "device"

    def __call__(self, text: str) -> str:
        if text != "auto":
            self.prepare(text)
        return text

    def prepare(self, text: str) -> None:
        """Resolve and probe the device, importing torch.

        Raises
        ------
        argparse.ArgumentTypeError
            When the estimators cannot compute on it here.
        """
        import torch

        from .._utils.device import resolve_device

        try:
            device = resolve_device(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        problem = _allocation_problem(torch, device)
        if problem:
            raise argparse.ArgumentTypeError(
                f"cannot compute on device {text!r}: {problem}; use 'auto', 'cpu' or 'cuda[:N]'"
            )


def _allocation_problem(torch, device) -> str | None:
    """Why torch cannot put a tensor on ``device`` here, or None."""
    try:
        torch.empty(1, device=device)
    except Exception as exc:  # torch raises one of several types per backend
        first = (str(exc).splitlines() or [""])[0].split(". ")[0]  # torch's can run for lines
        return f"{type(exc).__name__}: {first}"
    return None


class ThreadCount:
    """An argparse ``type``: ``"auto"`` or a number of intra-op threads (an int >= 1).

    Examples
    --------
    >>> ThreadCount()("auto"), ThreadCount()("2")
    ('auto', 2)
    >>> ThreadCount()("0")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: expected 'auto' or an int >= 1, got '0'
    """

    __name__ = "threads"

    def __call__(self, text: str) -> str | int:
        if text == "auto":
            return text
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise argparse.ArgumentTypeError(f"expected 'auto' or an int >= 1, got {text!r}")
        return value


class OutputPath:
    """An argparse ``type``: where a command will write, checked before it runs.

    Parameters
    ----------
    folder : bool
        True: a folder, made (with its parents) when missing; it must not be a file. False: a
        file in an existing folder; it must not be a folder.

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> OutputPath(folder=True)(folder + "/new/report") == folder + "/new/report"
    True
    >>> OutputPath(folder=False)(folder)
    Traceback (most recent call last):
    argparse.ArgumentTypeError: '...' is a folder; give the path of a file to write
    """

    def __init__(self, folder: bool):
        self.folder = folder
        self.__name__ = "folder" if folder else "file path"

    def __call__(self, text: str) -> str:
        path = Path(text)
        problem = self._problem(path)
        if problem:
            raise argparse.ArgumentTypeError(f"{text!r} {problem}")
        return text

    def prepare(self, text: str) -> None:
        """Make the folder (a file's folder must exist) and write a probe file in it.

        Permissions, a read-only or a virtual file system show only when one tries to write;
        the command calls this before it runs (:meth:`Command.start`), not after its work.

        Raises
        ------
        OSError
            When the folder cannot be made or written.
        """
        path = Path(text)
        folder = path if self.folder else path.parent
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
        if not self.folder and path.exists():
            with open(path, "a"):
                pass

    def _problem(self, path: Path) -> str | None:
        if self.folder and path.exists() and not path.is_dir():
            return "is a file; give a folder (it is made if missing)"
        if not self.folder and path.is_dir():
            return "is a folder; give the path of a file to write"
        if path.exists():
            return None if os.access(path, os.W_OK) else "is not writable"
        parent = path.parent
        if self.folder:  # made with its parents: the nearest existing one must be writable
            while not parent.exists() and parent != parent.parent:
                parent = parent.parent
        if not parent.is_dir():
            return f"cannot be written: {str(parent)!r} is not a folder"
        if not os.access(parent, os.W_OK | os.X_OK):
            return f"cannot be written: {str(parent)!r} is not writable"
        return None


#: The value of a switch that was not given, by its argparse action.
_SWITCH_DEFAULTS = {"store_true": False, "store_false": True}


@dataclass(frozen=True)
class Option:
    """One option of a command.

    Parameters
    ----------
    flag : str
        ``"--max-train"``; its ``dest`` is argparse's (``max_train``) unless ``argparse`` names one.
    help : str
        The ``--help`` text.
    argparse : dict
        The other arguments of ``ArgumentParser.add_argument`` (``type``, ``default``,
        ``choices``, ``action``, ``dest``, ``metavar``).
    field : str or None
        The configuration field the option fills, where a command builds one from its options.
    echo : {"always", "changed", "never"}
        When the reproducing command line (:meth:`Command.command_line`) writes the option:
        whenever it has a value, only when it differs from its default, or never.
    aliases : tuple of str, default=()
        Other spellings argparse accepts for the same option (``--quiet`` for
        ``--no-progress``); ``--help`` and the reproducing command line use ``flag``.
    """

    flag: str
    help: str
    argparse: dict = field(default_factory=dict)
    field: str | None = None
    echo: str = "always"
    aliases: tuple[str, ...] = ()

    @property
    def dest(self) -> str:
        return self.argparse.get("dest", self.flag.lstrip("-").replace("-", "_"))

    @property
    def is_switch(self) -> bool:
        return self.argparse.get("action") in _SWITCH_DEFAULTS

    @property
    def default(self):
        return self.argparse.get("default", _SWITCH_DEFAULTS.get(self.argparse.get("action")))

    def spell(self, value) -> list[str]:
        """The option as the command line that gave ``value`` wrote it (``[]``: not written).

        A switch is written when it was given; another option whenever it has a value, or
        with ``echo="changed"`` when the value is not the default.
        """
        if self.echo == "never" or value is None:
            return []
        if (self.echo == "changed" or self.is_switch) and value == self.default:
            return []
        if self.is_switch:
            return [self.flag]
        kind = self.argparse.get("type")
        return [self.flag, kind.spell(value) if isinstance(kind, CommaList) else str(value)]


#: What the commands add to the estimators they fit: no progress bar of the estimator's own
#: (skorch's way of removing a default callback), which a fit at ``verbose=0`` shows when it
#: runs long; the commands draw their own bars (``--no-progress``), and it would cut through them.
QUIET_FIT = {"callbacks__progress_bar": None}

#: The progress switch of every command that shows progress bars, declared once: one
#: spelling, ``--no-progress`` (as ``--no-standardize``), and ``--quiet`` accepted for it.
PROGRESS = Option(
    "--no-progress",
    "hide the progress bars",
    {"action": "store_false", "dest": "progress"},
    field="progress",
    echo="never",
    aliases=("--quiet",),
)

#: The ``--threads`` option of every command that trains or times networks, declared once.
THREADS = Option(
    "--threads",
    "torch's intra-op threads (and numpy's BLAS threads) for the whole run: auto (the "
    "default) runs the small networks "
    "of this command on one thread, where more threads gain nothing and slow the run down many "
    "times beside another busy process (docs/performance.md); or a number",
    {"type": ThreadCount(), "default": "auto"},
    echo="changed",
)


@dataclass(frozen=True)
class Command:
    """A command of ``python -m ebmclassifier``: its options and the function that runs it.

    Parameters
    ----------
    name, help, description : str
        As ``subparsers.add_parser`` takes them.
    options : tuple of Option
    run : callable
        ``run(args) -> int``, the exit status, given the parsed options.
    check : callable or None, default=None
        ``check(args)``: the checks across options that need no data (e.g. an option that
        only some data sets take), raising a ValueError; run before any output path is made.
    epilog : str, default=""
        Text after the options in ``--help``; each of its lines is wrapped on its own (a
        legend keeps one entry per line).
    auto_threads : callable or None, default=None
        ``auto_threads(args)``: the intra-op threads of a run with ``--threads auto`` (None:
        torch's setting, for a run of large networks, whose fits then choose by their
        network's size); None means one thread. ``--threads N`` runs everything on N threads,
        the fits too (their ``n_threads="auto"`` keeps N).
    """

    name: str
    help: str
    description: str
    options: tuple[Option, ...]
    run: Callable[[argparse.Namespace], int]
    check: Callable[[argparse.Namespace], None] | None = None
    epilog: str = ""
    auto_threads: Callable[[argparse.Namespace], int | None] | None = None

    def add_to(self, subparsers) -> argparse.ArgumentParser:
        """Register the command and its options; ``func`` is :meth:`start`, ``command`` the name."""
        parser = subparsers.add_parser(
            self.name,
            help=self.help,
            description=self.description,
            epilog=self.epilog or None,
            formatter_class=_LineWrappingFormatter,
        )
        for option in self.options:
            parser.add_argument(option.flag, *option.aliases, help=option.help, **option.argparse)
        parser.set_defaults(func=self.start, command=self.name)
        return parser

    def start(self, args: argparse.Namespace) -> int:
        """Check the options together (``check``), prepare what they name (an
        :class:`OutputPath` is made and probed, a :class:`DeviceName` probed), then run.

        Raises
        ------
        ValueError
            From ``check``, before anything is made.
        CommandError
            With status 2, naming the option, when a path cannot be written or the device
            cannot compute here.
        """
        if self.check is not None:
            self.check(args)
        for option in self.options:
            prepare = getattr(option.argparse.get("type"), "prepare", None)
            value = getattr(args, option.dest)
            if prepare is None or value is None:
                continue
            try:
                prepare(value)
            except OSError as exc:
                raise CommandError(
                    f"argument {option.flag}: {value!r} cannot be written ({exc.strerror or exc})",
                    status=2,
                ) from None
            except argparse.ArgumentTypeError as exc:
                raise CommandError(f"argument {option.flag}: {exc}", status=2) from None
        from .._utils.threads import intra_op_threads  # torch: only when a command runs

        threads = self.threads(args)
        pinned = getattr(args, THREADS.dest, None) != "auto"
        # numpy's BLAS (scikit-learn's baselines) on the same threads: a pool of one per core
        # spins waiting for a descheduled thread beside other busy processes (tests/experiments/
        # test_command.py; CONTRIBUTING.md, "A busy machine")
        blas = nullcontext() if threads is None else threadpool_limits(threads, user_api="blas")
        with intra_op_threads(threads, pin=pinned), blas:
            return self.run(args)

    def threads(self, args: argparse.Namespace) -> int | None:
        """The intra-op threads of the run: ``--threads``, ``auto_threads`` for ``auto``, or
        None (torch's setting) for a command without the option."""
        threads = getattr(args, THREADS.dest, None) if THREADS in self.options else None
        if threads != "auto":
            return threads
        return 1 if self.auto_threads is None else self.auto_threads(args)

    def fields(self, args: argparse.Namespace) -> dict:
        """``{field: value}`` of the options that fill a configuration field."""
        return {o.field: getattr(args, o.dest) for o in self.options if o.field is not None}

    def command_line(self, args: argparse.Namespace) -> str:
        """The command that reproduces the run, every option spelled out as ``echo`` says."""
        parts = ["python", "-m", "ebmclassifier", self.name]
        for option in self.options:
            parts += option.spell(getattr(args, option.dest))
        return shlex.join(parts)


class _LineWrappingFormatter(argparse.HelpFormatter):
    """Wraps each line of a description or epilog on its own: a paragraph flush left, as
    argparse fills it, and an entry of a list (a line that starts with blanks, as the legend's
    ``  name: what it is``) with a hanging indent, so that its continuation reads as its own."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        lines = []
        for line in text.splitlines():
            entry = line[: len(line) - len(line.lstrip())]
            hanging = indent + entry + ("    " if entry else "")
            lines.append(
                textwrap.fill(
                    line.strip(), width, initial_indent=indent + entry, subsequent_indent=hanging
                )
            )
        return "\n".join(lines)
